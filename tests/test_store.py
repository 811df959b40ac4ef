"""Tests for docsum.store.sqlite and docsum.paths: fast, no network, no LLM."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[1]
# The package is not necessarily installed in the test venv; make the checkout importable.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from docsum.config import load_settings, store_location  # noqa: E402
from docsum.errors import (  # noqa: E402
    ConfigError,  # noqa: E402
    DocsumError,
    ExitCode,
    StoreLockedError,
    StoreVersionError,
)
from docsum.paths import config_dir, data_dir, docsum_home  # noqa: E402
from docsum.store import records, sqlite_schema  # noqa: E402
from docsum.store.lock import BuildLock  # noqa: E402
from docsum.store.opening import open_store  # noqa: E402
from docsum.store.records import DocumentRecord, NodeRecord, make_doc_id  # noqa: E402
from docsum.store.sqlite import Store  # noqa: E402
from docsum.store.sqlite_schema import MIGRATIONS  # noqa: E402

ROOT = "/data/docs"


def make_doc(
    path: str,
    root: str = ROOT,
    *,
    summary: str = "a summary",
    embedding: np.ndarray | None = None,
    embedding_model: str | None = None,
) -> DocumentRecord:
    return DocumentRecord(
        doc_id=make_doc_id(root, path),
        path=path,
        root=root,
        size=1234,
        mtime_ns=1_700_000_000_000_000_000,
        sha256="ab" * 32,
        title=Path(path).stem,
        kind="pdf" if path.endswith(".pdf") else "text",
        token_count=900,
        page_count=3 if path.endswith(".pdf") else None,
        split_fingerprint="split-fp",
        summary_fingerprint="sum-fp",
        summary=summary,
        summary_model="model-x",
        embedding=embedding,
        embedding_model=embedding_model,
    )


def make_nodes(doc: DocumentRecord, n: int) -> list[NodeRecord]:
    return [
        NodeRecord(doc.doc_id, i, f"chunk {i} of {doc.path}", i * 100, i * 100 + 99, (i + 1, i + 2), 25)
        for i in range(n)
    ]


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "indexes" / "default.sqlite"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.process)])
def store(request: pytest.FixtureRequest, store_path: Path):
    """Each test of the store interface runs against both backends."""
    location = str(store_path) if request.param == "sqlite" else request.getfixturevalue("pg_url")
    with open_store(location) as s:
        yield s


# A broken constraint: sqlite3's own error, or the PostgreSQL store's one-line DocsumError.
CONSTRAINT_ERRORS = (sqlite3.IntegrityError, DocsumError)


def in_transaction(store: object) -> bool:
    conn = store.conn  # type: ignore[attr-defined]
    if isinstance(conn, sqlite3.Connection):
        return conn.in_transaction
    return conn.info.transaction_status != 0  # psycopg: 0 is IDLE


def count_rows(store: object, table: str) -> int:
    return int(store.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])  # type: ignore[attr-defined]


def run_py(code: str, *args: str, **kwargs) -> subprocess.Popen[str]:
    """Start a Python subprocess that can import docsum from this checkout."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kwargs,
    )


# ---------------------------------------------------------------- paths


def test_paths_follow_docsum_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCSUM_HOME", str(tmp_path))
    monkeypatch.delenv("DOCSUM_STORE", raising=False)
    assert docsum_home() == tmp_path
    assert data_dir() == tmp_path / "data"
    assert config_dir() == tmp_path / "config"
    assert _store({}) == tmp_path / "data" / "indexes" / "default.sqlite"
    assert _store({"index": "work-2.v1"}) == tmp_path / "data" / "indexes" / "work-2.v1.sqlite"


def _store(flags: dict[str, str]) -> object:
    return store_location(load_settings(flags))


def test_paths_without_docsum_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCSUM_HOME", raising=False)
    assert docsum_home() is None
    assert data_dir().name == "docsum"
    assert config_dir().name == "docsum"


