"""A store that lost its integrity fails in one line and heals: text a bit
flip left invalid UTF-8 (a node's text, a summary) is named by document, never
quoted, set aside, and rebuilt by the next build (docsum.store.damage); a
truncated vector file or BM25 index is rebuilt, not fatal."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from helpers import run_cli

SAMPLE_DOCS = Path(__file__).resolve().parents[1] / "sample_data" / "docs"
QUESTION = "How many loaves does the oven hold?"
TAIL = "PLANTED-DOCUMENT-WORDS"


@pytest.fixture
def built(tmp_path: Path, offline_sample_store: Path) -> tuple[Path, Path]:
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLE_DOCS, docs)
    store = tmp_path / "store.sqlite"
    assert run_cli("build", docs, "--store", store, "-q").code == 0
    return docs, store


def flip(store: Path, column: str) -> None:
    """Append a byte that is not UTF-8 (and some words) to the bakery's node text or summary."""
    with sqlite3.connect(store) as conn:
        (doc_id,) = conn.execute("SELECT doc_id FROM documents WHERE path LIKE 'brindle%'").fetchone()
        table = "nodes" if column == "text" else "documents"
        conn.execute(
            f"UPDATE {table} SET {column} = CAST(CAST({column} AS BLOB) || x'ff' || CAST(? AS BLOB) AS TEXT) "
            "WHERE doc_id = ?",
            (TAIL, doc_id),
        )


@pytest.mark.parametrize(("column", "command"), [("text", ["ask", QUESTION]), ("summary", ["summaries"])])
def test_damaged_text_is_named_in_one_line_and_rebuilt_by_the_next_build(
    built: tuple[Path, Path], column: str, command: list[str]
) -> None:
    docs, store = built
    flip(store, column)
    failed = run_cli(*command, "--store", store)
    assert failed.code == 1, failed
    errors = [line for line in failed.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "brindle_and_daughter_bakery.md" in errors[0] and "damaged" in errors[0]
    assert TAIL not in failed.stdout + failed.stderr and "Traceback" not in failed.stderr
    assert "Quarry Street" not in failed.stderr  # the document's own text is never quoted
    # Set aside by the first reader (and so left out of questions): damage it
    # again, as if for the first time, for the --json reader.
    flip(store, column)
    with sqlite3.connect(store) as conn:
        conn.execute("DELETE FROM meta WHERE key = 'set_aside'")
    as_json = run_cli(*command, "--store", store, "--json")
    assert as_json.code == 1 and "brindle_and_daughter_bakery.md" in as_json.json()["error"]["message"]
    assert TAIL not in as_json.stdout
    rebuilt = run_cli("build", docs, "--store", store, "--json")
    assert rebuilt.code == 0 and rebuilt.json()["documents"]["updated"] == 1, rebuilt
    again = run_cli(*command, "--store", store)
    assert again.code == 0 and "\ufffd" not in again.stdout
    with sqlite3.connect(store) as conn:
        stored = " ".join(
            r[0] for r in conn.execute(f"SELECT {column} FROM {'nodes' if column == 'text' else 'documents'}")
        )
    assert TAIL not in stored


def test_a_build_that_meets_damaged_text_rebuilds_it_at_once(built: tuple[Path, Path]) -> None:
    docs, store = built
    flip(store, "summary")
    # `summaries` with a writable store sets it aside too; the build then rebuilds it.
    rebuilt = run_cli("build", docs, "--store", store, "--json")
    # The build itself reads summaries only for what it rebuilds: it may see
    # nothing; after any reader has met the damage, it must rebuild.
    if rebuilt.json()["documents"]["updated"] == 0:
        assert run_cli("summaries", "--store", store).code == 1
        rebuilt = run_cli("build", docs, "--store", store, "--json")
    assert rebuilt.code == 0 and rebuilt.json()["documents"]["updated"] == 1
    assert run_cli("summaries", "--store", store).code == 0


@pytest.mark.parametrize(
    "damaged",
    ["store.sqlite.bm25/summaries/indices.npy", "store.sqlite.bm25/nodes/owners.npy", "store.sqlite.vectors"],
)
def test_a_truncated_index_or_vector_file_is_made_anew(built: tuple[Path, Path], damaged: str) -> None:
    docs, store = built
    ask = ("ask", QUESTION, "--store", store, "--retriever", "fused", "--json")
    first = run_cli(*ask)
    assert first.code == 0, first
    target = store.parent / damaged
    assert target.exists(), sorted(p.name for p in store.parent.iterdir())
    # A build that added one document: the next question updates the kept index from its files.
    (docs / "extra.txt").write_text("A note on the ferry timetable for the winter.\n", encoding="utf-8")
    assert run_cli("build", docs, "--store", store, "-q").code == 0
    with open(target, "r+b") as fh:
        fh.truncate(100)
    again = run_cli(*ask)
    assert again.code == 0, again
    assert [d["path"] for d in again.json()["documents"]] == [d["path"] for d in first.json()["documents"]]


def test_a_document_set_aside_is_left_out_of_answers_until_the_next_build(built: tuple[Path, Path]) -> None:
    """The first reader names the damage and sets the document aside; later
    questions must not quote its partly lost text (U+FFFD where bytes were
    lost) as if nothing happened: they leave it out, and say so."""
    docs, store = built
    flip(store, "text")
    assert run_cli("ask", QUESTION, "--store", store).code == 1  # named, set aside
    later = run_cli("ask", QUESTION, "--store", store, "--json")
    data = later.json()
    assert "\ufffd" not in later.stdout and TAIL not in later.stdout
    assert all("brindle" not in d["path"] for d in data["documents"]), data["documents"]
    assert any("brindle_and_daughter_bakery.md" in w and "damaged" in w for w in data["warnings"]), data
    plain = run_cli("ask", QUESTION, "--store", store)
    assert "brindle_and_daughter_bakery.md" in plain.stderr and "damaged" in plain.stderr, plain
    assert run_cli("build", docs, "--store", store, "--json").json()["documents"]["updated"] == 1
    healed = run_cli("ask", QUESTION, "--store", store, "--json")
    assert healed.code == 0 and not healed.json()["warnings"], healed
    assert any("brindle" in d["path"] for d in healed.json()["documents"])
