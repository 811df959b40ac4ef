"""Scale benchmark (issue 12): docsum at 1,000, 10,000 and 100,000 documents,
the current tree beside an older docsum ("before"), one configuration after
another, against the project's fake server (bench/fakeserver.py).

    git worktree add /tmp/docsum-before 4e85059          # the "before" tree (outside the repo)
    .venv/bin/python bench/scale.py all                  # every stage; JSON in bench/results/scale/
    .venv/bin/python bench/scale.py ask --sizes 1000     # one stage, one size
    .venv/bin/python bench/scale.py tables               # print the Markdown tables

Stages:
  corpus   N generated documents of about 150 words (cached in --work)
  build    build N documents at 0 ms latency, --concurrency 16: wall time, peak
           RSS, store and vector file size, the time per document, then the
           unchanged rebuild's wall time
  ask      `docsum ask` as a whole process, median of 5 (after one warm-up),
           peak RSS; embedding and hybrid retrieval; before and after on the
           same documents (the before store is a copy of the built store taken
           back to the schema the older docsum reads)
  cold     start-up: `docsum --help`, an offline ask and a server-backed ask on
           sample_data, median of 10; before and after
  batch    100 questions: one `ask --questions` process against 100 processes
  bound    builds of 100 and 1,000 documents at 300 ms per request,
           --concurrency 16, before and after, against ceil(N / 16) x 0.3 s

Both trees run with this interpreter (`python -m cli.main` from the tree), so
only docsum's own code differs. Peak RSS comes from wait4's rusage.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results" / "scale"
PY = sys.executable

WORDS = [
    "harbour", "ledger", "invoice", "orchard", "ferry", "bakery", "quarter", "revenue", "council", "library",
    "railway", "tenant", "contract", "warehouse", "shipment", "pension", "audit", "festival", "bridge", "clinic",
    "school", "budget", "river", "market", "permit", "harvest", "theatre", "museum", "factory", "license",
]


def loadavg() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def run(argv: list[str], cwd: Path, env: dict[str, str], stdin: bytes | None = None) -> tuple[float, float, int, bytes, bytes]:
    """(seconds, peak RSS MiB, exit code, stdout, stderr) of one whole process
    (reaped with wait4 here, which gives the child's own peak RSS)."""
    with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as errors:
        given.write(stdin or b"")
        given.seek(0)
        started = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=given, stdout=subprocess.PIPE, stderr=errors)
        assert proc.stdout is not None
        out = proc.stdout.read()
        _pid, status, usage = os.wait4(proc.pid, 0)
        errors.seek(0)
        err = errors.read()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - started, usage.ru_maxrss / 1024.0, proc.returncode, out, err


class Tree:
    """One docsum source tree run as `python -m cli.main` from its folder."""

    def __init__(self, name: str, path: Path, home: Path) -> None:
        self.name, self.path = name, path
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCSUM_", "OPENAI_"))}
        self.env.update({"DOCSUM_HOME": str(home / name), "PYTHONPATH": str(path), "NO_COLOR": "1"})

    def docsum(self, *args: str | Path, stdin: bytes | None = None, check: bool = True) -> tuple[float, float, int, bytes, bytes]:
        result = run([PY, "-m", "cli.main", *map(str, args)], self.path, self.env, stdin)
        if check and result[2] not in (0, 5):
            raise SystemExit(f"{self.name}: docsum {' '.join(map(str, args))[:200]} exited {result[2]}:\n{result[4].decode()[-3000:]}")
        return result