def test_store_path_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """One rule for every command: --store, else --index (not both), else
    $DOCSUM_STORE, else `store` in config.toml, else the default index."""
    monkeypatch.setenv("DOCSUM_HOME", str(tmp_path))
    config = tmp_path / "config.toml"
    config.write_text(f'store = "{tmp_path / "file.sqlite"}"\n', encoding="utf-8")
    monkeypatch.setenv("DOCSUM_CONFIG", str(config))
    assert _store({}) == tmp_path / "file.sqlite"
    monkeypatch.setenv("DOCSUM_STORE", str(tmp_path / "env.sqlite"))
    assert _store({}) == tmp_path / "env.sqlite"
    assert _store({"index": "idx"}) == tmp_path / "data" / "indexes" / "idx.sqlite"
    assert _store({"store": str(tmp_path / "flag.sqlite")}) == tmp_path / "flag.sqlite"
    with pytest.raises(ConfigError, match="give --store or --index, not both"):
        _store({"store": str(tmp_path / "flag.sqlite"), "index": "idx"})
    assert _store({"store": "postgresql://u@h/db"}) == "postgresql://u@h/db"


@pytest.mark.parametrize("bad", ["", "a/b", "../x", "sp ace", "é", "..", "a\\b"])
def test_bad_index_names_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="invalid index name"):
        _store({"index": bad, "store": "elsewhere.sqlite"})


# ---------------------------------------------------------------- opening, migrations, versions


def test_new_store_is_migrated_and_reopening_is_idempotent(store_path: Path) -> None:
    assert len(MIGRATIONS) >= 1
    with Store.open(store_path) as s:
        assert s.schema_version == len(MIGRATIONS)
        s.put_document(make_doc("a.txt"), [])
    with Store.open(store_path) as s:
        assert s.schema_version == len(MIGRATIONS)
        assert [d.path for d in s.list_documents()] == ["a.txt"]
        assert s.integrity_ok()
        assert s.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert s.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert s.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000
        assert s.conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL


