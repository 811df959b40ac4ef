#!/usr/bin/env bash
# Process start-up: whole processes timed from fork to exit, RUNS times each
# (default 10) after one untimed warm-up run, reported as median / min / max
# wall time and the median peak RSS.  No hyperfine needed; a few lines of
# Python do the timing (os.wait4 gives each process's rusage).
#
#   bench/cold_start.sh            # writes bench/results/cold_start.json, prints a table
#   RUNS=20 bench/cold_start.sh
#
# Measured:
#   python -c pass                  the interpreter alone (the floor)
#   docsum --help                   CLI start-up, no work
#   import cli.main                 docsum's own modules (what every command imports)
#   import cli.main, openai         plus the OpenAI client, which a server-backed
#                                   `docsum ask` imports before its first request
#   docsum ask (offline)            a whole question on sample_data/docs with the
#                                   extractive engine (store built once, first)
#   reference imports               LlamaIndex's imports in the reference adapter
#                                   (llama_index.core, OpenAILike, OpenAIEmbedding),
#                                   if the LlamaIndex venv exists: what the
#                                   reference would pay per process as a CLI
#
# Environment overrides: DOCSUM, DOCSUM_PY (the python of docsum's venv),
# LI_PY, RUNS, RESULTS.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
DOCSUM="${DOCSUM:-/tmp/dev/bin/docsum}"
DOCSUM_PY="${DOCSUM_PY:-$(dirname "$DOCSUM")/python}"
LI_PY="${LI_PY:-/tmp/bench-venvs/li/bin/python}"
RUNS="${RUNS:-10}"
RESULTS="${RESULTS:-$HERE/results}"
mkdir -p "$RESULTS"

WORK="$(mktemp -d /tmp/bench-cold.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
export DOCSUM_HOME="$WORK/home"
unset OPENAI_API_KEY OPENAI_BASE_URL DOCSUM_API_KEY DOCSUM_STORE DOCSUM_MODEL DOCSUM_EMBED_MODEL || true

STORE="$WORK/sample.sqlite"
"$DOCSUM" build "$REPO/sample_data/docs" --store "$STORE" --llm extractive -q

QUESTION="$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["question"])' "$REPO/sample_data/QUESTIONS.jsonl")"

SOURCE="$(find "$REPO/docsum" "$REPO/cli" -name '*.py' -print0 | sort -z | xargs -0 cat | sha256sum | cut -c1-12)"

python3 - "$RUNS" "$RESULTS/cold_start.json" "$DOCSUM" "$DOCSUM_PY" "$LI_PY" "$STORE" "$QUESTION" "$SOURCE" <<'PY'
import json, os, shlex, statistics, subprocess, sys, time

runs, out_path, docsum, dpy, lipy, store, question, source = sys.argv[1:9]
runs = int(runs)
commands = [
    ("python", "Python interpreter alone", [dpy, "-c", "pass"]),
    ("docsum-help", "docsum --help", [docsum, "--help"]),
    ("docsum-imports", "docsum's modules imported", [dpy, "-c", "import cli.main"]),
    ("docsum-imports-openai", "docsum's modules + openai (start-up of a server-backed ask)",
     [dpy, "-c", "import cli.main, openai"]),
    ("docsum-ask-offline", "docsum ask, offline engine, sample_data (8 docs)",
     [docsum, "ask", question, "--store", store, "--llm", "extractive", "--no-stream"]),
]
if os.access(lipy, os.X_OK):
    commands.append(("reference-imports", "reference: LlamaIndex imports of the adapter",
                     [lipy, "-c", "import llama_index.core; from llama_index.llms.openai_like import OpenAILike; "
                                  "from llama_index.embeddings.openai import OpenAIEmbedding"]))


def once(argv):
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _pid, status, ru = os.wait4(p.pid, 0)
    ms = (time.perf_counter() - t0) * 1000.0
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        raise SystemExit(f"exit {rc}: {shlex.join(argv)}\n{err.decode(errors='replace')[-2000:]}")
    return ms, ru.ru_maxrss / 1024.0


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


res = {"runs": runs, "date": time.strftime("%Y-%m-%d"), "docsum_source": source, "loadavg_before": loadavg(), "commands": []}
for name, label, argv in commands:
    once(argv)  # warm-up: page cache, .pyc files
    ms, rss = zip(*(once(argv) for _ in range(runs)))
    display = shlex.join(os.path.basename(a) if i == 0 else a for i, a in enumerate(argv))
    display = display.replace(store, "STORE").replace(shlex.quote(question), '"QUESTION"')
    res["commands"].append({
        "name": name, "label": label, "display": display,
        "median_ms": round(statistics.median(ms), 1), "min_ms": round(min(ms), 1), "max_ms": round(max(ms), 1),
        "all_ms": [round(x, 1) for x in ms], "rss_mib": round(statistics.median(rss), 1),
    })
    print(f"[cold_start] {name}: median {statistics.median(ms):.0f} ms", file=sys.stderr)
res["loadavg_after"] = loadavg()
with open(out_path, "w") as f:
    json.dump(res, f, indent=1)
PY

python3 "$HERE/tables.py" cold "$RESULTS"
