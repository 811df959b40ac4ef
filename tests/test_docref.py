"""`docsum show` and `docsum remove` take what a person would type: the path
as typed from the current folder, the stored path, or a unique id prefix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import run_cli_parts as run


@pytest.fixture
def two_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for folder in ("data/pdfs", "data/notes"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "notes.txt").write_text(f"Notes kept in {folder}. The ferry sails hourly.\n")
    (tmp_path / "data/pdfs/x.txt").write_text("The only x document. It describes the ferry timetable.\n")
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "store.sqlite"
    for folder in ("data/pdfs", "data/notes"):
        assert run("build", folder, "--store", store)[0] == 0
    return store


def show(store: Path, ref: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = run("show", ref, "--store", store, "--json")
    return code, (json.loads(out) if code == 0 else {}), err


def test_path_as_typed_from_the_current_folder(two_folders: Path, tmp_path: Path) -> None:
    # Before: "no document" (only the stored path "x.txt" was known).
    code, data, err = show(two_folders, "data/pdfs/x.txt")
    assert code == 0, err
    assert data["path"] == "x.txt" and data["root"] == str(tmp_path / "data/pdfs")
    assert show(two_folders, "./data/notes/notes.txt")[1]["root"] == str(tmp_path / "data/notes")


def test_stored_path_and_unique_id_prefix(two_folders: Path) -> None:
    code, data, err = show(two_folders, "x.txt")
    assert code == 0, err
    code, by_prefix, err = show(two_folders, data["doc_id"][:6])
    assert code == 0 and by_prefix["doc_id"] == data["doc_id"]


def test_an_ambiguous_name_lists_the_candidates_with_their_folders(two_folders: Path, tmp_path: Path) -> None:
    code, out, err = run("show", "notes.txt", "--store", two_folders)
    assert code == 2 and "matches 2 documents" in err and str(tmp_path / "data/pdfs") in err


def test_remove_takes_the_typed_path(two_folders: Path) -> None:
    code, out, err = run("remove", "data/notes/notes.txt", "--store", two_folders, "--json")
    assert code == 0, err
    assert json.loads(out)["removed"]["path"] == "notes.txt"
    # Now the stored path is no longer ambiguous.
    assert show(two_folders, "notes.txt")[0] == 0
