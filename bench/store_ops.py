"""The store's own operations, an older docsum against this one, in one run.

The stores were restructured (issue 14): the statements SQLite and PostgreSQL
share are written once and each store supplies its connection, so every call
goes through one more method, and PostgreSQL turns `?` into `%s`. This
measures whether the hot paths paid for it: writing documents with their
nodes and calls, listing, reading named documents and their nodes, finding a
document by a path suffix, and recording calls, on SQLite and (when the
PostgreSQL binaries are here) on the test suite's throwaway server.

    .venv/bin/python bench/store_ops.py [--old REV] [--docs N] [--rounds K]

The older tree is unpacked from REV of this clone with `git archive`; each
tree runs the same workload in its own process, the two alternating, K rounds
each, and the least seconds of the K rounds per operation are printed
(on a shared machine other work only ever adds time) as a Markdown table
with the ratio new / old, for CPU and wall time. Needs only this clone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Run inside each tree's process: the tree's own docsum on sys.path.
WORKLOAD = r"""
import json, sys, time
from docsum.store.opening import open_store
from docsum.store.records import DocumentRecord, NodeRecord, make_doc_id

location, n_docs = sys.argv[1], int(sys.argv[2])
timings = {}

def timed(name, fn):
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    timings[name] = [time.process_time() - cpu, time.perf_counter() - wall]

def doc(i):
    path = f"folder{i % 20}/doc{i}.txt"
    return DocumentRecord(
        doc_id=make_doc_id("/data", path), path=path, root="/data", size=1000 + i, mtime_ns=i, sha256=f"{i:064x}",
        title=f"Document {i}", kind="text", token_count=500, page_count=None, split_fingerprint="s",
        summary_fingerprint="f", summary=f"The summary of document {i}. " * 8, summary_model="m",
    )

docs = [doc(i) for i in range(n_docs)]
with open_store(location) as store:
    run = store.start_run("build", {})
    calls = [(run, "summary", "m", 100, 20, 0.1, True)]
    nodes = {d.doc_id: [NodeRecord(d.doc_id, k, f"node {k} of {d.path}. " * 20, k * 100, k * 100 + 99, (), 40)
                        for k in range(10)] for d in docs}
    timed("put_document", lambda: [store.put_document(d, nodes[d.doc_id], calls) for d in docs])
    timed("list_documents", lambda: [store.list_documents(with_summaries=False) for _ in range(5)])
    ids = [d.doc_id for d in docs[:: max(1, n_docs // 50)]][:50]
    timed("get_documents + nodes_for (50 ids)", lambda: [(store.get_documents(ids), store.nodes_for(ids)) for _ in range(50)])
    timed("find_documents by suffix", lambda: [store.find_documents(f"doc{i}.txt") for i in range(0, n_docs, max(1, n_docs // 200))])
    timed("record_call", lambda: [store.record_call(run, "embed", "e", 10, 0, 0.01, True) for _ in range(500)])
    timed("remove_document", lambda: [store.remove_document(d.doc_id) for d in docs[: n_docs // 4]])
import docsum
timings["docsum"] = docsum.__file__
print(json.dumps(timings))
"""


def run_workload(tree: Path, location: str, n_docs: int, home: Path) -> dict[str, list[float]]:
    """[CPU, wall] seconds per operation of one workload run by `tree`'s docsum."""
    env = dict(os.environ, PYTHONPATH=str(tree), DOCSUM_HOME=str(home))
    proc = subprocess.run(
        [sys.executable, "-c", WORKLOAD, location, str(n_docs)],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"workload failed in {tree}:\n{proc.stderr[-2000:]}")
    timings = dict(json.loads(proc.stdout.splitlines()[-1]))
    # The tree's own docsum, not the one installed in this venv.
    if not str(timings.pop("docsum")).startswith(str(tree)):
        raise SystemExit(f"the workload for {tree} imported another docsum")
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", default="e9166f3", help="the older revision (default: main before the store split)")
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="docsum-store-ops-"))
    old_tree = work / "old"
    old_tree.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", args.old], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(old_tree)], input=archive, check=True)
    trees = {"old": old_tree, "new": REPO}

    backends: dict[str, object] = {"SQLite": None}
    server = None
    sys.path[:0] = [str(REPO / "tests")]
    from pgserver import PostgresServer, find_bindir

    bindir = find_bindir()
    if bindir is not None:
        server = PostgresServer(bindir)
        server.start()
        backends["PostgreSQL"] = server
    try:
        results: dict[str, dict[str, dict[str, list[list[float]]]]] = {}
        for backend, pg in backends.items():
            per_tree: dict[str, dict[str, list[list[float]]]] = {name: {} for name in trees}
            for round_no in range(args.rounds):
                for name, tree in trees.items():  # alternating, so load drifts hit both alike
                    if pg is None:
                        location = str(work / f"{name}-{round_no}.sqlite")
                    else:
                        location = pg.url(pg.new_database())  # type: ignore[attr-defined]
                    for op, seconds in run_workload(tree, location, args.docs, work / "home").items():
                        per_tree[name].setdefault(op, []).append(seconds)
            results[backend] = per_tree
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)

    load = os.getloadavg()
    print(
        f"{args.docs} documents of 10 nodes, least of {args.rounds} rounds, seconds (CPU of the docsum process; "
        f"wall includes the database server); old = {args.old}; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}\n"
    )
    print("| store | operation | CPU old | CPU new | new / old | wall old | wall new | new / old |")
    print("|---|---|---|---|---|---|---|---|")
    for backend, per_tree in results.items():
        for op in per_tree["old"]:
            cells = []
            for kind in (0, 1):  # CPU, wall
                old = min(t[kind] for t in per_tree["old"][op])
                new = min(t[kind] for t in per_tree["new"][op])
                cells.append(f"{old:.3f} | {new:.3f} | {new / old:.2f}")
            print(f"| {backend} | {op} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
