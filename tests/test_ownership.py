"""Files docsum does not own are never modified, two stores never share a
lock, and a store in a folder the reader cannot write to can still be read
(issue 15, class 3). Permission cases run docsum as uid 65534, since the
suite runs as root, for whom every permission check passes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from helpers import SAMPLE_DOCS, run_cli, run_cli_as_nobody

from docsum.errors import DocsumError
from docsum.store.lock import BuildLock
from docsum.store.sqlite import Store


def _foreign_database(path: Path, user_version: int = 0) -> bytes:
    """Another application's SQLite file; returns its bytes for comparison."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE contacts (name TEXT, phone TEXT)")
    conn.execute("INSERT INTO contacts VALUES ('Ada', '555-0100')")
    conn.execute(f"PRAGMA user_version = {user_version:d}")
    conn.commit()
    conn.close()
    return path.read_bytes()


def _leftovers(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name != path.name and p.name.startswith(path.name))


@pytest.mark.parametrize("user_version", [0, 1, 7])
def test_another_applications_sqlite_file_is_never_converted(tmp_path: Path, user_version: int) -> None:
    foreign = tmp_path / "contacts.db"
    before = _foreign_database(foreign, user_version)
    for readonly in (True, False):
        with pytest.raises(DocsumError, match="not a docsum store"):
            Store.open(foreign, readonly=readonly)
        assert foreign.read_bytes() == before

    for args in (["ask", "who?"], ["summaries"], ["show", "x"], ["remove", "x"], ["build", str(SAMPLE_DOCS)]):
        result = run_cli(*args, "--store", foreign)
        assert result.code == 1, (args, result)
        assert "not a docsum store" in result.stderr and str(foreign) in result.stderr
        assert foreign.read_bytes() == before, args
        assert _leftovers(foreign) == [], args  # no lock, -wal or -shm file beside it
    with sqlite3.connect(foreign) as conn:
        assert conn.execute("SELECT name FROM contacts").fetchall() == [("Ada",)]


def test_a_refused_store_file_leaves_no_lock_file_behind(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# not a store\n", encoding="utf-8")
    result = run_cli("build", SAMPLE_DOCS, "--store", readme)
    assert result.code == 1, result
    assert "not a docsum store" in result.stderr
    assert readme.read_text(encoding="utf-8") == "# not a store\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "docsum_home"]


def test_two_stores_with_the_same_stem_do_not_share_a_lock(tmp_path: Path) -> None:
    with BuildLock(tmp_path / "notes.db") as first, BuildLock(tmp_path / "notes.sqlite") as second:
        assert first.held and second.held
        assert first.path != second.path


def test_a_reader_never_creates_a_store_in_an_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    with pytest.raises(FileNotFoundError):
        Store.open(empty, readonly=True)
    assert empty.read_bytes() == b""
    result = run_cli("ask", "anything?", "--store", empty)
    assert result.code == 5, result
    assert empty.read_bytes() == b"" and _leftovers(empty) == []


def test_a_store_in_a_read_only_folder_can_be_read(shared_dir: Path) -> None:
    store_dir = shared_dir / "stores"
    store = store_dir / "docs.sqlite"
    built = run_cli("build", SAMPLE_DOCS, "--store", store)
    assert built.code == 0, built
    # The WAL was checkpointed away at close; the vector file and the BM25
    # index the build made stay beside the store.
    assert _leftovers(store) == ["docs.sqlite.bm25", "docs.sqlite.lock", "docs.sqlite.vectors"]
    # Readable by others, writable by nobody but root: as a shared, published store.
    store.chmod(0o644)
    store_dir.chmod(0o555)
    home = shared_dir / "home"
    home.mkdir(mode=0o777)
    home.chmod(0o777)

    listed = run_cli_as_nobody(home, "summaries", "--store", store)
    assert listed.code == 0, listed
    assert len(listed.stdout.splitlines()) == len(list(SAMPLE_DOCS.iterdir()))
    asked = run_cli_as_nobody(
        home, "ask", "How much did Brindle & Daughter pay for the oven?", "--store", store, "--json"
    )
    assert asked.code == 0, asked
    assert "error" not in asked.stderr
    assert _leftovers(store) == ["docs.sqlite.bm25", "docs.sqlite.lock", "docs.sqlite.vectors"]
