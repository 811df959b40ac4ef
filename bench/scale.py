"""Scale benchmark (issue 12): docsum at 1,000, 10,000 and 100,000 documents,
the current tree beside an older docsum ("before"), one configuration after
another, against the project's fake server (bench/fakeserver.py). Needs only
a clone: the corpora are generated.

    mkdir /tmp/docsum-before && git archive REV | tar -x -C /tmp/docsum-before   # the "before" tree
    .venv/bin/python bench/scale.py all                  # every stage; JSON in bench/results/scale/
    .venv/bin/python bench/scale.py ask --sizes 1000     # one stage, one size
    .venv/bin/python bench/scale.py tables               # print the Markdown tables

Stages:
  corpus     N generated documents of about 150 words (cached in --work)
  build      build N documents at 0 ms latency, --concurrency 16: wall and CPU
             time, peak RSS, store and vector file size, the time per
             document, then the unchanged rebuild's wall time
  replicate  a store for corpus-N made in seconds from the built 1,000 (see
             stage_replicate), where a build through the server takes long
  unchanged  the unchanged rebuild of corpus-N, each tree on its own copy
  window     a build of N new documents stopped after --window seconds
  ask        `docsum ask` as a whole process, median of --runs (after one
             warm-up), wall and CPU time, peak RSS; --retrievers (embedding,
             hybrid and fused); each tree on its own copy of the store
  firstask   the build that writes the vector file (and BM25 index) from
             nothing beside a replicated store, then the first fused
             question after it and a second: wall, CPU, peak RSS
  cold       start-up: `docsum --help`, an offline and a server-backed ask,
             show and config show on sample_data, median of --cold-runs,
             the trees alternated run by run
  batch      100 questions: one `ask --questions` process against 100 processes
  bound      builds of 100 and 1,000 documents at 300 ms per request,
             --concurrency 16, before and after, against ceil(N / 16) x 0.3 s
             (and that plus the start-up, the same build unchanged)

Both trees run with this interpreter (`python -m cli.main` from the tree,
modules compiled first), so only docsum's own code differs. Peak RSS and CPU
time come from wait4's rusage; on a machine other work shares, CPU time is
the fairer comparison and wall time is reported beside it.
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results" / "scale"
PY = sys.executable

WORDS = [
    "harbour",
    "ledger",
    "invoice",
    "orchard",
    "ferry",
    "bakery",
    "quarter",
    "revenue",
    "council",
    "library",
    "railway",
    "tenant",
    "contract",
    "warehouse",
    "shipment",
    "pension",
    "audit",
    "festival",
    "bridge",
    "clinic",
    "school",
    "budget",
    "river",
    "market",
    "permit",
    "harvest",
    "theatre",
    "museum",
    "factory",
    "license",
]


def loadavg() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


@dataclass
class Proc:
    """One whole process: wall seconds, CPU seconds (user + system, its own
    and its children's: fair to compare on a loaded machine, where wall time
    is not), peak RSS in MiB (wait4's rusage), exit code, output."""

    seconds: float
    cpu: float
    rss: float
    code: int
    out: bytes
    err: bytes

    def __iter__(self) -> Iterator[Any]:  # (seconds, rss, code, out, err), as the stages unpack it
        return iter((self.seconds, self.rss, self.code, self.out, self.err))


def run(argv: list[str], cwd: Path, env: dict[str, str], stdin: bytes | None = None) -> Proc:
    """One whole process, reaped with wait4 here (which gives the child's own
    peak RSS and CPU time)."""
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
    return Proc(
        time.perf_counter() - started,
        usage.ru_utime + usage.ru_stime,
        usage.ru_maxrss / 1024.0,
        os.waitstatus_to_exitcode(status),
        out,
        err,
    )


class Tree:
    """One docsum source tree run as `python -m cli.main` from its folder,
    with its modules compiled first, as an installed package has them (a
    PYTHONDONTWRITEBYTECODE environment would otherwise recompile docsum in
    every process and add tenths of a second to each start)."""

    def __init__(self, name: str, path: Path, home: Path) -> None:
        self.name, self.path = name, path
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("DOCSUM_", "OPENAI_")) and k not in ("PYTHONDONTWRITEBYTECODE", "OPENBLAS_NUM_THREADS")
        }
        self.env.update({"DOCSUM_HOME": str(home / name), "PYTHONPATH": str(path), "NO_COLOR": "1"})
        subprocess.run(
            [PY, "-m", "compileall", "-q", "docsum", "cli"],
            cwd=path,
            env=self.env,
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def docsum(self, *args: str | Path, stdin: bytes | None = None, check: bool = True) -> Proc:
        result = run([PY, "-m", "cli.main", *map(str, args)], self.path, self.env, stdin)
        if check and result.code not in (0, 5):
            raise SystemExit(
                f"{self.name}: docsum {' '.join(map(str, args))[:200]} exited {result.code}:\n{result.err.decode()[-3000:]}"
            )
        return result


class Server:
    def __init__(self, latency: float, dim: int = 1536, trace: Path | None = None) -> None:
        traced = ["--trace", str(trace)] if trace is not None else []
        self.proc = subprocess.Popen(
            [PY, str(HERE / "fakeserver.py"), "--latency", str(latency), "--dim", str(dim), *traced],
            stdout=subprocess.PIPE,
            text=True,
        )
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


def remove_store(work: Path, name: str) -> None:
    """A store and everything beside it (WAL, lock, vector file, BM25 index)."""
    for old in work.glob(name + "*"):
        shutil.rmtree(old) if old.is_dir() else old.unlink()


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
    remove_store(args.work, f"store-{n}.sqlite")
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
        for name, value in (
            ("doc_id", doc_id),
            ("path", rel),
            ("root", str(corpus)),
            ("size", st.st_size),
            ("mtime_ns", st.st_mtime_ns),
            ("sha256", hashlib.sha256(path.read_bytes()).hexdigest()),
        ):
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
    save(
        f"replicate-{n}", {"documents": n, "template": template_n, "store_mib": round(store.stat().st_size / 2**20, 1)}
    )


def stage_build(args: argparse.Namespace, after: Tree, n: int) -> None:
    corpus = make_corpus(args.work, n)
    store = args.work / f"store-{n}.sqlite"
    remove_store(args.work, f"store-{n}.sqlite")
    with Server(0.0) as server:
        load = loadavg()
        first = after.docsum(
            "build", corpus, "--store", store, *server_flags(server.url), "--concurrency", "16", "-q", "--json"
        )
        seconds, rss, code, out, err = first
        report = json.loads(out)
        again = after.docsum(
            "build", corpus, "--store", store, *server_flags(server.url), "--concurrency", "16", "-q", "--json"
        )
        again_s, again_rss, _, again_out, _ = again
    vectors = Path(str(store) + ".vectors")
    save(
        f"build-{n}",
        {
            "documents": n,
            "loadavg_before": load,
            "loadavg_after": loadavg(),
            "wall_s": round(seconds, 2),
            # The server answers at once (0 ms): all of the time per document is
            # docsum's overhead around its LLM call (and the server's own CPU,
            # which shares the machine).
            "per_doc_ms": round(seconds / n * 1000, 2),
            "cpu_s": round(first.cpu, 1),
            "cpu_per_doc_ms": round(first.cpu / n * 1000, 2),
            "peak_rss_mib": round(rss, 1),
            "exit": code,
            "counts": report["documents"],
            "llm_calls": report["usage"]["llm_calls"],
            "embedding_calls": report["usage"]["embedding_calls"],
            "store_mib": round(store.stat().st_size / 2**20, 1),
            "vectors_mib": round(vectors.stat().st_size / 2**20, 1) if vectors.exists() else None,
            "unchanged_wall_s": round(again_s, 2),
            "unchanged_cpu_s": round(again.cpu, 2),
            "unchanged_peak_rss_mib": round(again_rss, 1),
            "unchanged_counts": json.loads(again_out)["documents"],
        },
    )


def stage_window(args: argparse.Namespace, after: Tree, n: int) -> None:
    """A build of N new documents for --window seconds, then SIGINT (on this
    shared machine a whole 100,000-document build takes hours): documents
    committed, their rate, the peak RSS over the window (discovery and
    reconciliation of all N files included), and that SIGINT leaves a store
    the next build resumes."""
    import signal

    corpus = make_corpus(args.work, n)
    store = args.work / f"window-{n}.sqlite"
    remove_store(args.work, store.name)
    with Server(0.0) as server:
        load = loadavg()
        argv = [
            PY,
            "-m",
            "cli.main",
            "build",
            str(corpus),
            "--store",
            str(store),
            *server_flags(server.url),
            "--concurrency",
            "16",
            "-q",
            "--json",
        ]
        started = time.perf_counter()
        proc = subprocess.Popen(
            argv, cwd=after.path, env=after.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
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
    save(
        f"window-{n}",
        {
            "documents": n,
            "window_s": args.window,
            "wall_s": round(seconds, 1),
            "committed": done,
            "docs_per_s": round(done / seconds, 1),
            "ms_per_doc_including_start": round(seconds / max(done, 1) * 1000, 1),
            "peak_rss_mib": round(usage.ru_maxrss / 1024.0, 1),
            "exit": os.waitstatus_to_exitcode(status),
            "store_mib": round(store.stat().st_size / 2**20, 1),
            "run": [first, last],
            "loadavg_before": load,
            "loadavg_after": loadavg(),
        },
    )


def stage_unchanged(args: argparse.Namespace, trees: list[Tree], n: int) -> None:
    """The unchanged rebuild alone (of a replicated store), each tree on its
    own copy: wall time, CPU time and peak RSS."""
    corpus = make_corpus(args.work, n)
    store = args.work / f"store-{n}.sqlite"
    rows = []
    with Server(0.0) as server:
        load = loadavg()
        for tree in trees:
            if tree.name != "after":
                # The older tree gets its own copy (its build may rewrite rows).
                copy = store_for(tree, store)
            # Twice: the first run may still write the files beside the store
            # (a copy the older tree has not built yet); the second is the
            # unchanged rebuild proper.
            for _ in range(2):
                done = tree.docsum(
                    "build",
                    corpus,
                    "--store",
                    store if tree.name == "after" else copy,
                    *server_flags(server.url),
                    "--concurrency",
                    "16",
                    "-q",
                    "--json",
                )
            rows.append(
                {
                    "tree": tree.name,
                    "wall_s": round(done.seconds, 2),
                    "cpu_s": round(done.cpu, 2),
                    "peak_rss_mib": round(done.rss, 1),
                    "exit": done.code,
                    "counts": json.loads(done.out)["documents"],
                    "loadavg": loadavg(),
                }
            )
            print(f"[scale] unchanged {n} {tree.name}: {done.seconds:.1f} s, cpu {done.cpu:.1f} s", file=sys.stderr)
    seconds, rss, code, out, _ = done
    report = json.loads(out)
    save(
        f"unchanged-{n}",
        {
            "documents": n,
            "rows": rows,
            "wall_s": round(seconds, 2),
            "peak_rss_mib": round(rss, 1),
            "exit": code,
            "counts": report["documents"],
            "llm_calls": report["usage"]["llm_calls"],
            "loadavg_before": load,
            "loadavg_after": loadavg(),
        },
    )


def stage_firstask(args: argparse.Namespace, trees: list[Tree], n: int) -> None:
    """The end of a build and the first fused question after it, each tree on
    a copy of the replicated store without any file beside it: the build
    (every file unchanged) writes the vector file from nothing, and the new
    tree's also the BM25 index; then the first fused question, and a second."""
    store = args.work / f"store-{n}.sqlite"
    rows = []
    with Server(0.0) as server:
        for tree in trees:
            copy = args.work / f"firstask-{n}-{tree.name}.sqlite"
            remove_store(args.work, copy.name)
            conn = sqlite3.connect(store)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.close()
            shutil.copy(store, copy)
            if not any((tree.path / "docsum" / sub).exists() for sub in ("vectors.py", "store/vectors.py")):
                take_back_to_v2(store, copy)
            load = loadavg()
            built = tree.docsum(
                "build",
                make_corpus(args.work, n),
                "--store",
                copy,
                *server_flags(server.url),
                "--concurrency",
                "16",
                "-q",
                "--json",
            )
            row: dict[str, Any] = {
                "documents": n,
                "tree": tree.name,
                "loadavg": load,
                "build_wall_s": round(built.seconds, 2),
                "build_cpu_s": round(built.cpu, 2),
                "build_peak_rss_mib": round(built.rss, 1),
                "build_exit": built.code,
            }
            for label, i in (("first", 1), ("second", 2)):
                asked = tree.docsum(
                    "ask",
                    question_for(i * 7919 % n),
                    "--store",
                    copy,
                    *server_flags(server.url),
                    "--retriever",
                    "fused",
                    "--json",
                )
                row.update(
                    {
                        f"{label}_ask_wall_s": round(asked.seconds, 2),
                        f"{label}_ask_cpu_s": round(asked.cpu, 2),
                        f"{label}_ask_peak_rss_mib": round(asked.rss, 1),
                        f"{label}_ask_exit": asked.code,
                    }
                )
            rows.append(row)
            print(f"[scale] firstask {n} {tree.name}: {row}", file=sys.stderr)
            remove_store(args.work, copy.name)
    save(f"firstask-{n}", {"rows": rows})


def store_for(tree: Tree, store: Path) -> Path:
    """The store `tree` asks: `store` itself for this tree; for the older
    tree a copy of its own (each keeps its own vector file and BM25 index
    beside its store, in its own format), taken back to schema 2 when that
    tree predates the vector file."""
    if tree.name == "after":
        return store
    copy = store.with_name(store.stem + f"-{tree.name}.sqlite")
    if copy.exists() and copy.stat().st_mtime >= store.stat().st_mtime:
        return copy
    for old in store.parent.glob(copy.name + "*"):
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    if any((tree.path / "docsum" / sub).exists() for sub in ("vectors.py", "store/vectors.py")):
        conn = sqlite3.connect(store)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        shutil.copy(store, copy)
    else:
        take_back_to_v2(store, copy)
    return copy


def stage_ask(args: argparse.Namespace, trees: list[Tree], n: int) -> None:
    """`docsum ask` as whole processes: the first run of each (tree,
    retriever) is a warm-up (it may build the BM25 index or the vector file),
    then --runs timed runs, each a different question."""
    store = args.work / f"store-{n}.sqlite"
    if not store.exists():
        raise SystemExit(f"no {store}: run the build (or replicate) stage for {n} first")
    rows = []
    with Server(0.0) as server:
        for retriever in args.retrievers.split(","):
            for tree in trees:
                path = store_for(tree, store)
                times, cpus, peaks = [], [], []
                for run_no in range(args.runs + 1):
                    q = question_for((run_no * 7919) % n)
                    done = tree.docsum(
                        "ask", q, "--store", path, *server_flags(server.url), "--retriever", retriever, "--json"
                    )
                    if run_no:
                        times.append(done.seconds)
                        cpus.append(done.cpu)
                        peaks.append(done.rss)
                rows.append(
                    {
                        "documents": n,
                        "retriever": retriever,
                        "tree": tree.name,
                        "loadavg": loadavg(),
                        "median_s": round(statistics.median(times), 3),
                        "all_s": [round(t, 3) for t in times],
                        "median_cpu_s": round(statistics.median(cpus), 3),
                        "all_cpu_s": [round(t, 3) for t in cpus],
                        "peak_rss_mib": round(max(peaks), 1),
                        "exit": done.code,
                        "documents_found": [d["path"] for d in json.loads(done.out)["documents"]],
                    }
                )
                print(
                    f"[scale] ask {n} {retriever} {tree.name}: {rows[-1]['median_s']} s, cpu {rows[-1]['median_cpu_s']} s, "
                    f"{rows[-1]['peak_rss_mib']} MiB",
                    file=sys.stderr,
                )
    save(f"ask-{n}", {"rows": rows})


def stage_cold(args: argparse.Namespace, trees: list[Tree]) -> None:
    """Start-up on sample_data: --help, an offline ask, a server-backed ask,
    show and config show; --cold-runs timed runs each after one warm-up,
    the trees alternated run by run so load drifts hit both alike."""
    question = "How much did Brindle & Daughter pay for the oven, and when was the auction?"
    commands: dict[str, dict[str, list[str | Path]]] = {}
    with Server(0.0) as server:
        for tree in trees:
            offline = args.work / f"sample-offline-{tree.name}.sqlite"
            served = args.work / f"sample-server-{tree.name}.sqlite"
            for old in list(args.work.glob(f"sample-*-{tree.name}.sqlite*")):
                shutil.rmtree(old) if old.is_dir() else old.unlink()
            tree.docsum("build", REPO / "sample_data" / "docs", "--store", offline, "--llm", "extractive", "-q")
            tree.docsum("build", REPO / "sample_data" / "docs", "--store", served, *server_flags(server.url), "-q")
            commands[tree.name] = {
                "help": ["--help"],
                "ask-offline": ["ask", question, "--store", offline, "--llm", "extractive", "--no-stream"],
                "ask-server": ["ask", question, "--store", served, *server_flags(server.url), "--no-stream"],
                "show": ["show", "library_renovation_fact_sheet.pdf", "--store", offline],
                "config-show": ["config", "show"],
            }
        rows = []
        for name in commands[trees[0].name]:
            measured: dict[str, list[Proc]] = {tree.name: [] for tree in trees}
            for tree in trees:
                tree.docsum(*commands[tree.name][name])  # warm-up: page cache, the BM25 index, the tokenizer table
            for _ in range(args.cold_runs):
                for tree in trees:
                    measured[tree.name].append(tree.docsum(*commands[tree.name][name]))
            for tree in trees:
                times = [m.seconds for m in measured[tree.name]]
                cpus = [m.cpu for m in measured[tree.name]]
                rows.append(
                    {
                        "command": name,
                        "tree": tree.name,
                        "median_s": round(statistics.median(times), 3),
                        "min_s": round(min(times), 3),
                        "max_s": round(max(times), 3),
                        "median_cpu_s": round(statistics.median(cpus), 3),
                        "min_cpu_s": round(min(cpus), 3),
                        "loadavg": loadavg(),
                    }
                )
                print(
                    f"[scale] cold {name} {tree.name}: {rows[-1]['median_s']} s, cpu {rows[-1]['median_cpu_s']} s",
                    file=sys.stderr,
                )
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
    save(
        "batch",
        {
            "documents": n,
            "questions": 100,
            "one_process_s": round(batch_s, 2),
            "one_process_rss_mib": round(batch_rss, 1),
            "answers": len(answered),
            "exit": code,
            "processes_s": round(single_s, 2),
            "processes_timed": len(sample),
            "ratio": round(single_s / batch_s, 1),
            "loadavg_before": load,
            "loadavg_after": loadavg(),
        },
    )


def in_flight(trace: Path, since: float, until: float, slots: int) -> dict[str, Any]:
    """Where a build's time went, from the server's request log (`path
    started finished` per request, on the monotonic clock this process
    shares): when the first request arrived and the last answer left, the
    requests in flight on average over that span, how long fewer than
    `slots` were in flight, and the requests by kind."""
    spans = []
    for line in trace.read_text().splitlines() if trace.exists() else []:
        path, started, finished = line.split()
        if since <= float(started) <= until:
            spans.append((path, float(started), float(finished)))
    if not spans:
        return {}
    first, last = min(s for _, s, _ in spans), max(f for _, _, f in spans)
    events = sorted([(s, 1) for _, s, _ in spans] + [(f, -1) for _, _, f in spans])
    level, at, below = 0, first, 0.0
    for when, step in events:
        if level < slots:
            below += when - at
        level, at = level + step, when
    busy = sum(f - s for _, s, f in spans)
    return {
        "first_request_s": round(first - since, 2),
        "last_answer_s": round(last - since, 2),
        "after_last_answer_s": round(until - last, 2),
        "mean_in_flight": round(busy / max(last - first, 1e-9), 1),
        "under_full_s": round(below, 2),
        "chat_requests": sum(p.endswith("/chat/completions") for p, _, _ in spans),
        "embedding_requests": sum(p.endswith("/embeddings") for p, _, _ in spans),
        "embedding_request_s": round(sum(f - s for p, s, f in spans if p.endswith("/embeddings")), 2),
    }


def stage_bound(args: argparse.Namespace, trees: list[Tree]) -> None:
    rows = []
    trace = args.work / "bound-trace.txt"
    trace.unlink(missing_ok=True)
    with Server(0.3, trace=trace) as server:
        for n in (100, 1000):
            corpus = make_corpus(args.work, n)
            bound = math.ceil(n / 16) * 0.3
            for tree in trees:
                store = args.work / f"bound-{n}-{tree.name}.sqlite"
                remove_store(args.work, store.name)
                since = time.monotonic()
                done = tree.docsum(
                    "build", corpus, "--store", store, *server_flags(server.url), "--concurrency", "16", "-q", "--json"
                )
                until = time.monotonic()
                time.sleep(1.5)  # the server writes its log each second
                flight = in_flight(trace, since, until, 16)
                seconds, rss, code, out, _ = done
                report = json.loads(out)
                # Start-up: the same build again, every file unchanged (imports,
                # store, walk; no call).
                startup = tree.docsum(
                    "build", corpus, "--store", store, *server_flags(server.url), "--concurrency", "16", "-q"
                ).seconds
                rows.append(
                    {
                        "documents": n,
                        "tree": tree.name,
                        "wall_s": round(seconds, 2),
                        "cpu_s": round(done.cpu, 2),
                        "startup_s": round(startup, 2),
                        "ratio_to_bound_plus_startup": round(seconds / (bound + startup), 2),
                        "peak_rss_mib": round(rss, 1),
                        "bound_s": round(bound, 2),
                        "ratio_to_bound": round(seconds / bound, 2),
                        "llm_calls": report["usage"]["llm_calls"],
                        "embedding_calls": report["usage"]["embedding_calls"],
                        "loadavg": loadavg(),
                        **flight,
                    }
                )
                print(
                    f"[scale] bound {n} {tree.name}: {seconds:.1f} s against {bound:.1f} s; {flight}", file=sys.stderr
                )
    save("bound", {"rows": rows})


def tables() -> None:
    def load(name: str) -> Any:
        path = RESULTS / f"{name}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.1f}x" if b else "-"

    asks = {n: load(f"ask-{n}") for n in (1000, 10000, 100000)}
    print(
        "| documents | retriever | before: median s | after: median s | before: CPU s | after: CPU s | CPU before / after | before: peak MiB | after: peak MiB |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    by: dict[tuple[int, str, str], dict[str, Any]] = {}
    for n, data in asks.items():
        for r in (data or {}).get("rows", []):
            by[(n, r["retriever"], r["tree"])] = r
    for n, retriever in sorted({(n, r) for n, r, _ in by}, key=lambda k: (k[1], k[0])):
        b, a = by.get((n, retriever, "before")), by.get((n, retriever, "after"))
        if a is None:
            continue
        cells = [
            f"{b['median_s']:.2f}" if b else "-",
            f"{a['median_s']:.2f}",
            f"{b['median_cpu_s']:.2f}" if b else "-",
            f"{a['median_cpu_s']:.2f}",
            ratio(b["median_cpu_s"], a["median_cpu_s"]) if b else "-",
            f"{b['peak_rss_mib']:.0f}" if b else "-",
            f"{a['peak_rss_mib']:.0f}",
        ]
        print(f"| {n:,} | {retriever} | " + " | ".join(cells) + " |")
    print("\nGrowth from 1,000 to 100,000 documents (median wall and CPU seconds):\n")
    print("| retriever | tree | wall growth s | CPU growth s |\n|---|---|---:|---:|")
    for retriever in sorted({r for _, r, _ in by}):
        for tree in ("before", "after"):
            small, large = by.get((1000, retriever, tree)), by.get((100000, retriever, tree))
            if small and large:
                print(
                    f"| {retriever} | {tree} | {large['median_s'] - small['median_s']:+.2f} | "
                    f"{large['median_cpu_s'] - small['median_cpu_s']:+.2f} |"
                )
    cold = load("cold")
    if cold:
        print(
            "\n| start-up | before: median s | after: median s | before: CPU s | after: CPU s | after: min s |\n|---|---:|---:|---:|---:|---:|"
        )
        names = list(dict.fromkeys(r["command"] for r in cold["rows"]))
        for name in names:
            rows = {r["tree"]: r for r in cold["rows"] if r["command"] == name}
            b, a = rows.get("before"), rows.get("after")
            if a:
                print(
                    f"| {name} | {b['median_s'] if b else '-'} | {a['median_s']} | {b.get('median_cpu_s', '-') if b else '-'} | "
                    f"{a.get('median_cpu_s', '-')} | {a['min_s']} |"
                )
    bound = load("bound")
    if bound:
        print(
            "\n| documents | tree | wall s | CPU s | bound s | start-up s | wall / bound | wall / (bound + start-up) |\n|---:|---|---:|---:|---:|---:|---:|---:|"
        )
        for r in bound["rows"]:
            print(
                f"| {r['documents']:,} | {r['tree']} | {r['wall_s']:.1f} | {r.get('cpu_s', '-')} | {r['bound_s']:.1f} | "
                f"{r.get('startup_s', '-')} | {r['ratio_to_bound']:.2f} | {r.get('ratio_to_bound_plus_startup', '-')} |"
            )
        print(
            "\n| documents | tree | first request s | last answer s | after it s | mean in flight | under 16 in flight s | chat / embedding requests | embedding request s |\n|---:|---|---:|---:|---:|---:|---:|---|---:|"
        )
        for r in bound["rows"]:
            if "first_request_s" in r:
                print(
                    f"| {r['documents']:,} | {r['tree']} | {r['first_request_s']} | {r['last_answer_s']} | {r['after_last_answer_s']} | "
                    f"{r['mean_in_flight']} | {r['under_full_s']} | {r['chat_requests']} / {r['embedding_requests']} | {r['embedding_request_s']} |"
                )
    for name in (
        "build-1000",
        "build-10000",
        "build-100000",
        "unchanged-100000",
        "firstask-100000",
        "window-100000",
        "batch",
    ):
        data = load(name)
        if data:
            print(f"\n{name}: {json.dumps(data)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "stages",
        nargs="+",
        choices=[
            "corpus",
            "build",
            "replicate",
            "unchanged",
            "window",
            "ask",
            "firstask",
            "cold",
            "batch",
            "bound",
            "tables",
            "all",
        ],
    )
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--before", type=Path, default=Path(os.environ.get("DOCSUM_BEFORE", "/tmp/docsum-before")))
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("SCALE_WORK", "/tmp/bench-scale")))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--retrievers", default="embedding,hybrid,fused", help="retrievers the ask stage times")
    parser.add_argument("--cold-runs", type=int, default=10)
    parser.add_argument(
        "--batch-sample", type=int, default=100, help="processes timed for the one-per-question side of batch"
    )
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
                stage_unchanged(args, trees, n)
        elif stage == "ask":
            for n in sizes:
                stage_ask(args, trees, n)
        elif stage == "firstask":
            for n in sizes:
                stage_firstask(args, trees, n)
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