class Server:
    def __init__(self, latency: float, dim: int = 1536) -> None:
        self.proc = subprocess.Popen([PY, str(HERE / "fakeserver.py"), "--latency", str(latency), "--dim", str(dim)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def server_flags(url: str) -> list[str]:
    return ["--base-url", url, "--model", "fake-chat", "--embed-model", "fake-embed"]


def make_corpus(work: Path, n: int) -> Path:
    """N documents of about 150 words, 1,000 per folder; each names its own
    entity (Entity12345) a few times so a question can find it."""
    folder = work / f"corpus-{n}"
    done = folder / ".complete"
    if done.exists():
        return folder
    rng = random.Random(n)
    for i in range(n):
        sub = folder / f"part{i // 1000:03d}"
        if i % 1000 == 0:
            sub.mkdir(parents=True, exist_ok=True)
        words = [rng.choice(WORDS) for _ in range(140)]
        for k in range(0, 140, 35):
            words[k] = f"Entity{i}"
        text = f"Report {i}\n\n" + " ".join(words).capitalize() + ".\n"
        (sub / f"doc{i:06d}.txt").write_text(text)
    done.write_text("")
    return folder


def question_for(i: int) -> str:
    return f"What does the report say about Entity{i} and its budget?"


def save(name: str, data: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=1))
    print(f"[scale] {name}: {json.dumps(data)[:300]}", file=sys.stderr)


def take_back_to_v2(src: Path, dst: Path) -> None:
    """A copy of a store in the schema docsum before the vector file reads."""
    for suffix in ("", "-wal", "-shm"):
        if Path(str(src) + suffix).exists():
            shutil.copy(Path(str(src) + suffix), Path(str(dst) + suffix))
    conn = sqlite3.connect(dst, isolation_level=None)
    if conn.execute("PRAGMA user_version").fetchone()[0] == 3:
        conn.execute("BEGIN")
        for trigger in ("documents_vector_insert", "documents_vector_update", "documents_vector_delete"):
            conn.execute(f"DROP TRIGGER {trigger}")
        conn.execute("DROP TABLE vector_log")
        conn.execute("DELETE FROM meta WHERE key = 'store_id'")
        conn.execute("PRAGMA user_version = 2")
        conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def stage_replicate(args: argparse.Namespace, n: int, template_n: int = 1000) -> None:
    """A store for corpus-N made from the built store of corpus-1000: the
    documents of corpus-N, each with the summary, vector and nodes that
    document i % 1,000 got from the server, and its own path, size, time and
    hash, so that an unchanged rebuild of corpus-N finds every file unchanged.
    Costs seconds, where building 100,000 documents through the server on
    this shared machine costs hours; the rows are written by SQL, so the
    store's triggers log every vector as a build would."""
    corpus = make_corpus(args.work, n)
    template = args.work / f"store-{template_n}.sqlite"
    store = args.work / f"store-{n}.sqlite"
    for old in args.work.glob(f"store-{n}.sqlite*"):
        old.unlink()
    shutil.copy(template, store)
    conn = sqlite3.connect(store, isolation_level=None)
    columns = [r[1] for r in conn.execute("PRAGMA table_info(documents)")]
    rows = {r[columns.index("path")]: r for r in conn.execute("SELECT * FROM documents")}
    nodes = {r[0]: r for r in conn.execute("SELECT * FROM nodes")}
    root = next(iter(rows.values()))[columns.index("root")]
    conn.execute("BEGIN")
    conn.execute("DELETE FROM nodes")
    conn.execute("DELETE FROM documents")
    batch_docs, batch_nodes = [], []
    for i in range(n):
        rel = f"part{i // 1000:03d}/doc{i:06d}.txt"
        path = corpus / rel
        st = path.stat()
        source = list(rows[f"part000/doc{i % template_n:06d}.txt"])
        doc_id = hashlib.sha256(f"{corpus}\0{rel}".encode()).hexdigest()[:12]
        for name, value in (("doc_id", doc_id), ("path", rel), ("root", str(corpus)), ("size", st.st_size),
                            ("mtime_ns", st.st_mtime_ns), ("sha256", hashlib.sha256(path.read_bytes()).hexdigest())):
            source[columns.index(name)] = value
        node = list(nodes[rows[f"part000/doc{i % template_n:06d}.txt"][0]])
        node[0] = doc_id
        batch_docs.append(source)
        batch_nodes.append(node)
        if len(batch_docs) >= 5000 or i == n - 1:
            conn.executemany(f"INSERT INTO documents VALUES ({', '.join('?' * len(columns))})", batch_docs)
            conn.executemany(f"INSERT INTO nodes VALUES ({', '.join('?' * len(node))})", batch_nodes)
            batch_docs, batch_nodes = [], []
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert root  # the template's folder is replaced by corpus-N's
    save(f"replicate-{n}", {"documents": n, "template": template_n, "store_mib": round(store.stat().st_size / 2**20, 1)})


def stage_build(args: argparse.Namespace, after: Tree, n: int) -> None:
    corpus = make_corpus(args.work, n)
    store = args.work / f"store-{n}.sqlite"
    for old in args.work.glob(f"store-{n}.sqlite*"):
        old.unlink()
    with Server(0.0) as server:
        load = loadavg()
        seconds, rss, code, out, err = after.docsum("build", corpus, "--store", store, *server_flags(server.url),
                                                    "--concurrency", "16", "-q", "--json")
        report = json.loads(out)
        again_s, again_rss, _, again_out, _ = after.docsum("build", corpus, "--store", store, *server_flags(server.url),
                                                           "--concurrency", "16", "-q", "--json")
    vectors = Path(str(store) + ".vectors")
    save(f"build-{n}", {
        "documents": n, "loadavg_before": load, "loadavg_after": loadavg(), "wall_s": round(seconds, 2),
        "per_doc_ms": round(seconds / n * 1000, 2), "peak_rss_mib": round(rss, 1), "exit": code,
        "counts": report["documents"], "llm_calls": report["usage"]["llm_calls"],
        "embedding_calls": report["usage"]["embedding_calls"],
        "store_mib": round(store.stat().st_size / 2**20, 1),
        "vectors_mib": round(vectors.stat().st_size / 2**20, 1) if vectors.exists() else None,
        "unchanged_wall_s": round(again_s, 2), "unchanged_peak_rss_mib": round(again_rss, 1),
        "unchanged_counts": json.loads(again_out)["documents"],
    })


def stage_window(args: argparse.Namespace, after: Tree, n: int) -> None:
    """A build of N new documents for --window seconds, then SIGINT (on this
    shared machine a whole 100,000-document build takes hours): documents
    committed, their rate, the peak RSS over the window (discovery and
    reconciliation of all N files included), and that SIGINT leaves a store
    the next build resumes."""
    import signal

    corpus = make_corpus(args.work, n)
    store = args.work / f"window-{n}.sqlite"
    for old in args.work.glob(store.name + "*"):
        old.unlink()
    with Server(0.0) as server:
        load = loadavg()
        argv = [PY, "-m", "cli.main", "build", str(corpus), "--store", str(store), *server_flags(server.url),
                "--concurrency", "16", "-q", "--json"]
        started = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=after.path, env=after.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            proc.wait(args.window)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
        _pid, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
    conn = sqlite3.connect(store)
    done = conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    first, last = conn.execute("SELECT MIN(started_at), MAX(finished_at) FROM runs").fetchone()
    conn.close()
    save(f"window-{n}", {"documents": n, "window_s": args.window, "wall_s": round(seconds, 1), "committed": done,
                         "docs_per_s": round(done / seconds, 1), "ms_per_doc_including_start": round(seconds / max(done, 1) * 1000, 1),
                         "peak_rss_mib": round(usage.ru_maxrss / 1024.0, 1), "exit": os.waitstatus_to_exitcode(status),
                         "store_mib": round(store.stat().st_size / 2**20, 1), "run": [first, last],
                         "loadavg_before": load, "loadavg_after": loadavg()})


def stage_unchanged(args: argparse.Namespace, after: Tree, n: int) -> None:
    """The unchanged rebuild alone (of a replicated store): wall time and peak RSS."""
    corpus = make_corpus(args.work, n)
    store = args.work / f"store-{n}.sqlite"
    with Server(0.0) as server:
        load = loadavg()
        seconds, rss, code, out, _ = after.docsum("build", corpus, "--store", store, *server_flags(server.url),
                                                  "--concurrency", "16", "-q", "--json")
    report = json.loads(out)
    save(f"unchanged-{n}", {"documents": n, "wall_s": round(seconds, 2), "peak_rss_mib": round(rss, 1), "exit": code,
                            "counts": report["documents"], "llm_calls": report["usage"]["llm_calls"],
                            "loadavg_before": load, "loadavg_after": loadavg()})


def stage_ask(args: argparse.Namespace, trees: list[Tree], n: int) -> None:
    store = args.work / f"store-{n}.sqlite"
    if not store.exists():
        raise SystemExit(f"no {store}: run the build stage for {n} first")
    before_store = args.work / f"store-{n}-before.sqlite"
    take_back_to_v2(store, before_store)
    rows = []
    with Server(0.0) as server:
        for retriever in ("embedding", "hybrid"):
            for tree in trees:
                path = store if tree.name == "after" else before_store
                times, peaks = [], []
                for run_no in range(args.runs + 1):
                    q = question_for((run_no * 7919) % n)
                    seconds, rss, code, out, err = tree.docsum("ask", q, "--store", path, *server_flags(server.url),
                                                               "--retriever", retriever, "--json")
                    if run_no:  # the first run warms the page cache
                        times.append(seconds)
                        peaks.append(rss)
                rows.append({"documents": n, "retriever": retriever, "tree": tree.name, "loadavg": loadavg(),
                             "median_s": round(statistics.median(times), 3), "all_s": [round(t, 3) for t in times],
                             "peak_rss_mib": round(max(peaks), 1), "exit": code,
                             "documents_found": [d["path"] for d in json.loads(out)["documents"]]})
                print(f"[scale] ask {n} {retriever} {tree.name}: {rows[-1]['median_s']} s {rows[-1]['peak_rss_mib']} MiB", file=sys.stderr)
    save(f"ask-{n}", {"rows": rows})


def stage_cold(args: argparse.Namespace, trees: list[Tree]) -> None:
    rows = []
    question = "How much did Brindle & Daughter pay for the oven, and when was the auction?"
    with Server(0.0) as server:
        for tree in trees:
            offline = args.work / f"sample-offline-{tree.name}.sqlite"
            served = args.work / f"sample-server-{tree.name}.sqlite"
            for old in list(args.work.glob(f"sample-*-{tree.name}.sqlite*")):
                old.unlink()
            tree.docsum("build", REPO / "sample_data" / "docs", "--store", offline, "--llm", "extractive", "-q")
            tree.docsum("build", REPO / "sample_data" / "docs", "--store", served, *server_flags(server.url), "-q")
            commands = {
                "help": ["--help"],
                "ask-offline": ["ask", question, "--store", offline, "--llm", "extractive", "--no-stream"],
                "ask-server": ["ask", question, "--store", served, *server_flags(server.url), "--no-stream"],
            }
            for name, argv in commands.items():
                tree.docsum(*argv)
                times = [tree.docsum(*argv)[0] for _ in range(args.cold_runs)]
                rows.append({"command": name, "tree": tree.name, "median_s": round(statistics.median(times), 3),
                             "min_s": round(min(times), 3), "max_s": round(max(times), 3), "loadavg": loadavg()})
                print(f"[scale] cold {name} {tree.name}: {rows[-1]['median_s']} s", file=sys.stderr)
    save("cold", {"rows": rows})


def stage_batch(args: argparse.Namespace, after: Tree, n: int = 1000) -> None:
    store = args.work / f"store-{n}.sqlite"
    questions = [question_for(i * 9 % n) for i in range(100)]
    lines = "".join(json.dumps({"id": i, "question": q}) + "\n" for i, q in enumerate(questions)).encode()
    with Server(0.0) as server:
        flags = ["--store", store, *server_flags(server.url)]
        load = loadavg()
        batch_s, batch_rss, code, out, _ = after.docsum("ask", "--questions", "-", *flags, stdin=lines)
        answered = [json.loads(line) for line in out.decode().splitlines()]
        # One process per question, for the first --batch-sample questions,
        # scaled to 100 (all 100 take too long on a loaded machine).
        sample = questions[: args.batch_sample]
        started = time.perf_counter()
        for q in sample:
            after.docsum("ask", q, *flags, "--json")
        single_s = (time.perf_counter() - started) * len(questions) / len(sample)
    save("batch", {"documents": n, "questions": 100, "one_process_s": round(batch_s, 2), "one_process_rss_mib": round(batch_rss, 1),
                   "answers": len(answered), "exit": code, "processes_s": round(single_s, 2),
                   "processes_timed": len(sample), "ratio": round(single_s / batch_s, 1),
                   "loadavg_before": load, "loadavg_after": loadavg()})


def stage_bound(args: argparse.Namespace, trees: list[Tree]) -> None:
    rows = []
    with Server(0.3) as server:
        for n in (100, 1000):
            corpus = make_corpus(args.work, n)
            bound = math.ceil(n / 16) * 0.3
            for tree in trees:
                store = args.work / f"bound-{n}-{tree.name}.sqlite"
                for old in args.work.glob(store.name + "*"):
                    old.unlink()
                seconds, rss, code, out, _ = tree.docsum("build", corpus, "--store", store, *server_flags(server.url),
                                                         "--concurrency", "16", "-q", "--json")
                report = json.loads(out)
                rows.append({"documents": n, "tree": tree.name, "wall_s": round(seconds, 2), "bound_s": round(bound, 2),
                             "ratio_to_bound": round(seconds / bound, 2), "llm_calls": report["usage"]["llm_calls"],
                             "embedding_calls": report["usage"]["embedding_calls"], "loadavg": loadavg()})
                print(f"[scale] bound {n} {tree.name}: {seconds:.1f} s against {bound:.1f} s", file=sys.stderr)
    save("bound", {"rows": rows})


def tables() -> None:
    def load(name: str) -> Any:
        path = RESULTS / f"{name}.json"
        return json.loads(path.read_text()) if path.exists() else None

    print("| documents | retriever | before: median s | after: median s | ratio | before: peak MiB | after: peak MiB |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n in (1000, 10000, 100000):
        data = load(f"ask-{n}")
        if not data:
            continue
        for retriever in ("embedding", "hybrid"):
            by = {r["tree"]: r for r in data["rows"] if r["retriever"] == retriever}
            if "before" in by and "after" in by:
                b, a = by["before"], by["after"]
                print(f"| {n:,} | {retriever} | {b['median_s']:.2f} | {a['median_s']:.2f} | {b['median_s'] / a['median_s']:.1f}x | "
                      f"{b['peak_rss_mib']:.0f} | {a['peak_rss_mib']:.0f} |")
            elif "after" in by:
                a = by["after"]
                print(f"| {n:,} | {retriever} | - | {a['median_s']:.2f} | - | - | {a['peak_rss_mib']:.0f} |")
    cold = load("cold")
    if cold:
        print("\n| start-up | before: median s | after: median s | ratio |\n|---|---:|---:|---:|")
        for name in ("help", "ask-offline", "ask-server"):
            by = {r["tree"]: r for r in cold["rows"] if r["command"] == name}
            if "before" in by and "after" in by:
                print(f"| {name} | {by['before']['median_s']:.3f} | {by['after']['median_s']:.3f} | "
                      f"{by['before']['median_s'] / by['after']['median_s']:.2f}x |")
    bound = load("bound")
    if bound:
        print("\n| documents | tree | wall s | bound s | wall / bound | LLM calls | embedding calls |\n|---:|---|---:|---:|---:|---:|---:|")
        for r in bound["rows"]:
            print(f"| {r['documents']:,} | {r['tree']} | {r['wall_s']:.1f} | {r['bound_s']:.1f} | {r['ratio_to_bound']:.2f} | "
                  f"{r['llm_calls']} | {r['embedding_calls']} |")
    for n in (1000, 10000, 100000):
        data = load(f"build-{n}")
        if data:
            print(f"\nbuild {n:,}: {json.dumps(data)}")
    batch = load("batch")
    if batch:
        print(f"\nbatch: {json.dumps(batch)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stages", nargs="+", choices=["corpus", "build", "replicate", "unchanged", "window", "ask", "cold", "batch", "bound", "tables", "all"])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--before", type=Path, default=Path(os.environ.get("DOCSUM_BEFORE", "/tmp/docsum-before")))
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("SCALE_WORK", "/tmp/bench-scale")))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cold-runs", type=int, default=10)
    parser.add_argument("--batch-sample", type=int, default=100, help="processes timed for the one-per-question side of batch")
    parser.add_argument("--window", type=float, default=600.0, help="seconds the window stage builds before SIGINT")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    after = Tree("after", REPO, args.work)
    trees = [after]
    if (args.before / "cli" / "main.py").exists():
        trees.insert(0, Tree("before", args.before, args.work))
    else:
        print(f"[scale] no before tree at {args.before}; measuring this tree only", file=sys.stderr)
    stages = ["corpus", "build", "ask", "cold", "batch", "bound", "tables"] if "all" in args.stages else args.stages
    for stage in stages:
        if stage == "corpus":
            for n in sizes:
                make_corpus(args.work, n)
        elif stage == "build":
            for n in sizes:
                stage_build(args, after, n)
        elif stage == "replicate":
            for n in sizes:
                stage_replicate(args, n)
        elif stage == "window":
            for n in sizes:
                stage_window(args, after, n)
        elif stage == "unchanged":
            for n in sizes:
                stage_unchanged(args, after, n)
        elif stage == "ask":
            for n in sizes:
                stage_ask(args, trees, n)
        elif stage == "cold":
            stage_cold(args, trees)
        elif stage == "batch":
            stage_batch(args, after)
        elif stage == "bound":
            stage_bound(args, trees)
        elif stage == "tables":
            tables()


if __name__ == "__main__":
    main()
