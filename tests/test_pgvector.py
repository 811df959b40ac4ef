"""The PostgreSQL store's search on the server (pgvector, docsum.store.pgvector)
against the throwaway server of tests/pgserver.py: the same ranking as the
local vector file, the vector table following every write, and the local
path kept where the extension cannot be created.

pgvector is not packaged for every PostgreSQL (Debian 12 has no
postgresql-15-pgvector), so these tests run against a second server, the
PostgreSQL 16 with pgvector that the `pgserver` wheel of the test extra ships
(conftest.py::pgvector_server); the same questions also go to the suite's
other server (without pgvector where it is Debian's) and to SQLite, and all
three must rank alike. Without the wheel they skip; CI sets
DOCSUM_REQUIRE_PGVECTOR=1, which makes that a failure."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakeopenai import FakeOpenAI, Reply
from helpers import llm_args, make_docs, run_cli
from pgserver import TEST_PASSWORD

from docsum.lexical import LEXICAL_EMBED_MODEL
from docsum.store.opening import open_store
from docsum.store.records import DocumentRecord, make_doc_id

WORDS = [
    f"{a}{b}"
    for a in ("ferry", "orchard", "tariff", "comet", "mill", "canal", "bee", "storm")
    for b in ("", "s", "ing", "er", "ly")
]
EMBED = ["--embed-model", "fake-embed"]


def pgvector_missing(pg_server: Any) -> str:
    if pg_server.sql("postgres", "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'").strip() == "1":
        return ""
    return (
        "pgvector is not installed for this PostgreSQL (no 'vector' in pg_available_extensions): "
        "build and install it against these server headers to run the pgvector tests"
    )


@pytest.fixture
def vector_db(pgvector_server: Any) -> str:
    """A fresh database on the server that offers pgvector."""
    missing = pgvector_missing(pgvector_server)
    assert not missing, missing  # the pgserver wheel's PostgreSQL ships it: a skip here would hide a broken wheel
    return pgvector_server.new_database()


def summary_of(body: dict[str, Any]) -> Reply:
    """A different bag of words per document, so that scores rarely tie."""
    text = " ".join(str(m.get("content")) for m in body.get("messages", []) if isinstance(m, dict))
    mark = re.search(r"DOCMARK(\d+)", text)
    rng = random.Random(int(mark.group(1)) if mark else 0)
    return Reply(text=" ".join(rng.choice(WORDS) for _ in range(14)))


def ranking(result: Any) -> list[tuple[str, str]]:
    """(score, path) of every candidate `--explain` lists, best first. Scores
    equal to the three decimals shown are put in path order: float32 on the
    server and float64 here may order such near-ties either way."""
    found = re.findall(r"\[[x ]\] +(-?\d\.\d{3})(?: \[[^\]]*\])? +(doc\d+\.txt):", result.stderr)
    return sorted(found, key=lambda pair: (-float(pair[0]), pair[1]))


def test_pgvector_ranks_as_the_local_vector_file_and_sqlite_do(
    tmp_path: Path, pgvector_server: Any, vector_db: str, pg_server: Any
) -> None:
    url = pgvector_server.url(vector_db)
    # The same documents in SQLite and in the other server (no pgvector where it is Debian's).
    sqlite_store = tmp_path / "store.sqlite"
    plain_url = pg_server.url(pg_server.new_database())
    docs = tmp_path / "docs"
    make_docs(docs, 70)  # more than the 50 candidates a question keeps: the LIMIT matters
    with FakeOpenAI(responder=summary_of, embedding_dim=256) as fake:
        for store in (url, sqlite_store, plain_url):
            assert run_cli("build", docs, "--store", store, *llm_args(fake), *EMBED).code == 0
        shown = run_cli("config", "show", "--store", url, "--json").json()["vector_search"]
        assert "pgvector" in shown and "HNSW" in shown and "256-dimension" in shown, shown
        assert pgvector_server.sql(vector_db, "SELECT count(*) FROM docsum.summary_vectors").strip() == "70"
        questions = ["ferry tariffs", "comet storming mills", "bees canal orchardly"]
        asks = ("ask", "--store", url, "--json", "--explain", "--top-k", "5", *llm_args(fake), *EMBED)
        retrievers = (["--retriever", "embedding"], ["--retriever", "fused"])
        server = [run_cli(asks[0], q, *asks[1:], *r) for q in questions for r in retrievers]
        assert all(r.code == 0 and "found in SQL" in r.stderr for r in server), server
        # The same store, searched from the local vector file.
        pgvector_server.sql(vector_db, "DROP TABLE docsum.summary_vectors")
        local = [run_cli(asks[0], q, *asks[1:], *r) for q in questions for r in retrievers]
        assert all(r.code == 0 and "local vector file" in r.stderr for r in local), local
        on_sqlite = [run_cli(asks[0], q, "--store", sqlite_store, *asks[3:], *r) for q in questions for r in retrievers]
        other = [run_cli(asks[0], q, "--store", plain_url, *asks[3:], *r) for q in questions for r in retrievers]
        assert all(r.code == 0 for r in on_sqlite + other), on_sqlite + other
        if pgvector_missing(pg_server):
            assert all("local vector file" in r.stderr for r in other), other
    for on_server, in_process, sqlite_run, other_run in zip(server, local, on_sqlite, other):
        assert ranking(sqlite_run) == ranking(in_process) == ranking(other_run)
        assert ranking(on_server) == ranking(in_process) and len(ranking(on_server)) >= 50
        chosen = [(d["path"], d["score"]) for d in on_server.json()["documents"]]
        assert [p for p, _ in chosen] == [d["path"] for d in in_process.json()["documents"]]
        assert [s for _, s in chosen] == pytest.approx([d["score"] for d in in_process.json()["documents"]], abs=1e-5)


def record(path: str, vector: list[float] | None, model: str = "e") -> DocumentRecord:
    return DocumentRecord(
        doc_id=make_doc_id("/data", path), path=path, root="/data", size=1, mtime_ns=1, sha256="ab" * 32, title=path,
        kind="text", token_count=1, page_count=None, split_fingerprint="s", summary_fingerprint="f",
        summary=f"summary of {path}", summary_model="m",
        embedding=None if vector is None else np.array(vector, dtype=np.float32), embedding_model=model if vector else None,
    )  # fmt: skip


def test_the_vector_table_follows_every_write(pgvector_server: Any, vector_db: str) -> None:
    url = pgvector_server.url(vector_db)
    with open_store(url) as store:
        store.put_document(record("lex.txt", [0.5, 0.5, 0.0], LEXICAL_EMBED_MODEL), [])
        assert store.server_search() is None, "lexical vectors are never searched on the server"
        store.remove_document(make_doc_id("/data", "lex.txt"))
        for i in range(4):
            store.put_document(record(f"d{i}.txt", [1.0, float(i), 0.0]), [])
        found = store.server_search()
        assert found is not None and (found.model, found.dim, found.indexed) == ("e", 3, True)
        ids, scores = store.nearest_summaries(np.array([0.0, 1.0, 0.0], dtype=np.float32), 2)
        assert ids == [make_doc_id("/data", "d3.txt"), make_doc_id("/data", "d2.txt")] and list(scores) == [3.0, 2.0]
        store.update_embedding(make_doc_id("/data", "d0.txt"), np.array([0.0, 9.0, 0.0], dtype=np.float32), "e")
        assert store.nearest_summaries(np.array([0.0, 1.0, 0.0], dtype=np.float32), 1)[0] == [
            make_doc_id("/data", "d0.txt")
        ]
        store.remove_document(make_doc_id("/data", "d3.txt"))
        assert sorted(store.nearest_summaries(np.array([1.0, 0.0, 0.0], dtype=np.float32), None)[0]) == sorted(
            make_doc_id("/data", f"d{i}.txt") for i in range(3)
        )
        # A vector of another size cannot be searched there: the store falls
        # back to the local vector file rather than leave a document out.
        store.update_embedding(make_doc_id("/data", "d1.txt"), np.array([1.0, 0.0], dtype=np.float32), "e")
        assert store.server_search() is None and "not every summary" in store.search_description()
        store.update_embedding(make_doc_id("/data", "d1.txt"), np.array([1.0, 1.0, 0.0], dtype=np.float32), "other")
        assert store.server_search() is None and "two embedding models" in store.search_description()
        store.update_embedding(make_doc_id("/data", "d1.txt"), np.array([1.0, 1.0, 0.0], dtype=np.float32), "e")
        assert store.server_search() is not None
    assert pgvector_server.sql(vector_db, "SELECT count(*) FROM docsum.summary_vectors").strip() == "3"


def test_without_the_right_to_create_pgvector_the_local_file_serves_until_an_administrator_does(
    tmp_path: Path, pgvector_server: Any, vector_db: str
) -> None:
    """pgvector is not a trusted extension: an ordinary user cannot create it.
    Then questions use the local vector file; once an administrator has created
    it, the next build makes the table and fills it from the stored vectors."""
    url = pgvector_server.password_url(vector_db)  # the test role: no superuser
    docs = tmp_path / "docs"
    make_docs(docs, 6)
    with FakeOpenAI(responder=summary_of) as fake:
        assert run_cli("build", docs, "--store", url, *llm_args(fake), *EMBED).code == 0
        shown = run_cli("config", "show", "--store", url, "--json").json()["vector_search"]
        assert "not created in this database" in shown and "local vector file" in shown, shown
        assert TEST_PASSWORD not in shown
        asked = run_cli("ask", "ferry", "--store", url, "--json", "--explain", *llm_args(fake), *EMBED)
        assert asked.code == 0 and "local vector file" in asked.stderr
        pgvector_server.sql(vector_db, "CREATE EXTENSION vector")  # the administrator, into public
        rebuilt = run_cli("build", docs, "--store", url, "--json", *llm_args(fake), *EMBED)
        assert rebuilt.code == 0 and rebuilt.json()["documents"]["unchanged"] == 6
        again = run_cli("ask", "ferry", "--store", url, "--json", "--explain", *llm_args(fake), *EMBED)
    assert again.code == 0 and "found in SQL" in again.stderr
    assert ranking(again) == ranking(asked)
    assert pgvector_server.sql(vector_db, "SELECT count(*) FROM docsum.summary_vectors").strip() == "6"