def test_migrations_apply_in_order_one_transaction_each(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    steps = [
        "CREATE TABLE t (a INTEGER);",
        "ALTER TABLE t ADD COLUMN b TEXT; INSERT INTO t (a, b) VALUES (1, 'one');",
        "CREATE TRIGGER t_ins AFTER INSERT ON t BEGIN UPDATE t SET b = 'trig'; END;\nINSERT INTO t (a) VALUES (2);",
    ]
    monkeypatch.setattr(sqlite_schema, "MIGRATIONS", steps[:2])
    with Store.open(path) as s:
        assert s.schema_version == 2
        assert s.conn.execute("SELECT a, b FROM t").fetchall() == [(1, "one")]
    monkeypatch.setattr(sqlite_schema, "MIGRATIONS", steps)  # a later docsum appends one
    with Store.open(path) as s:
        assert s.schema_version == 3
        assert s.conn.execute("SELECT a, b FROM t ORDER BY a").fetchall() == [(1, "trig"), (2, "trig")]
    with Store.open(path) as s:  # nothing left to apply
        assert s.schema_version == 3

    # A failing migration rolls back entirely and leaves the version where it was.
    monkeypatch.setattr(sqlite_schema, "MIGRATIONS", [*steps, "CREATE TABLE u (x); INSERT INTO nope VALUES (1);"])
    with pytest.raises(sqlite3.OperationalError):
        Store.open(path)
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == 3
        assert raw.execute("SELECT name FROM sqlite_master WHERE name = 'u'").fetchone() is None


def test_newer_store_is_refused_without_touching_it(store_path: Path) -> None:
    with Store.open(store_path) as s:
        s.put_document(make_doc("a.txt"), [])
    raw = sqlite3.connect(store_path)
    raw.execute("PRAGMA user_version = 999")
    raw.close()
    before = store_path.read_bytes()
    with pytest.raises(StoreVersionError) as info:
        Store.open(store_path)
    message = str(info.value)
    assert str(store_path) in message
    assert "schema v999" in message and f"up to v{len(MIGRATIONS)}" in message and "upgrade docsum" in message
    assert store_path.read_bytes() == before
    with pytest.raises(StoreVersionError):
        Store.open(store_path, readonly=True)
    assert store_path.read_bytes() == before


def test_missing_store_with_create_false(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        Store.open(tmp_path / "nope.sqlite", create=False)
    with pytest.raises(FileNotFoundError):
        Store.open(tmp_path / "nope.sqlite", readonly=True)
    assert not (tmp_path / "nope.sqlite").exists()


def test_not_a_database_is_a_docsum_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.sqlite"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(DocsumError, match="not a docsum store"):
        Store.open(path)


def test_file_and_directory_modes(tmp_path: Path) -> None:
    path = tmp_path / "new" / "nested" / "s.sqlite"
    old = os.umask(0o022)  # a typical permissive umask: the store must not inherit it
    try:
        with Store.open(path) as s:
            s.put_document(make_doc("a.txt"), [])
            assert os.umask(0o022) == 0o022, "umask must be restored after open"
            for suffix in ("", "-wal", "-shm"):
                f = Path(str(path) + suffix)
                assert f.exists(), f
                assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
        with BuildLock(path):
            assert stat.S_IMODE(path.with_name(path.name + ".lock").stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_readonly_store_reads_but_refuses_writes(store_path: Path) -> None:
    with Store.open(store_path) as s:
        s.put_document(make_doc("a.txt"), [])
    with Store.open(store_path, readonly=True) as ro:
        assert [d.path for d in ro.list_documents()] == ["a.txt"]
        with pytest.raises(sqlite3.OperationalError):
            ro.set_meta("x", 1)


def test_closed_store_raises(store_path: Path) -> None:
    s = Store.open(store_path)
    s.close()
    s.close()  # idempotent
    with pytest.raises(DocsumError):
        s.list_documents()


# ---------------------------------------------------------------- documents


def test_make_doc_id_is_stable_and_location_based() -> None:
    a = make_doc_id("/r", "x/a.pdf")
    assert a == make_doc_id("/r", "x/a.pdf")
    assert len(a) == 12 and all(c in "0123456789abcdef" for c in a)
    assert a != make_doc_id("/r2", "x/a.pdf") != make_doc_id("/r", "x/b.pdf")
    # The separator keeps ("/r", "x") and ("/rx", "") apart.
    assert make_doc_id("/r", "x") != make_doc_id("/rx", "")


def test_put_get_remove_round_trip_with_nodes_and_embedding(store: Store) -> None:
    emb = np.arange(8, dtype=np.float64) / 7  # float64 in, float32 out
    doc = make_doc("reports/q1.pdf", embedding=emb, embedding_model="emb-1")
    store.put_document(doc, make_nodes(doc, 3))

    got = store.get_document(doc.doc_id)
    assert got is not None
    assert got == dataclasses.replace(doc, added_at=got.added_at, updated_at=got.updated_at)
    assert got.added_at and got.updated_at
    assert got.embedding is not None and got.embedding.dtype == np.float32
    np.testing.assert_array_equal(got.embedding, emb.astype(np.float32))
    assert got.embedding.flags.writeable
    assert got.embedding_model == "emb-1"
    assert got.page_count == 3

    listed = store.list_documents()
    assert len(listed) == 1 and listed[0].embedding is None and listed[0].embedding_model == "emb-1"
    assert store.list_documents(with_embeddings=True)[0].embedding is not None

    nodes = store.nodes_for([doc.doc_id, "unknown"])
    assert nodes["unknown"] == []
    assert nodes[doc.doc_id] == make_nodes(doc, 3)
    assert nodes[doc.doc_id][1].pages == (2, 3)

    assert store.remove_document(doc.doc_id) is True
    assert store.remove_document(doc.doc_id) is False
    assert store.get_document(doc.doc_id) is None
    assert store.conn.execute("SELECT COUNT(*) FROM nodes").fetchone()[0] == 0  # cascaded


def test_put_replaces_nodes_keeps_added_at_and_clears_failure(store: Store) -> None:
    doc = make_doc("a.txt")
    store.record_failure(ROOT, "a.txt", "boom")
    store.record_failure(ROOT, "other.txt", "bang")
    store.put_document(doc, make_nodes(doc, 5))
    first = store.get_document(doc.doc_id)
    assert first is not None
    assert [f["path"] for f in store.failures()] == ["other.txt"]

    changed = make_doc("a.txt", summary="new summary")
    store.put_document(changed, make_nodes(changed, 2))
    second = store.get_document(doc.doc_id)
    assert second is not None
    assert second.summary == "new summary"
    assert second.added_at == first.added_at
    assert [n.seq for n in store.nodes_for([doc.doc_id])[doc.doc_id]] == [0, 1]
    assert len(store.list_documents()) == 1


def test_put_rejects_foreign_nodes_and_doc_id_collisions(store: Store) -> None:
    a, b = make_doc("a.txt"), make_doc("b.txt")
    with pytest.raises(ValueError):
        store.put_document(a, make_nodes(b, 1))
    store.put_document(a, [])
    impostor = make_doc("b.txt")
    impostor.doc_id = a.doc_id
    with pytest.raises(DocsumError, match="already names"):
        store.put_document(impostor, [])
    assert store.get_document(a.doc_id).path == "a.txt"  # type: ignore[union-attr]


def test_get_document_by_id_path_suffix_and_absolute(store: Store) -> None:
    docs = [make_doc(p) for p in ("notes/a.txt", "reports/2024/q1.pdf", "archive/2024/q1.pdf", "xb.txt", "b.txt")]
    for d in docs:
        store.put_document(d, [])
    by_path = {d.path: d for d in docs}

    assert store.get_document(by_path["notes/a.txt"].doc_id).path == "notes/a.txt"  # type: ignore[union-attr]
    assert store.get_document("reports/2024/q1.pdf").path == "reports/2024/q1.pdf"  # type: ignore[union-attr]
    assert store.get_document("./notes/a.txt").path == "notes/a.txt"  # type: ignore[union-attr]
    assert store.get_document("a.txt").path == "notes/a.txt"  # type: ignore[union-attr]
    q1 = store.get_document("reports/2024/q1.pdf")
    assert q1 is not None and q1.doc_id == by_path["reports/2024/q1.pdf"].doc_id
    assert store.get_document(f"{ROOT}/archive/2024/q1.pdf").path == "archive/2024/q1.pdf"  # type: ignore[union-attr]
    # "b.txt" is an exact path, so it wins over being a suffix of nothing else;
    # and "xb.txt" is not a '/'-boundary suffix match for "b.txt".
    assert store.get_document("b.txt").path == "b.txt"  # type: ignore[union-attr]
    # Ambiguous suffix: two documents end with 2024/q1.pdf.
    assert store.get_document("2024/q1.pdf") is None
    assert {d.path for d in store.find_documents("q1.pdf")} == {"reports/2024/q1.pdf", "archive/2024/q1.pdf"}
    assert store.get_document("missing.txt") is None
    assert store.get_document("") is None
    assert store.get_document("%.txt") is None  # no LIKE wildcards


def test_same_relative_path_under_two_roots(store: Store) -> None:
    a, b = make_doc("x.txt", "/r1"), make_doc("x.txt", "/r2")
    store.put_document(a, [])
    store.put_document(b, [])
    assert a.doc_id != b.doc_id
    assert store.get_document("x.txt") is None  # ambiguous exact path
    assert store.get_document("/r2/x.txt").doc_id == b.doc_id  # type: ignore[union-attr]
    assert [d.root for d in store.list_documents()] == ["/r1", "/r2"]


def test_list_documents_is_ordered_by_path(store: Store) -> None:
    for p in ("c.txt", "a/z.txt", "b.txt", "a/b.txt"):
        store.put_document(make_doc(p), [])
    assert [d.path for d in store.list_documents()] == ["a/b.txt", "a/z.txt", "b.txt", "c.txt"]


def test_stored_files_are_what_a_build_compares_in_listing_order(store: Store) -> None:
    docs = [make_doc(p) for p in ("c.txt", "a/z.txt", "b.txt")]
    for doc in docs:
        store.put_document(doc, make_nodes(doc, 2))
    listed = [
        (d.doc_id, d.root, d.path, d.size, d.mtime_ns, d.sha256, d.split_fingerprint, d.summary_fingerprint)
        for d in store.list_documents()
    ]
    assert [tuple(f) for f in store.stored_files()] == listed and [f.path for f in store.stored_files()] == [
        "a/z.txt",
        "b.txt",
        "c.txt",
    ]


def test_update_embedding_and_summary_matrix(store: Store) -> None:
    assert store.summary_matrix() == ([], None, None)
    a, b = make_doc("a.txt"), make_doc("b.txt")
    store.put_document(a, [])
    store.put_document(b, [])
    ids, matrix, model = store.summary_matrix()
    assert ids == [a.doc_id, b.doc_id] and matrix is None and model is None

    store.update_embedding(a.doc_id, np.ones(4), "emb-1")
    ids, matrix, model = store.summary_matrix()
    assert matrix is None and model == "emb-1"  # b still missing

    store.update_embedding(b.doc_id, np.array([1, 2, 3, 4], dtype=np.float32), "emb-1")
    ids, matrix, model = store.summary_matrix()
    assert ids == [a.doc_id, b.doc_id] and model == "emb-1"
    assert matrix is not None and matrix.dtype == np.float32 and matrix.shape == (2, 4)
    np.testing.assert_array_equal(matrix[1], [1, 2, 3, 4])

    store.update_embedding(b.doc_id, np.ones(5), "emb-1")  # dims differ
    assert store.summary_matrix()[1] is None
    store.update_embedding(b.doc_id, np.ones(4), "emb-2")  # models differ
    assert store.summary_matrix()[1:] == (None, None)

    with pytest.raises(KeyError):
        store.update_embedding("nope", np.ones(4), "emb-1")
    for bad in (np.ones((2, 2)), np.array([]), np.array([1.0, np.nan])):
        with pytest.raises(ValueError):
            store.update_embedding(a.doc_id, bad, "emb-1")


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=1, max_size=64))
def test_embedding_round_trip_is_exact(values: list[float]) -> None:
    vec = np.array(values, dtype=np.float32)
    blob = records.encode_embedding(vec)
    np.testing.assert_array_equal(records.decode_embedding(blob), vec)


def test_interrupted_put_leaves_no_partial_document(store: Store) -> None:
    old = make_doc("a.txt", summary="old")
    store.put_document(old, make_nodes(old, 2))

    # Fails inside the transaction, after the row and a first node are written:
    # duplicate seq violates the primary key.
    new = make_doc("a.txt", summary="new")
    dup = make_nodes(new, 2) + [make_nodes(new, 1)[0]]
    with pytest.raises(CONSTRAINT_ERRORS):
        store.put_document(new, dup)
    # Fails with a non-database exception midway (unserialisable page number).
    broken = make_nodes(new, 3)
    broken[2].pages = (object(),)  # type: ignore[assignment]
    with pytest.raises(TypeError):
        store.put_document(new, broken)
    # A brand new document that fails midway leaves nothing at all.
    fresh = make_doc("fresh.txt")
    with pytest.raises(CONSTRAINT_ERRORS):
        store.put_document(fresh, make_nodes(fresh, 1) * 2)

    assert not in_transaction(store)
    assert store.get_document("fresh.txt") is None
    kept = store.get_document(old.doc_id)
    assert kept is not None and kept.summary == "old"
    assert store.nodes_for([old.doc_id])[old.doc_id] == make_nodes(old, 2)
    assert count_rows(store, "nodes") == 2
    # And the store still works afterwards.
    store.put_document(new, make_nodes(new, 1))
    assert store.get_document(old.doc_id).summary == "new"  # type: ignore[union-attr]


def test_interrupt_by_keyboard_interrupt_rolls_back(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = make_doc("a.txt")
    calls = {"n": 0}

    def exploding_dumps(value: object, *a: object, **k: object) -> str:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return json.dumps(value)

    monkeypatch.setattr(json, "dumps", exploding_dumps)
    with pytest.raises(KeyboardInterrupt):
        store.put_document(doc, make_nodes(doc, 3))
    monkeypatch.undo()
    assert store.get_document(doc.doc_id) is None
    assert count_rows(store, "nodes") == 0


# ---------------------------------------------------------------- failures, runs, meta


def test_failure_upsert_counts_attempts(store: Store) -> None:
    store.record_failure(ROOT, "bad.pdf", "encrypted")
    store.record_failure(ROOT, "bad.pdf", "still encrypted")
    store.record_failure(ROOT, "worse.pdf", "truncated")
    store.record_failure("/other", "bad.pdf", "x")
    fails = {(f["root"], f["path"]): f for f in store.failures()}
    assert fails[(ROOT, "bad.pdf")]["attempts"] == 2
    assert fails[(ROOT, "bad.pdf")]["error"] == "still encrypted"
    assert fails[(ROOT, "worse.pdf")]["attempts"] == 1
    assert fails[("/other", "bad.pdf")]["attempts"] == 1
    store.clear_failure(ROOT, "bad.pdf")
    assert (ROOT, "bad.pdf") not in {(f["root"], f["path"]) for f in store.failures()}
    store.clear_failure(ROOT, "never-failed.pdf")  # no-op


def test_nul_characters_are_dropped_alike_on_both_backends(store: Store) -> None:
    """PostgreSQL's text cannot hold U+0000 and SQLite's can: both stores drop
    it, so a summary or title with a NUL (a hostile server, a PDF's metadata)
    is stored the same, and a lookup with one finds nothing instead of failing."""
    doc = dataclasses.replace(make_doc("nul.txt"), title="Ti\x00tle", summary="sum\x00mary")
    nodes = [dataclasses.replace(n, text="no\x00de") for n in make_nodes(doc, 1)]
    store.put_document(doc, nodes, [(store.start_run("build", {}), "chat", "m\x00odel", 1, 1, 0.1, True)])
    got = store.get_documents([doc.doc_id])[0]
    assert (got.title, got.summary) == ("Title", "summary")
    assert store.nodes_for([doc.doc_id])[doc.doc_id][0].text == "node"
    assert store.find_documents("nul\x00.txt") == [] and store.find_documents("nul.txt") == [got]
    store.record_failure(ROOT, "bad.pdf", "cannot read \x00 here")
    assert store.failures()[0]["error"] == "cannot read  here"
    store.clear_failure(ROOT, "bad.pdf")
    assert store.failures() == []
    assert [c["model"] for c in store.calls(store.runs()[0]["id"])] == ["model"]


def test_runs_and_calls_without_secrets(store: Store) -> None:
    settings_in = {
        "model": "m",
        "api_key": "sk-123",
        "OPENAI_API_KEY": "sk-456",
        "apikey": "sk-789",
        "llm": {"base_url": "http://x", "Authorization": "Bearer y", "client_secret": "z", "password": "p"},
        "access_token": "t",
        "max_tokens": 512,
        "prompt_tokens_limit": 4,
        "path": Path("/tmp/x"),
    }
    run_id = store.start_run("build", settings_in)
    store.record_call(run_id, "summary", "m", 100, 20, 1.5, True)
    store.record_call(run_id, "summary", "m", 50, 0, 0.2, False)
    store.finish_run(run_id, "partial", {"seconds": 3.0}, {"added": 2, "failed": 1})
    second = store.start_run("ask", {})
    store.finish_run(second, "ok", {"llm_calls": 7, "prompt_tokens": 1, "completion_tokens": 2}, {})

    runs = store.runs()
    assert [r["id"] for r in runs] == [second, run_id]
    build = runs[1]
    assert build["kind"] == "build" and build["status"] == "partial" and build["finished_at"]
    assert build["settings"] == {
        "model": "m",
        "llm": {"base_url": "http://x"},
        "max_tokens": 512,
        "prompt_tokens_limit": 4,
        "path": "/tmp/x",
    }
    assert (build["llm_calls"], build["prompt_tokens"], build["completion_tokens"]) == (2, 150, 20)
    assert build["documents"] == {"added": 2, "failed": 1}
    assert (runs[0]["llm_calls"], runs[0]["prompt_tokens"], runs[0]["completion_tokens"]) == (7, 1, 2)
    assert [c["ok"] for c in store.calls(run_id)] == [True, False]
    assert store.runs(limit=1)[0]["id"] == second
    raw = store_path_bytes(store)
    for secret in (b"sk-123", b"sk-456", b"sk-789", b"Bearer y"):
        assert secret not in raw
    with pytest.raises(KeyError):
        store.finish_run(9999, "ok", {}, {})


def store_path_bytes(store: Store) -> bytes:
    if not isinstance(store, Store):
        # PostgreSQL: every row of every docsum table, as text.
        tables = [
            r[0] for r in store.conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'docsum'").fetchall()
        ]
        rows = [r[0] for t in tables for r in store.conn.execute(f"SELECT t::text FROM docsum.{t} t").fetchall()]
        return "\n".join(rows).encode("utf-8")
    # Committed data may still sit in the WAL; look at both files.
    wal = Path(str(store.path) + "-wal")
    return store.path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def test_meta_round_trip(store: Store) -> None:
    assert store.get_meta("embedding_model") is None
    assert store.get_meta("embedding_model", "dflt") == "dflt"
    store.set_meta("embedding_model", "emb-1")
    store.set_meta("chunk", {"size": 512, "overlap": 64})
    store.set_meta("embedding_model", "emb-2")
    assert store.get_meta("embedding_model") == "emb-2"
    assert store.get_meta("chunk") == {"size": 512, "overlap": 64}


def test_integrity_ok(store: Store) -> None:
    store.put_document(make_doc("a.txt"), [])
    assert store.integrity_ok()


# ---------------------------------------------------------------- concurrency


def test_reader_lists_while_writer_holds_a_transaction(store_path: Path) -> None:
    with Store.open(store_path) as s:
        s.put_document(make_doc("committed.txt"), [])
    writer = sqlite3.connect(store_path, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("DELETE FROM documents")
        writer.execute("UPDATE meta SET value = 'x'")
        started = time.monotonic()
        for kwargs in ({}, {"create": False}, {"readonly": True}):
            with Store.open(store_path, **kwargs) as reader:
                assert [d.path for d in reader.list_documents()] == ["committed.txt"]
                assert reader.get_document("committed.txt") is not None
        assert time.monotonic() - started < 5, "readers must not wait for the writer"
        writer.execute("COMMIT")
    finally:
        writer.close()
    with Store.open(store_path) as reader:
        assert reader.list_documents() == []


@pytest.mark.process
def test_reader_in_other_process_while_store_writes(store_path: Path) -> None:
    with Store.open(store_path) as s:
        s.put_document(make_doc("a.txt"), [])
        s.conn.execute("BEGIN IMMEDIATE")
        s.conn.execute("DELETE FROM documents")
        proc = run_py(
            """
            import sys
            from pathlib import Path
            from docsum.store.sqlite import Store
            with Store.open(Path(sys.argv[1]), create=False) as s:
                print(",".join(d.path for d in s.list_documents()))
            """,
            str(store_path),
        )
        out, err = proc.communicate(timeout=30)
        s.conn.execute("ROLLBACK")
    assert proc.returncode == 0, err
    assert out.strip() == "a.txt"


# ---------------------------------------------------------------- build lock

TRY_LOCK = """
import sys
from pathlib import Path
from docsum.errors import StoreLockedError
from docsum.store.lock import BuildLock
try:
    BuildLock(Path(sys.argv[1]), wait_seconds=float(sys.argv[2])).acquire()
except StoreLockedError as exc:
    print(exc)
    sys.exit(int(exc.exit_code))
print("acquired")
"""

HOLD_LOCK = """
import sys
from pathlib import Path
from docsum.store.lock import BuildLock
lock = BuildLock(Path(sys.argv[1]))
lock.acquire()
print("held", flush=True)
sys.stdin.readline()          # release when told
lock.release()
print("released", flush=True)
sys.stdin.readline()          # stay alive: the release, not our exit, freed it
"""


@pytest.mark.process
def test_second_lock_from_subprocess_is_refused(store_path: Path) -> None:
    assert StoreLockedError.exit_code == ExitCode.LOCKED == 4
    with BuildLock(store_path) as lock:
        info = json.loads(lock.path.read_text())
        assert info["pid"] == os.getpid() and set(info) == {"pid", "host", "started_at", "argv0"}
        proc = run_py(TRY_LOCK, str(store_path), "0")
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 4, err
        assert f"store {store_path} is locked by a build running as pid {os.getpid()} on {info['host']}" in out
        assert "try --wait SECONDS" in out
        # Also within one process: flock conflicts between separate open()s.
        with pytest.raises(StoreLockedError):
            BuildLock(store_path).acquire()
    proc = run_py(TRY_LOCK, str(store_path), "0")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out.strip() == "acquired", err


@pytest.mark.process
def test_wait_seconds_acquires_after_holder_releases(store_path: Path) -> None:
    holder = run_py(HOLD_LOCK, str(store_path))
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreLockedError, match=f"pid {holder.pid} "):
            BuildLock(store_path, wait_seconds=0.3).acquire()

        def release() -> None:
            assert holder.stdin is not None
            holder.stdin.write("go\n")
            holder.stdin.flush()

        timer = threading.Timer(0.5, release)
        started = time.monotonic()
        timer.start()
        lock = BuildLock(store_path, wait_seconds=20)
        lock.acquire()
        waited = time.monotonic() - started
        timer.join()
        assert 0.3 < waited < 15
        assert holder.stdout.readline().strip() == "released"
        assert holder.poll() is None  # still alive: it was the release
        assert json.loads(lock.path.read_text())["pid"] == os.getpid()
        lock.release()
    finally:
        holder.kill()
        holder.communicate(timeout=30)


@pytest.mark.process
def test_lock_of_killed_holder_is_taken(store_path: Path) -> None:
    holder = run_py(HOLD_LOCK, str(store_path))
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreLockedError, match=f"pid {holder.pid} "):
            BuildLock(store_path).acquire()
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.communicate(timeout=30)
    assert holder.returncode == -signal.SIGKILL
    lock_file = store_path.with_name(store_path.name + ".lock")
    assert json.loads(lock_file.read_text())["pid"] == holder.pid  # stale info left behind
    with BuildLock(store_path) as lock:
        assert json.loads(lock.path.read_text())["pid"] == os.getpid()
    assert lock_file.read_text() == ""  # released: no stale holder info


def test_lock_is_reentrant_per_object_and_release_idempotent(tmp_path: Path) -> None:
    lock = BuildLock(tmp_path / "s.sqlite")
    assert lock.path == tmp_path / "s.sqlite.lock"
    lock.acquire()
    lock.acquire()
    assert lock.held
    lock.release()
    lock.release()
    assert not lock.held
