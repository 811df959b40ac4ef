#!/usr/bin/env bash
# Process start-up (issue 12), an older docsum ("before") beside this tree
# ("after"), side by side in one run: whole processes timed from fork to exit,
# RUNS times each (default 10) after one untimed warm-up, the two trees
# alternated run by run so that load drifts hit both alike. Reported: median,
# min and max wall time, median CPU time (user + system, from wait4: on a
# machine other work shares, the fairer comparison) and median peak RSS.
# With valgrind installed, each command is also run once under callgrind and
# its instructions counted: a figure that does not depend on the machine's
# load at all.
#
#   mkdir /tmp/docsum-before && git archive REV | tar -x -C /tmp/docsum-before
#   bench/cold_start.sh                # writes bench/results/cold_start.json, prints a table
#   RUNS=20 CALLGRIND=0 bench/cold_start.sh
#
# Measured (sample_data/docs, its store built once per tree first):
#   python -c pass            the interpreter alone (the floor of every command)
#   import openai             the OpenAI client alone, imported the ordinary way
#   openai as docsum          the package as docsum imports it (openaillm.openai_module;
#                             a tree without it imports it the ordinary way)
#   request                   that import, a client and one completion and one embedding
#                             request against the fake server, in one process
#   import cli.main, openai   the CLI's modules and the client (bench/tables.py's
#                             start-up estimate for the side-by-side query tables)
#   docsum --help, show, config show, summaries
#   ask offline               a whole question with the extractive engine
#   ask server                a whole question against the project's fake server
#                             (bench/fakeserver.py, 0 ms), lexical vectors
#
# Both trees run with the same interpreter as `python -m cli.main` from their
# folder, their modules compiled first (as an installed package has them).
# Environment: PY (the interpreter; default .venv/bin/python of this clone),
# BEFORE, RUNS, CALLGRIND, RESULTS, COMMANDS (a comma-separated subset of the
# names below; default all).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
PY="${PY:-$REPO/.venv/bin/python}"
BEFORE="${BEFORE:-/tmp/docsum-before}"
RUNS="${RUNS:-10}"
CALLGRIND="${CALLGRIND:-1}"
RESULTS="${RESULTS:-$HERE/results}"
mkdir -p "$RESULTS"
command -v valgrind >/dev/null 2>&1 || CALLGRIND=0

WORK="$(mktemp -d /tmp/bench-cold.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

"$PY" - "$REPO" "$BEFORE" "$RUNS" "$CALLGRIND" "$RESULTS/cold_start.json" "$WORK" "${COMMANDS:-}" <<'PY'
import json, os, re, statistics, subprocess, sys, time
from pathlib import Path

repo, before, runs, callgrind, out_path, work, only = sys.argv[1:8]
repo, work, runs, callgrind = Path(repo), Path(work), int(runs), callgrind == "1"
py = sys.executable
question = "How many member households did the Larkspur Valley Water Cooperative have at the end of 2023?"
# The package as docsum imports it; a tree without openaillm.openai_module imports it the ordinary way.
AS_DOCSUM = ("import docsum.models.openaillm as m\n"
             "(getattr(m, 'openai_module', None) or (lambda: __import__('openai')))()")
# Import, client, one completion and one embedding request (as a build or a question makes them).
REQUEST = """
import asyncio, sys
from docsum.models.openaillm import OpenAILLM
from docsum.models.prompts import TEXT_QA_PROMPT
llm = OpenAILLM(model='fake-chat', base_url=sys.argv[1], api_key=None, embed_model='fake-embed')
async def main():
    await llm.apredict(TEXT_QA_PROMPT, context_str='Bees make honey.', query_str='What do bees make?')
    await llm.aembed(['bees'])
asyncio.run(main())
"""


def loadavg() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


class Tree:
    def __init__(self, name: str, path: Path) -> None:
        self.name, self.path = name, path
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("DOCSUM_", "OPENAI_")) and k not in ("PYTHONDONTWRITEBYTECODE", "OPENBLAS_NUM_THREADS")}
        self.env.update({"DOCSUM_HOME": str(work / f"home-{name}"), "PYTHONPATH": str(path), "NO_COLOR": "1"})
        subprocess.run([py, "-m", "compileall", "-q", "docsum", "cli"], cwd=path, env=self.env, check=True, stdout=subprocess.DEVNULL)

    def argv(self, args: list[str]) -> list[str]:
        if args[0] == "python":
            return [py, *args[1:]]
        return [py, "-m", "cli.main", *args]

    def once(self, args: list[str]) -> tuple[float, float, float]:
        started = time.perf_counter()
        proc = subprocess.Popen(self.argv(args), cwd=self.path, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        err = proc.stderr.read()  # type: ignore[union-attr]
        _pid, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise SystemExit(f"{self.name}: {' '.join(args)[:200]} exited {code}:\n{err.decode(errors='replace')[-2000:]}")
        return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024

    def instructions(self, args: list[str]) -> int | None:
        env = {**self.env, "PYTHONMALLOC": "malloc"}  # valgrind counts the system allocator's work more faithfully
        proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *self.argv(args)],
                              cwd=self.path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        found = re.search(r"Collected\s*:\s*(\d+)", proc.stderr)
        return int(found.group(1)) if found and proc.returncode == 0 else None


