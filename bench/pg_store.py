"""The PostgreSQL store, measured on this machine (issue 13).

1. Builders sharing one PostgreSQL store: 1,000 synthetic documents, the
   project's fake OpenAI server at 300 ms per call, 1, 2 and 4 `docsum build`
   processes at once (each --concurrency 4): wall time, speed-up over one
   builder, and the chat calls the server counted (each document needs one).
   Then 4 builders again with one SIGKILLed halfway.
2. `docsum ask` at 10,000 documents (384-dimension embeddings from the fake
   server), SQLite against PostgreSQL without pgvector (the local vector file)
   and with it (nearest summaries found in SQL): whole-process wall time and
   peak RSS (/usr/bin/time), the first question (the vector file is written)
   and the next ones, one after 100 documents changed, and how much of the
   exact top 10 pgvector's HNSW index returns.

Runs from a clone: the fake server and the throwaway PostgreSQL are the test
suite's own (tests/fakeopenai.py, tests/pgserver.py). Needs PostgreSQL's server
binaries, psycopg (the test extra) and /usr/bin/time.

    .venv/bin/python bench/pg_store.py [--docs 1000] [--ask-docs 10000] [--out bench/results/pg_store.json]

Issue 26 (pgvector at 100,000 documents, from the pgserver wheel's PostgreSQL 16
+ pgvector 0.6.2, against SQLite's vector file), with the index's recall@10
against an exact scan of the same table:

    .venv/bin/python bench/pg_store.py --skip-build --pgvector-wheel --ask-docs 100000 \
        --ask-stores sqlite,postgresql_pgvector --warm 1 --bulk --out bench/results/pg_store_100k.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from fakeopenai import FakeOpenAI  # noqa: E402
from pgserver import PostgresServer, find_bindir, pgvector_bindir  # noqa: E402

DOCSUM = [sys.executable, "-m", "cli.main"]


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCSUM_", "OPENAI_"))}
    env["DOCSUM_HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO)
    return env


def make_corpus(folder: Path, count: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    topics = ["bees", "bridges", "ferries", "orchards", "libraries", "storms", "mills", "canals"]
    for i in range(count):
        body = " ".join(f"The {topics[i % 8]} report {i} says item {j} is fine." for j in range(12))
        (folder / f"doc{i:04d}.txt").write_text(
            f"DOCMARK{i:04d} Notes on {topics[i % 8]}.\n\n{body}\n", encoding="utf-8"
        )


def stored(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('docsum.documents')").fetchone()[0] is None:
            return 0
        return int(conn.execute("SELECT count(*) FROM docsum.documents").fetchone()[0])


def server_cpu_s(server: PostgresServer) -> float:
    """CPU seconds of the PostgreSQL server: the postmaster's own and its
    exited children's (each builder connection is a backend that exits with it)."""
    assert server.proc is not None
    fields = Path(f"/proc/{server.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return (utime + stime + cutime + cstime) / os.sysconf("SC_CLK_TCK")


def cpu_now(server: PostgresServer) -> dict[str, float]:
    """CPU seconds so far: builders (waited-for children), this process (the
    fake server's threads), the PostgreSQL server."""
    children, me = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    return {"builders": children.ru_utime + children.ru_stime, "fake_server": me.ru_utime + me.ru_stime,
            "postgresql": server_cpu_s(server)}  # fmt: skip


def build_round(server: PostgresServer, corpus: Path, builders: int, docs: int, kill_halfway: bool) -> dict[str, Any]:
    url = server.url(server.new_database())
    home = Path(tempfile.mkdtemp(prefix="bench-home-"))
    load_before, cpu_before = os.getloadavg()[0], cpu_now(server)
    with FakeOpenAI(latency=0.3) as fake:
        args = [*DOCSUM, "build", str(corpus), "--store", url, "--json", "--concurrency", "4",
                "--base-url", fake.base_url, "--model", "fake-chat"]  # fmt: skip
        started = time.monotonic()
        procs = [subprocess.Popen(args, env=env_for(home), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                 for _ in range(builders)]  # fmt: skip
        killed_at = None
        if kill_halfway:
            while stored(url) < docs // 2:
                time.sleep(0.05)
            procs[0].send_signal(signal.SIGKILL)
            killed_at = stored(url)
        outs = [p.communicate()[0] for p in procs]
        wall = time.monotonic() - started
        requests = fake.chat_requests()
        prompts = [r.prompt for r in requests]
    per_doc: dict[str, int] = {}
    for prompt in prompts:
        for token in prompt.split():
            if token.startswith("DOCMARK"):
                per_doc[token[:11]] = per_doc.get(token[:11], 0) + 1
                break
    codes = [p.returncode for p in procs]
    reports = [json.loads(o) for o, c in zip(outs, codes) if c == 0 and o.strip()]
    shutil.rmtree(home, ignore_errors=True)
    time.sleep(1)  # the backends of the builders' connections exit
    # Where the wall time went: before the first request (start-up, reading
    # the folder), while requests ran (how many at once, on average, of the
    # 4 per builder allowed), after the last one (the vector file, exit).
    first = min(r.started for r in requests) - started
    last = max(r.finished or r.started for r in requests) - started
    busy = sum(max(0.0, (r.finished or r.started) - r.started) for r in requests)
    timeline = {"first_call_s": round(first, 1), "last_call_done_s": round(last, 1),
                "mean_requests_in_flight": round(busy / max(1e-9, last - first), 1)}  # fmt: skip
    cpu = {k: round(v - cpu_before[k], 1) for k, v in cpu_now(server).items()}
    return {
        "cpu_s": cpu, "cpu_cores_used": round(sum(cpu.values()) / wall, 2), **timeline,
        "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "builders": builders, "killed": kill_halfway, "wall_s": round(wall, 2), "calls": len(prompts),
        "documents": docs, "stored": stored(url), "docs_summarized_twice": sum(1 for n in per_doc.values() if n > 1),
        "exit_codes": codes, "stored_when_killed": killed_at,
        "done_elsewhere": [r.get("done_elsewhere") for r in reports],
    }  # fmt: skip


# The size of all-MiniLM-L6-v2's vectors (`--embed-model local`): a real
# model's shape, which pgvector can index (lexical vectors cannot be searched
# on the server: docsum.store.pgvector).
ASK_DIM = 384
ASK_QUESTIONS = ["budget for bridges and comets", "storms in month 7", "ferries and mills item 12",
                 "orchards follow-up", "tariffs approved line 30"]  # fmt: skip


def synthetic(i: int) -> tuple[Any, Any]:
    """Document `i` of the synthetic corpus (record, node), the same in every store."""
    import numpy as np
    from fakeopenai import default_embedding

    from docsum.store.records import DocumentRecord, NodeRecord, make_doc_id

    topics = ["bees", "bridges", "ferries", "orchards", "libraries", "storms", "mills", "canals", "tariffs", "comets"]
    path = f"doc{i:05d}.txt"
    summary = (f"Report {i} on {topics[i % 10]} and {topics[(i * 7) % 10]}: the committee reviewed item {i % 97}, "
               f"approved budget line {i % 31} and scheduled a follow-up in month {i % 12 + 1}.")  # fmt: skip
    doc_id = make_doc_id("/bench", path)
    record = DocumentRecord(
        doc_id, path, "/bench", 500, 1, "ab" * 32, path, "text", 120, None, "s", "f", summary, "m",
        embedding=np.asarray(default_embedding(summary, ASK_DIM), dtype=np.float32), embedding_model="fake-embed",
    )  # fmt: skip
    return record, NodeRecord(doc_id, 0, summary * 3, 0, len(summary) * 3, (), 120)


def populate(location: str, count: int) -> None:
    """`count` synthetic documents with the fake server's embeddings, the same in every store."""
    from docsum.store.opening import open_store

    with open_store(location) as store:
        for i in range(count):
            record, node = synthetic(i)
            store.put_document(record, [node])


def bulk_populate_pgvector(url: str, count: int) -> None:
    """The same documents as `populate`, into a PostgreSQL store with pgvector,
    for a machine where 100,000 one-document transactions take over an hour:
    the first document through docsum (it creates the extension, the vector
    table and its HNSW index), the rest with COPY into the same tables, the
    index dropped first and made again after (one build instead of 100,000
    inserts; the same index docsum makes: docsum.store.pgvector.create_table).
    Only `ask` is measured on it; the write path is bench/scale.py's."""
    import psycopg

    from docsum.store import pgvector
    from docsum.store.pgschema import SEARCH_PATH_SQL
    from docsum.store.records import DOC_COLUMNS, NODE_COLUMNS, document_params, node_params, utc_now

    populate(url, 1)
    now = utc_now()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SEARCH_PATH_SQL)
        conn.execute(f"DROP INDEX IF EXISTS {pgvector.TABLE}_hnsw")
        for start in range(1, count, 5000):
            batch = [synthetic(i) for i in range(start, min(count, start + 5000))]
            with conn.transaction(), conn.cursor() as cur:
                with cur.copy(f"COPY documents ({DOC_COLUMNS}) FROM STDIN") as copy:
                    for record, _ in batch:
                        copy.write_row(document_params(record, now, now))
                with cur.copy(f"COPY nodes ({NODE_COLUMNS}) FROM STDIN") as copy:
                    for _, node in batch:
                        copy.write_row(node_params(node))
                with cur.copy(f"COPY {pgvector.TABLE} (doc_id, model, embedding) FROM STDIN") as copy:
                    for record, _ in batch:
                        copy.write_row(
                            (record.doc_id, record.embedding_model, pgvector.vector_literal(record.embedding))
                        )
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute(f"CREATE INDEX {pgvector.TABLE}_hnsw ON {pgvector.TABLE} USING hnsw (embedding vector_ip_ops)")
        conn.execute("ANALYZE")


def timed_ask(
    location: str, home: Path, fake: FakeOpenAI, question: str = ASK_QUESTIONS[0]
) -> tuple[float, int, dict[str, Any]]:
    """Wall seconds, peak RSS (MB) and the JSON answer of one whole `docsum ask` process."""
    cmd = ["/usr/bin/time", "-f", "%e %M", *DOCSUM, "ask", question, "--store", location, "--json", "--top-k", "10",
           "--base-url", fake.base_url, "--model", "fake-chat", "--embed-model", "fake-embed", "--explain"]  # fmt: skip
    result = subprocess.run(cmd, env=env_for(home), capture_output=True, text=True, check=True)
    wall, rss_kb = result.stderr.strip().splitlines()[-1].split()
    return float(wall), int(rss_kb) // 1024, {**json.loads(result.stdout), "explain": result.stderr}


def index_recall(url: str, queries: int = 50) -> dict[str, Any]:
    """recall@10 of pgvector's HNSW index against an exact scan of the same
    table, for `queries` query vectors (the fake server's embedding of a
    question, of a stored summary, and random unit vectors), at the
    ef_search docsum sets (docsum.store.pgvector.nearest)."""
    import numpy as np
    import psycopg
    from fakeopenai import default_embedding

    from docsum.store import pgvector
    from docsum.store.pgschema import SEARCH_PATH_SQL

    rng = np.random.default_rng(7)
    vectors = [np.asarray(default_embedding(q, ASK_DIM), dtype=np.float32) for q in ASK_QUESTIONS]
    vectors += [np.asarray(default_embedding(f"Report {i} on storms", ASK_DIM), dtype=np.float32) for i in range(20)]
    while len(vectors) < queries:
        v = rng.standard_normal(ASK_DIM).astype(np.float32)
        vectors.append(v / np.linalg.norm(v))
    recalls, index_ms, exact_ms = [], [], []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SEARCH_PATH_SQL)
        for v in vectors[:queries]:
            t0 = time.perf_counter()
            found, _ = pgvector.nearest(conn, v, 10)
            index_ms.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            with conn.transaction():
                conn.execute("SET LOCAL enable_indexscan = off")
                rows = conn.execute(
                    f"SELECT doc_id, embedding <#> %s::vector AS d FROM {pgvector.TABLE} ORDER BY d LIMIT 10",
                    (pgvector.vector_literal(v),),
                ).fetchall()
            exact_ms.append((time.perf_counter() - t0) * 1000)
            # A document tied with the exact 10th counts as in the exact top 10.
            exact = {r[0] for r in rows}
            boundary = rows[-1][1]
            with conn.transaction():
                conn.execute("SET LOCAL enable_indexscan = off")
                exact |= {r[0] for r in conn.execute(
                    f"SELECT doc_id FROM {pgvector.TABLE} WHERE embedding <#> %s::vector <= %s",
                    (pgvector.vector_literal(v), boundary + 1e-6),
                ).fetchall()}  # fmt: skip
            recalls.append(sum(d in exact for d in found[:10]) / 10)
    return {
        "queries": len(recalls),
        "ef_search": min(pgvector.MAX_EF_SEARCH, max(pgvector.MIN_EF_SEARCH, 20)),
        "recall_at_10_mean": round(statistics.fmean(recalls), 4),
        "recall_at_10_min": min(recalls),
        "index_query_ms_median": round(statistics.median(index_ms), 2),
        "exact_scan_ms_median": round(statistics.median(exact_ms), 2),
    }


