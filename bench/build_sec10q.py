#!/usr/bin/env python3
"""Build cost on a real corpus: the 20 SEC 10-Q filings (about 3.4 MB of text,
73-255 KB per document) summarized by docsum and, for comparison, by the
reference system (LlamaIndex's DocumentSummaryIndex through the shared
harness's peer_llamaindex.py), against its fakellm.py at each latency. The
harness is not part of this repository: set SHARED to its folder.

  python3 bench/build_sec10q.py                       # latency 0 and 300 ms, both systems
  python3 bench/build_sec10q.py --latency 300 --no-reference

For each latency a fresh fakellm is started (by path, from $SHARED) and
stopped by its pid.  Measured per build, from the server's counters (not the
tools' own reports): LLM calls, prompt and completion tokens (cl100k),
embedding calls, the most requests in flight at once, errors; and by this
script: wall time of the whole process and its peak RSS (ru_maxrss of the
rusage that os.wait4 returns for that one child, the same accounting as
getrusage(RUSAGE_CHILDREN) but scoped to the process measured, so one big
child cannot mask a smaller one).  docsum then gets an unchanged rebuild on
the same store (should cost 0 calls), and its own --json report is kept so
that its self-reported usage can be checked against the server.

Both systems get the same settings: model name "fake-llm", context window
3900, chunks of 1024 tokens with 200 overlap, text-embedding-3-small for the
summary embeddings.  The reference runs with --skip-rebuild and one question
(its query phase on a whole 10-Q is not what this script measures).

Writes bench/results/sec10q-lat{L}.json and prints a Markdown table.
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
# Nothing outside the clone is assumed: the shared harness (fakellm.py, whose
# counters this script reads, and the reference adapter) and the corpus are
# named by the caller (SHARED, and --corpus or EVAL).
SHARED = os.environ.get("SHARED", "")
DEFAULT_CORPUS = os.path.join(os.environ["EVAL"], "sec-10-q") if os.environ.get("EVAL") else None


def http_json(url, method="GET"):
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"null")


def counters(stats):
    llm, emb = stats["llm"], stats["embeddings"]
    return {
        "llm_calls": llm["requests"],
        "prompt_tokens_cl100k": llm["prompt_tokens_cl100k"],
        "completion_tokens_cl100k": llm["completion_tokens_cl100k"],
        "prompt_tokens_ws": llm["prompt_tokens_ws"],
        "embedding_calls": emb["requests"],
        "embedding_inputs": emb["inputs"],
        "max_inflight": stats["max_inflight"],
        "errors": stats["errors"],
    }


class FakeLLM:
    """fakellm.py on a free port, started and stopped by this script (by pid)."""

    def __init__(self, python, latency_ms, log_path):
        self.port_file = tempfile.mktemp(prefix="fakellm-port-")
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [
                python,
                os.path.join(SHARED, "fakellm.py"),
                "--port",
                "0",
                "--port-file",
                self.port_file,
                "--latency-ms",
                str(latency_ms),
            ],
            stdout=self.log,
            stderr=self.log,
        )
        deadline = time.time() + 30
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                raise SystemExit(f"fakellm did not start, see {log_path}")
            time.sleep(0.1)
        time.sleep(0.05)
        with open(self.port_file) as f:
            self.port = int(f.read().strip())
        os.remove(self.port_file)
        self.base = f"http://127.0.0.1:{self.port}/v1"
        self.stats_url = f"http://127.0.0.1:{self.port}/stats"

    def reset(self):
        http_json(self.stats_url + "/reset", "POST")

    def stats(self):
        return counters(http_json(self.stats_url))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()


def run_measured(argv, env, stdout_path=None, stderr_file=None):
    """Run one process; wall time, exit code, peak RSS (MiB) from os.wait4."""
    out = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=out, stderr=stderr_file, env=env)
    _pid, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if stdout_path:
        out.close()
    return {"wall_s": round(wall, 3), "rc": proc.returncode, "peak_rss_mib": round(ru.ru_maxrss / 1024.0, 1)}


def docsum_build(a, fake, store, env, log, tag, report_path):
    argv = [
        a.docsum,
        "build",
        a.corpus,
        "--store",
        store,
        "--base-url",
        fake.base,
        "--model",
        "fake-llm",
        "--context-window",
        "3900",
        "--embed-model",
        "text-embedding-3-small",
        "--chunk-size",
        "1024",
        "--chunk-overlap",
        "200",
        "--json",
        "-q",
    ]
    if a.concurrency:
        argv += ["--concurrency", str(a.concurrency)]
    fake.reset()
    log.write(f"[sec10q] docsum {tag}: {' '.join(argv)}\n".encode())
    log.flush()
    r = run_measured(argv, env, stdout_path=report_path, stderr_file=log)
    r["server"] = fake.stats()
    r["command"] = " ".join(argv)
    try:
        with open(report_path) as f:
            rep = json.load(f)
        r["self_reported"] = {
            "documents": rep.get("documents"),
            "usage": rep.get("usage"),
            "elapsed_s": rep.get("elapsed_s"),
            "failures": rep.get("failures"),
        }
    except (OSError, ValueError) as exc:
        r["self_reported"] = {"error": f"no JSON report: {exc}"}
    if r["rc"] != 0:
        sys.stderr.write(f"[sec10q] docsum {tag} exited {r['rc']} (see the log)\n")
    return r


def reference_build(a, fake, env, log, workdir):
    """peer_llamaindex.py on the same folder, one question, no from-scratch rebuild."""
    qfile = os.path.join(workdir, "one-question.jsonl")
    with open(os.path.join(a.corpus, "questions.jsonl")) as f:
        first = json.loads(f.readline())
    with open(qfile, "w") as f:
        f.write(json.dumps({"id": first["id"], "question": first["question"], "doc": first["gold_docs"][0]}) + "\n")
    argv = [
        a.li_python,
        os.path.join(SHARED, "peer_llamaindex.py"),
        "--corpus",
        a.corpus,
        "--questions",
        qfile,
        "--base-url",
        fake.base,
        "--context-window",
        "3900",
        "--skip-rebuild",
        "--max-questions",
        "1",
    ]
    log.write(f"[sec10q] reference: {' '.join(argv)}\n".encode())
    log.flush()
    out = os.path.join(workdir, "reference.json")
    r = run_measured(argv, env, stdout_path=out, stderr_file=log)
    if r["rc"] != 0:
        sys.stderr.write(f"[sec10q] reference exited {r['rc']} (see the log)\n")
        return {"error": f"exit {r['rc']}"}
    with open(out) as f:
        res = json.load(f)
    b = res["build"]
    return {
        "build_s": b.get("build_s"),
        "process_wall_s": b.get("process_wall_s"),
        "import_s": (b.get("notes") or {}).get("import_s"),
        "documents": b.get("documents"),
        "chunks": b.get("chunks"),
        "peak_rss_mib": b.get("peak_rss_mib"),
        "server": b.get("server"),
        "persist_bytes": (res.get("persist") or {}).get("bytes"),
        "refresh": {
            "server": (res.get("refresh") or {}).get("server"),
            "process_wall_s": (res.get("refresh") or {}).get("process_wall_s"),
            "load_index_s": (res.get("refresh") or {}).get("load_index_s"),
        },
        "versions": res.get("versions"),
    }


def source_fingerprint():
    """First 12 hex digits of sha256 over docsum's sources (docsum/*.py, cli/*.py, sorted):
    which code was measured, without git."""
    import glob
    import hashlib

    h = hashlib.sha256()
    for pattern in ("docsum/*.py", "cli/*.py"):
        for p in sorted(glob.glob(os.path.join(REPO, pattern))):
            with open(p, "rb") as f:
                h.update(f.read())
    return h.hexdigest()[:12]


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--corpus",
        default=DEFAULT_CORPUS,
        required=DEFAULT_CORPUS is None,
        help="the SEC 10-Q text folder (default: $EVAL/sec-10-q)",
    )
    ap.add_argument("--latency", type=int, nargs="+", default=[0, 300])
    ap.add_argument("--docsum", default=os.environ.get("DOCSUM", "/tmp/dev/bin/docsum"))
    ap.add_argument(
        "--li-python",
        default=os.environ.get("LI_PY", "/tmp/bench-venvs/li/bin/python"),
        help="python of the LlamaIndex venv; also runs fakellm (it has tiktoken for cl100k counts)",
    )
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--concurrency", type=int, default=None, help="docsum --concurrency (default: docsum's own, 8)")
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    a = ap.parse_args(argv)
    if not SHARED or not os.path.isfile(os.path.join(SHARED, "fakellm.py")):
        ap.error("set SHARED to the shared bench harness folder (fakellm.py, peer_llamaindex.py)")

    os.makedirs(a.results, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="bench-sec10q-")
    env = dict(os.environ, OPENAI_API_KEY="fake-key", DOCSUM_HOME=os.path.join(workdir, "home"))
    env.pop("OPENAI_BASE_URL", None)
    rows = []
    try:
        for lat in a.latency:
            log_path = os.path.join(a.results, f"sec10q-lat{lat}.log")
            with open(log_path, "wb") as log:
                fake = FakeLLM(a.li_python, lat, log_path)
                try:
                    store = os.path.join(workdir, f"sec10q-lat{lat}.sqlite")
                    res = {
                        "latency_ms": lat,
                        "corpus": a.corpus,
                        "date": time.strftime("%Y-%m-%d"),
                        "loadavg_before": loadavg(),
                        "docsum_source": source_fingerprint(),
                    }
                    res["docsum"] = docsum_build(
                        a, fake, store, env, log, "build", os.path.join(workdir, f"docsum-build-{lat}.json")
                    )
                    res["docsum"]["store_bytes"] = os.path.getsize(store) if os.path.exists(store) else None
                    res["docsum_rebuild"] = docsum_build(
                        a,
                        fake,
                        store,
                        env,
                        log,
                        "unchanged rebuild",
                        os.path.join(workdir, f"docsum-rebuild-{lat}.json"),
                    )
                    if not a.no_reference:
                        fake.reset()
                        res["reference"] = reference_build(a, fake, env, log, workdir)
                    res["loadavg_after"] = loadavg()
                finally:
                    fake.stop()
            with open(os.path.join(a.results, f"sec10q-lat{lat}.json"), "w") as f:
                json.dump(res, f, indent=1)
            rows.append(res)
            sys.stderr.write(f"[sec10q] latency {lat} ms done\n")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    sys.path.insert(0, HERE)
    from tables import sec10q_table  # noqa: E402

    print(sec10q_table(rows))


if __name__ == "__main__":
    main()