trees = [Tree("after", repo)]
if (Path(before) / "cli" / "main.py").exists():
    trees.insert(0, Tree("before", Path(before)))
else:
    print(f"[cold_start] no before tree at {before}; measuring this tree only", file=sys.stderr)

server = subprocess.Popen([py, str(repo / "bench" / "fakeserver.py"), "--latency", "0", "--dim", "256"], stdout=subprocess.PIPE, text=True)
try:
    url = server.stdout.readline().strip()  # type: ignore[union-attr]
    served = ["--base-url", url, "--model", "fake-chat", "--embed-model", "docsum-lexical-v1", "--no-stream"]
    commands: dict[str, list[str]] = {}
    stores = {}
    for tree in trees:
        offline, remote = work / f"offline-{tree.name}.sqlite", work / f"server-{tree.name}.sqlite"
        tree.once(["build", str(repo / "sample_data" / "docs"), "--store", str(offline), "--llm", "extractive", "-q"])
        tree.once(["build", str(repo / "sample_data" / "docs"), "--store", str(remote), *served[:-1], "-q"])
        stores[tree.name] = (offline, remote)
    names = {
        "python": ["python", "-c", "pass"],
        "import-openai": ["python", "-c", "import openai"],
        "openai-as-docsum": ["python", "-c", AS_DOCSUM],
        "request": ["python", "-c", REQUEST, "{url}"],
        "imports-openai": ["python", "-c", "import cli.main, openai"],
        "help": ["--help"],
        "config-show": ["config", "show"],
        "summaries": ["summaries", "--store", "{offline}"],
        "show": ["show", "water_cooperative_annual_report_2023.md", "--store", "{offline}"],
        "ask-offline": ["ask", question, "--store", "{offline}", "--llm", "extractive", "--no-stream"],
        "ask-server": ["ask", question, "--store", "{remote}", *served],
    }
    if only:
        names = {k: v for k, v in names.items() if k in only.split(",")}
    result = {"runs": runs, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "loadavg_before": loadavg(),
              "trees": {t.name: str(t.path) for t in trees}, "rows": []}
    for name, template in names.items():
        argv = {t.name: [a if a in (AS_DOCSUM, REQUEST) else a.format(offline=stores[t.name][0], remote=stores[t.name][1], url=url)
                         for a in template] for t in trees}
        measured: dict[str, list[tuple[float, float, float]]] = {t.name: [] for t in trees}
        for tree in trees:
            tree.once(argv[tree.name])  # warm-up: page cache, the tokenizer table's cached copy, the BM25 index
        for _ in range(runs):
            for tree in trees:
                measured[tree.name].append(tree.once(argv[tree.name]))
        for tree in trees:
            wall, cpu, rss = zip(*measured[tree.name])
            row = {"command": name, "tree": tree.name, "median_s": round(statistics.median(wall), 3),
                   "min_s": round(min(wall), 3), "max_s": round(max(wall), 3), "median_cpu_s": round(statistics.median(cpu), 3),
                   "rss_mib": round(statistics.median(rss), 1), "loadavg": loadavg()}
            if callgrind:
                row["instructions"] = tree.instructions(argv[tree.name])
            result["rows"].append(row)
            print(f"[cold_start] {name} {tree.name}: median {row['median_s']} s, CPU {row['median_cpu_s']} s, "
                  f"{(row.get('instructions') or 0) / 1e6:.0f}M instructions", file=sys.stderr)
    result["loadavg_after"] = loadavg()
    # The form bench/tables.py reads (this tree's rows, under their old names).
    old_names = {"python": "python", "help": "docsum-help", "imports-openai": "docsum-imports-openai",
                 "ask-offline": "docsum-ask-offline"}
    result["commands"] = [
        {"name": old_names.get(r["command"], r["command"]), "label": r["command"], "display": " ".join(" ".join(names[r["command"]]).split())[:80],
         "median_ms": r["median_s"] * 1000, "min_ms": r["min_s"] * 1000, "max_ms": r["max_s"] * 1000, "rss_mib": r["rss_mib"]}
        for r in result["rows"] if r["tree"] == "after"
    ]
finally:
    server.terminate()
    server.wait(10)

Path(out_path).write_text(json.dumps(result, indent=1))


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a and b else "-"


print(f"{runs} runs each after a warm-up, trees alternated; load average {result['loadavg_before']} before, "
      f"{result['loadavg_after']} after.\n")
print("| command | before: median s | after: median s | before: CPU s | after: CPU s | CPU before/after | "
      "after: fastest s | before: instructions | after: instructions | instructions before/after | after: peak MiB |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for name in names:
    rows = {r["tree"]: r for r in result["rows"] if r["command"] == name}
    b, a = rows.get("before", {}), rows["after"]
    bi, ai = b.get("instructions"), a.get("instructions")
    print(f"| {name} | {b.get('median_s', '-')} | {a['median_s']} | {b.get('median_cpu_s', '-')} | {a['median_cpu_s']} | "
          f"{ratio(b.get('median_cpu_s'), a['median_cpu_s'])} | {a['min_s']} | {f'{bi / 1e6:,.0f}M' if bi else '-'} | "
          f"{f'{ai / 1e6:,.0f}M' if ai else '-'} | {ratio(bi, ai)} | {a['rss_mib']} |")
PY