def ask_round(
    server: PostgresServer,
    count: int,
    names: tuple[str, ...] = ("sqlite", "postgresql_local_file", "postgresql_pgvector"),
    warm: int = 5,
    bulk: bool = False,
) -> dict[str, Any]:
    """SQLite, PostgreSQL without pgvector (an ordinary user cannot create the
    extension: the local vector file) and PostgreSQL with it (a superuser's
    first build creates it: nearest summaries found in SQL), same documents."""
    import numpy as np

    from docsum.store.opening import open_store

    scratch = Path(tempfile.mkdtemp(prefix="bench-ask-"))
    local_db, vector_db = server.new_database(), server.new_database()
    stores = {
        "sqlite": str(scratch / "store.sqlite"),
        "postgresql_local_file": server.password_url(local_db),
        "postgresql_pgvector": server.url(vector_db),
    }
    stores = {name: location for name, location in stores.items() if name in names}
    out: dict[str, Any] = {"documents": count, "embedding_dim": ASK_DIM, "warm_runs": warm}
    warm_runs = warm
    top: dict[str, list[list[str]]] = {}
    with FakeOpenAI(latency=0.0, embedding_dim=ASK_DIM) as fake:
        for name, location in stores.items():
            t0 = time.monotonic()
            if bulk and name == "postgresql_pgvector":
                bulk_populate_pgvector(location, count)
            else:
                populate(location, count)
            out[f"{name}_populate_s"] = round(time.monotonic() - t0, 1)
            home = scratch / f"home-{name}"
            home.mkdir()
            first = timed_ask(location, home, fake)
            warm = [timed_ask(location, home, fake) for _ in range(warm_runs)] or [first]
            search = next((line for line in first[2]["explain"].splitlines() if "store:" in line), "")
            out[name] = {
                "search": search.split(": ", 2)[-1][:160],
                "first": {"wall_s": first[0], "rss_mb": first[1]},
                "next_median": {
                    "wall_s": statistics.median(w[0] for w in warm),
                    "rss_mb": statistics.median(w[1] for w in warm),
                },
            }
            if len(stores) > 1:  # the top 10 of each question, compared across the stores below
                top[name] = [[(d["path"], d["score"]) for d in timed_ask(location, home, fake, q)[2]["documents"]]
                             for q in ASK_QUESTIONS]  # fmt: skip
            print(json.dumps({name: out[name]}), flush=True)
        # 100 documents change on the server: the next question fetches only
        # them (local file) or finds them in the table (pgvector).
        for name in [n for n in ("postgresql_local_file", "postgresql_pgvector") if n in stores]:
            with open_store(stores[name]) as store:
                for doc in store.list_documents(with_embeddings=True)[:100]:
                    store.update_embedding(doc.doc_id, np.asarray(doc.embedding) * 1.0, doc.embedding_model or "")
            after = [timed_ask(stores[name], scratch / f"home-{name}", fake) for _ in range(max(1, min(3, warm_runs)))]
            out[name]["after_100_changed_median"] = {
                "wall_s": statistics.median(a[0] for a in after),
                "rss_mb": statistics.median(a[1] for a in after),
            }
    # HNSW is approximate: the share of its top 10 that belongs in the exact
    # top 10 (SQLite's), a document tied with the exact 10th counting as in.
    if "postgresql_pgvector" in stores:
        out["pgvector_index_recall"] = index_recall(stores["postgresql_pgvector"])
    if "sqlite" not in stores or "postgresql_pgvector" not in stores:
        shutil.rmtree(scratch, ignore_errors=True)
        return out
    out["pgvector_top10_recall"] = [
        sum(score >= exact[-1][1] - 1e-6 for _, score in found) / max(1, len(exact))
        for found, exact in zip(top["postgresql_pgvector"], top["sqlite"])
    ]
    if "postgresql_local_file" in stores:
        out["local_file_top10_same_as_sqlite"] = [[p for p, _ in t] for t in top["postgresql_local_file"]] == [
            [p for p, _ in t] for t in top["sqlite"]
        ]
    shutil.rmtree(scratch, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--ask-docs", type=int, default=10000)
    parser.add_argument("--skip-build", action="store_true")
    parser.add_argument("--skip-ask", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "pg_store.json")
    parser.add_argument(
        "--pgvector-wheel",
        action="store_true",
        help="run the server from the pgserver wheel's binaries (pgvector 0.6.2)",
    )
    parser.add_argument("--ask-stores", default="sqlite,postgresql_local_file,postgresql_pgvector")
    parser.add_argument("--warm", type=int, default=5, help="questions asked after the first, per store")
    parser.add_argument(
        "--bulk", action="store_true", help="fill the pgvector store with COPY (bulk_populate_pgvector)"
    )
    args = parser.parse_args()
    bindir = pgvector_bindir() if args.pgvector_wheel else find_bindir()
    if bindir is None:
        sys.exit(
            "no PostgreSQL binaries found (set DOCSUM_PG_BINDIR, or install the pgserver wheel for --pgvector-wheel)"
        )
    server = PostgresServer(bindir)
    server.start()
    results: dict[str, Any] = {
        "uptime_before": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    }
    try:
        if not args.skip_build:
            corpus = Path(tempfile.mkdtemp(prefix="bench-corpus-"))
            make_corpus(corpus, args.docs)
            rounds = []
            for builders, kill in ((1, False), (2, False), (4, False), (4, True)):
                rounds.append(build_round(server, corpus, builders, args.docs, kill))
                print(json.dumps(rounds[-1]), flush=True)
            one = rounds[0]["wall_s"]
            for r in rounds:
                r["time_vs_one_builder"] = round(r["wall_s"] / one, 3)
            results["builds"] = rounds
            shutil.rmtree(corpus, ignore_errors=True)
        if not args.skip_ask:
            results["ask"] = ask_round(server, args.ask_docs, tuple(args.ask_stores.split(",")), args.warm, args.bulk)
            print(json.dumps(results["ask"]), flush=True)
    finally:
        server.stop()
    results["uptime_after"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
