"""Stores written by an older docsum are migrated on open, data intact; the
commands that only read (ask, summaries, show) work on them straight away.

(A store from a newer docsum is refused untouched: tests/test_store.py and
tests/test_build.py.)
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import NOBODY, SAMPLE_DOCS, run_cli, run_cli_as_nobody, run_python_as_nobody

from docsum.errors import StoreVersionError
from docsum.store import sqlite_schema
from docsum.store.sqlite import Store
from docsum.store.sqlite_schema import MIGRATIONS, split_statements

LIST_QUERY = "SELECT doc_id FROM documents ORDER BY path, root"
# Migration 1 as docsum released it, before the tables were declared once for both stores.
V1_SCRIPT = Path(__file__).parent / "data" / "sqlite_store_v1.sql"


def schema(conn: sqlite3.Connection) -> set[tuple[str, str, str]]:
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchall()
    return {(t, n, " ".join((sql or "").split())) for t, n, sql in rows}


def v1_schema() -> set[tuple[str, str, str]]:
    conn = sqlite3.connect(":memory:")
    for statement in split_statements(MIGRATIONS[0]):
        conn.execute(statement)
    try:
        return schema(conn)
    finally:
        conn.close()


def contents(store: Path) -> dict[str, Any]:
    conn = sqlite3.connect(store)
    try:
        return {
            table: conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
            for table in ("documents", "nodes", "failures", "runs", "calls", "meta")
        }
    finally:
        conn.close()


def downgrade_to_v3(conn: sqlite3.Connection) -> None:
    """Undo migration 4 by hand (inside the caller's transaction)."""
    conn.execute("ALTER TABLE documents DROP COLUMN page_origins")


def downgrade_to_v2(conn: sqlite3.Connection) -> None:
    """Undo migration 3 by hand (inside the caller's transaction)."""
    for trigger in ("documents_vector_insert", "documents_vector_update", "documents_vector_delete"):
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute("DROP TABLE vector_log")
    conn.execute("DELETE FROM sqlite_sequence WHERE name = 'vector_log'")
    conn.execute("DELETE FROM meta WHERE key = 'store_id'")


def downgrade_to_v1(store: Path) -> None:
    """Undo migrations 4, 3 and 2 by hand, as if a v1 docsum had written the store."""
    conn = sqlite3.connect(store, isolation_level=None)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 4
        conn.execute("BEGIN")
        downgrade_to_v3(conn)
        downgrade_to_v2(conn)
        conn.execute("DROP INDEX documents_path_root")
        conn.execute("CREATE INDEX documents_path ON documents(path)")
        conn.execute("PRAGMA user_version = 1")
        conn.execute("COMMIT")
        assert schema(conn) == v1_schema()  # exactly what a v1 docsum creates
    finally:
        conn.close()


def structure(conn: sqlite3.Connection) -> dict[str, Any]:
    """Every table's columns, keys, foreign keys and indexes as SQLite reports
    them: what the CREATE statements mean, whatever their wording."""
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    found: dict[str, Any] = {}
    for table in tables:
        indexes = conn.execute(f"PRAGMA index_list({table})").fetchall()
        found[table] = {
            "columns": conn.execute(f"PRAGMA table_xinfo({table})").fetchall(),
            "kind": conn.execute("SELECT type, wr, strict FROM pragma_table_list WHERE name = ?", (table,)).fetchall(),
            "foreign keys": conn.execute(f"PRAGMA foreign_key_list({table})").fetchall(),
            "indexes": sorted(
                (name, unique, origin, partial, conn.execute(f"PRAGMA index_xinfo({name})").fetchall())
                for _seq, name, unique, origin, partial in indexes
            ),
        }
    return found


def test_the_first_migration_makes_the_tables_docsum_v1_made(tmp_path: Path) -> None:
    """Migration 1 is written from the table declarations (docsum.store.tables)
    since they were shared with PostgreSQL; the stores in the wild were made by
    the literal script docsum released (tests/data/sqlite_store_v1.sql). Both
    must make the same tables, column for column, or a new store and an
    upgraded old one would differ."""
    released, declared = sqlite3.connect(":memory:"), sqlite3.connect(":memory:")
    try:
        for statement in split_statements(V1_SCRIPT.read_text(encoding="utf-8")):
            released.execute(statement)
        for statement in split_statements(MIGRATIONS[0]):
            declared.execute(statement)
        assert structure(declared) == structure(released)
        assert set(structure(declared)) == {
            "documents",
            "nodes",
            "failures",
            "runs",
            "calls",
            "meta",
            "sqlite_sequence",
        }
    finally:
        released.close()
        declared.close()


def test_migration_2_serves_the_listing_order(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.sqlite") as s:
        indexes = {r[0] for r in s.conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "documents_path_root" in indexes and "documents_path" not in indexes
        plan = " | ".join(r[3] for r in s.conn.execute("EXPLAIN QUERY PLAN " + LIST_QUERY))
        assert "documents_path_root" in plan and "TEMP B-TREE" not in plan, plan
        plan = " | ".join(
            r[3] for r in s.conn.execute("EXPLAIN QUERY PLAN SELECT doc_id FROM documents WHERE path = ?", ("x",))
        )
        assert "USING" in plan and "INDEX" in plan, plan  # still an index search, not a scan


def test_migration_3_logs_every_vector_change(tmp_path: Path) -> None:
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    shutil.copytree(SAMPLE_DOCS, folder)
    assert run_cli("build", folder, "--store", store, "--llm", "extractive").code == 0
    conn = sqlite3.connect(store, isolation_level=None)
    try:
        # A v2 store with documents: the migration logs each one once.
        conn.execute("BEGIN")
        downgrade_to_v3(conn)
        downgrade_to_v2(conn)
        conn.execute("PRAGMA user_version = 2")
        conn.execute("COMMIT")
    finally:
        conn.close()
    with Store.open(store) as s:
        ids = [d.doc_id for d in s.list_documents()]
        changes = s.vector_changes(0)
        assert changes.count == len(ids) and changes.generation >= len(ids) and len(changes.store_id) == 32
        assert sorted(c.doc_id for batch in changes.batches for c in batch) == sorted(ids)
        first = changes.generation
        s.touch_document(ids[0], 1, 2)  # a new stat is not a vector change
        assert s.vector_changes(first).count == 0
        s.update_embedding(ids[1], np.ones(4, dtype=np.float32), "m")
        s.remove_document(ids[2])
        later = s.vector_changes(first)
        found = {c.doc_id: c for batch in later.batches for c in batch}
        assert later.count == 2 and later.generation == first + 2
        assert found[ids[1]].vector is not None and found[ids[1]].model == "m" and not found[ids[1]].removed
        assert found[ids[2]].removed and found[ids[2]].vector is None
        # A generation from the future (a store restored from an older copy) reports everything.
        assert s.vector_changes(later.generation + 100).count == len(ids)  # 7 documents and 1 removal


def test_migration_4_is_the_latest_and_gives_stored_documents_no_page_origins(tmp_path: Path) -> None:
    # If a later migration is added, extend the tests below to start from v4 too.
    assert len(MIGRATIONS) == 4
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    shutil.copytree(SAMPLE_DOCS, folder)
    assert run_cli("build", folder, "--store", store, "--llm", "extractive").code == 0
    conn = sqlite3.connect(store, isolation_level=None)
    try:
        conn.execute("BEGIN")
        downgrade_to_v3(conn)
        conn.execute("PRAGMA user_version = 3")
        conn.execute("COMMIT")
        before = conn.execute("SELECT doc_id, summary FROM documents ORDER BY doc_id").fetchall()
    finally:
        conn.close()
    with Store.open(store) as s:
        docs = sorted(s.list_documents(), key=lambda d: d.doc_id)
        assert [(d.doc_id, d.summary) for d in docs] == before
        assert {d.page_origins for d in docs} == {""}  # not known for what was stored before v4


def test_v1_store_from_a_real_build_migrates_on_first_ask_with_data_intact(tmp_path: Path) -> None:
    folder, store = tmp_path / "docs", tmp_path / "store" / "s.sqlite"
    shutil.copytree(SAMPLE_DOCS, folder)
    (folder / "empty.md").write_text("  \n")  # a recorded failure must survive too
    assert run_cli("build", folder, "--store", store, "--llm", "extractive").code == 3
    downgrade_to_v1(store)
    before = contents(store)
    assert before["documents"] and before["nodes"] and before["failures"] and before["runs"]

    # The first command after the upgrade only reads: it must work, not ask for a build.
    result = run_cli(
        "ask", "When did the library reopen after the renovation?", "--store", store, "--llm", "extractive", "--json"
    )
    assert result.code == 0, result
    assert "Traceback" not in result.stderr and "error" not in result.stderr
    data = result.json()
    assert data["status"] == "ok" and data["documents"][0]["path"] == "library_renovation_fact_sheet.pdf"

    with Store.open(store, create=False, readonly=True) as s:
        assert s.schema_version == len(MIGRATIONS)
        assert s.integrity_ok()
    conn = sqlite3.connect(store)
    try:
        assert schema(conn) == schema_of_a_new_store(tmp_path)
    finally:
        conn.close()
    after = contents(store)
    # Nothing but the index and the vector log changed, the store got an
    # identity and each document an empty page_origins column (v4, the last).
    assert [m for m in after.pop("meta") if m[0] != "store_id"] == before.pop("meta")
    assert {row[-1] for row in after["documents"]} == {""}
    after["documents"] = [row[:-1] for row in after["documents"]]
    assert after == before

    listed = run_cli("summaries", "--store", store, "--json")
    assert listed.code == 0, listed
    assert sorted(d["path"] for d in listed.json()) == sorted(p.name for p in SAMPLE_DOCS.iterdir())
    shown = run_cli("show", "library_renovation_fact_sheet.pdf", "--store", store, "--json")
    assert shown.code == 0 and shown.json()["nodes"] > 0
    # And the next build sees every document unchanged: nothing re-summarized.
    again = run_cli("build", folder, "--store", store, "--llm", "extractive", "--json")
    assert again.code == 3, again  # empty.md still fails, now for the second run in a row
    report = again.json()
    assert report["documents"]["unchanged"] == len(before["documents"]) and report["usage"]["llm_calls"] == 0
    assert report["failures"] == [{"path": "empty.md", "error": report["failures"][0]["error"], "attempts": 2}]


def schema_of_a_new_store(tmp_path: Path) -> set[tuple[str, str, str]]:
    with Store.open(tmp_path / "fresh.sqlite") as s:
        return schema(s.conn)


def test_hand_made_v1_store_migrates_with_its_rows(tmp_path: Path) -> None:
    """A v1 store written row by row, as a v1 build writes one."""
    path = tmp_path / "v1.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in split_statements(MIGRATIONS[0]):
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    root = str(tmp_path / "docs")
    conn.execute(
        "INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            "abc123def456",
            "notes/ferry.txt",
            root,
            120,
            1_700_000_000_000_000_000,
            "0" * 64,
            "Ferry notes",
            "text",
            30,
            None,
            "split-fp",
            "summary-fp",
            "The ferry crosses the river every hour.\nMore detail.",
            "extractive",
            None,
            None,
            "2024-01-01T00:00:00+00:00",
            "2024-01-01T00:00:00+00:00",
        ),
    )
    conn.execute(
        "INSERT INTO nodes VALUES (?, ?, ?, ?, ?, ?, ?)",
        ("abc123def456", 0, "The ferry crosses the river every hour, from dawn to dusk.", 0, 58, "[]", 14),
    )
    conn.close()

    result = run_cli("summaries", "--store", path, "--json")
    assert result.code == 0, result
    assert [(d["doc_id"], d["path"], d["summary"]) for d in result.json()] == [
        ("abc123def456", "notes/ferry.txt", "The ferry crosses the river every hour.\nMore detail.")
    ]
    result = run_cli(
        "ask", "How often does the ferry cross the river?", "--store", path, "--llm", "extractive", "--json"
    )
    assert result.code == 0, result
    data = result.json()
    assert data["sources"][0]["text"] == "The ferry crosses the river every hour, from dawn to dusk."
    with Store.open(path, create=False, readonly=True) as s:
        assert s.schema_version == len(MIGRATIONS)
        assert s.get_document("ferry.txt") is not None


def test_v1_store_that_cannot_be_written_is_a_clear_error(shared_dir: Path) -> None:
    """Run as the unprivileged user: root writes a read-only file."""
    folder = shared_dir / "stores"
    folder.mkdir()
    store = folder / "s.sqlite"
    with Store.open(store) as s:
        s.set_meta("k", 1)
    conn = sqlite3.connect(store)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    downgrade_to_v1(store)
    home = shared_dir / "home"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    store.chmod(0o444)
    folder.chmod(0o555)
    opened = run_python_as_nobody(
        "import sys\n"
        "from docsum.errors import StoreVersionError\n"
        "from docsum.store.sqlite import Store\n"
        "try:\n"
        "    Store.open(sys.argv[1], create=False, readonly=True)\n"
        "except StoreVersionError as e:\n"
        "    print('StoreVersionError', e)\n",
        store,
    )
    assert "StoreVersionError" in opened.stdout and "cannot be upgraded here" in opened.stdout, opened
    result = run_cli_as_nobody(home, "summaries", "--store", store)
    assert result.code == 1 and "docsum build" in result.stderr and result.stderr.count("\n") == 1, result
    with sqlite3.connect(store) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == 1


def test_v1_store_that_cannot_be_upgraded_now_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs as root too: a writer that holds the store past the busy timeout
    makes the upgrade fail the way a read-only file does."""
    store = tmp_path / "s.sqlite"
    with Store.open(store) as s:
        s.set_meta("k", 1)
    downgrade_to_v1(store)
    monkeypatch.setattr(sqlite_schema, "BUSY_TIMEOUT_MS", 100)
    holder = sqlite3.connect(store, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(
            StoreVersionError, match=r"schema v1 is older than v4 and cannot be upgraded here \(database is locked\)"
        ):
            Store.open(store, create=False, readonly=True)
        result = run_cli("summaries", "--store", store)
        assert result.code == 1, result
        assert (
            result.stderr.count("\n") == 1
            and "cannot be upgraded here" in result.stderr
            and "Traceback" not in result.stderr
        )
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with Store.open(store, create=False, readonly=True) as s:  # once the writer is gone, it upgrades
        assert s.schema_version == len(MIGRATIONS) and s.get_meta("k") == 1


def test_library_readers_migrate_too(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    with Store.open(store) as s:
        s.set_meta("answer", {"n": 42})
    downgrade_to_v1(store)
    with Store.open(store, create=False, readonly=True) as s:  # docsum.query.ask, eval and the index API read like this
        assert s.schema_version == len(MIGRATIONS) and s.readonly
        assert s.get_meta("answer") == {"n": 42}
    assert json.loads(sqlite3.connect(store).execute("SELECT value FROM meta").fetchone()[0]) == {"n": 42}
