#!/usr/bin/env python3
"""Offline build of the 20 SEC 10-Q PDFs: an older docsum against this one, in one run.

  python3 bench/build_sec_pdf.py [--old-rev REV] [--corpus DIR] [--jobs 1 2] [--repeat 1]

The older code is checked out (git worktree, detached) from REV of this clone
into a temporary folder and run with this checkout's Python environment, so
only docsum's own code differs.  Every build uses the offline extractive
engine, a new store and a new DOCSUM_HOME (so no extracted-text cache helps).

Measured per build:
  wall s          the whole `docsum build` process, start to exit
  first doc s     from start until the store first holds a document (polled every 20 ms)
  pages/s         pages stored (sum of page_count) per wall second
  peak RSS MiB    the largest sum of RSS over docsum and its worker processes
                  (polled every 20 ms from /proc, found by a marker in their environment)
  failed          files the build reported as failed

Writes bench/results/build_sec_pdf.json and prints a Markdown table.
Standard library only; Linux (/proc).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
# No default outside the clone: --corpus, or EVAL (the corpora folder) set.
DEFAULT_CORPUS = os.path.join(os.environ["EVAL"], "sec-10-q-pdf") if os.environ.get("EVAL") else None
DEFAULT_OLD_REV = "4e85059"  # main before PDFium and worker processes
PAGE = os.sysconf("SC_PAGE_SIZE")


def marked_rss(mark: bytes) -> int:
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                if mark not in fh.read():
                    continue
            with open(f"/proc/{name}/statm") as fh:
                total += int(fh.read().split()[1]) * PAGE
        except OSError:
            continue
    return total


def stored(store: str) -> tuple[int, int]:
    try:
        conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=1)
        try:
            docs, pages = conn.execute("SELECT count(*), coalesce(sum(page_count), 0) FROM documents").fetchone()
        finally:
            conn.close()
        return int(docs), int(pages)
    except sqlite3.Error:
        return 0, 0


def one_build(label: str, code_dir: str, corpus: str, extra: list[str]) -> dict:
    work = tempfile.mkdtemp(prefix="bench-pdf-")
    store = os.path.join(work, "store.sqlite")
    mark = f"DOCSUM_BENCH_MARK={uuid.uuid4().hex}"
    env = dict(os.environ)
    env.update(
        {"DOCSUM_HOME": os.path.join(work, "home"), "PYTHONPATH": code_dir, mark.split("=")[0]: mark.split("=")[1]}
    )
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DOCSUM_API_KEY", "DOCSUM_STORE", "DOCSUM_CONFIG"):
        env.pop(name, None)
    cmd = [sys.executable, "-m", "cli.main", "build", corpus, "--store", store, "--llm", "extractive", "--json", *extra]
    peak = 0
    first_doc: float | None = None
    done = threading.Event()
    started = time.monotonic()

    def watch() -> None:
        nonlocal peak, first_doc
        while not done.is_set():
            peak = max(peak, marked_rss(mark.encode()))
            if first_doc is None and stored(store)[0] > 0:
                first_doc = time.monotonic() - started
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    proc = subprocess.run(cmd, cwd=code_dir, env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    done.set()
    watcher.join()
    docs, pages = stored(store)
    try:
        report = json.loads(proc.stdout)
        failures = report.get("failures", [])
    except ValueError:
        failures = [
            {"path": "?", "error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "no output"}
        ]
    return {
        "label": label,
        "exit": proc.returncode,
        "wall_s": round(wall, 2),
        "first_doc_s": None if first_doc is None else round(first_doc, 2),
        "documents": docs,
        "pages": pages,
        "pages_per_s": round(pages / wall, 1) if wall else 0.0,
        "peak_rss_mib": round(peak / 2**20, 1),
        "failed": len(failures),
        "failures": failures,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old-rev", default=DEFAULT_OLD_REV)
    parser.add_argument(
        "--corpus",
        default=DEFAULT_CORPUS,
        required=DEFAULT_CORPUS is None,
        help="the SEC 10-Q PDF folder (default: $EVAL/sec-10-q-pdf)",
    )
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    old_dir = tempfile.mkdtemp(prefix="bench-old-docsum-")
    subprocess.run(
        ["git", "-C", REPO, "worktree", "add", "--detach", old_dir, args.old_rev], check=True, capture_output=True
    )
    try:
        rows = []
        load = [os.getloadavg()[0]]
        for _ in range(args.repeat):
            rows.append(one_build(f"old ({args.old_rev})", old_dir, args.corpus, []))
            for jobs in args.jobs:
                rows.append(one_build(f"new --jobs {jobs}", REPO, args.corpus, ["--jobs", str(jobs)]))
            load.append(os.getloadavg()[0])
    finally:
        subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", old_dir], capture_output=True)
    out = {
        "corpus": args.corpus,
        "old_rev": args.old_rev,
        "cpus": os.cpu_count(),
        "load_1min_samples": load,
        "rows": rows,
    }
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "build_sec_pdf.json"), "w") as fh:
        json.dump(out, fh, indent=2)
    old = next(r for r in rows if r["label"].startswith("old"))
    print(f"load average (1 min) during the run: {', '.join(f'{x:.1f}' for x in load)}")
    print(
        "| build | exit | failed | documents | pages | wall s | pages/s | first document s | peak RSS MiB | speed-up vs old |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        ratio = old["wall_s"] / r["wall_s"] if r["wall_s"] else 0
        print(
            f"| {r['label']} | {r['exit']} | {r['failed']} | {r['documents']} | {r['pages']} | {r['wall_s']} | {r['pages_per_s']} | {r['first_doc_s']} | {r['peak_rss_mib']} | {ratio:.1f}× |"
        )
    for r in rows:
        for f in r["failures"]:
            print(f"- {r['label']}: failed {f['path']}: {f['error']}")


if __name__ == "__main__":
    main()
