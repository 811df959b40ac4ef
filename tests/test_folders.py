"""Real folders through the CLI: nothing is pruned that the build could not
see, an emptied folder is not taken for deleted files, odd file names are one
file's business, exclusions, and what was skipped is said.

The LLM is the offline engine throughout: these tests are about files."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from fakeopenai import FakeOpenAI, Reply
from helpers import (
    NOBODY,
    CliResult,
    llm_args,
    make_docs,
    run_cli,
    run_cli_as_nobody,
    stored_paths,
    write_file,
)

BAD_NAME = b"bad\xff\xfename.txt"


def build(store: Path, *args: str | Path) -> CliResult:
    return run_cli("build", *args, "--store", store, "--json")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store" / "index.sqlite"


# --------------------------------------------------------------------------- empty folders


def test_an_emptied_folder_removes_nothing_without_prune_empty(tmp_path: Path, store: Path) -> None:
    folder = tmp_path / "share"
    files = make_docs(folder, 4)
    assert build(store, folder).json()["documents"]["added"] == 4
    for path in files:
        path.unlink()  # what an unmounted share looks like

    result = run_cli("build", folder, "--store", store)
    assert result.code == 3, result
    assert stored_paths(store) == {p.name for p in files}
    lines = [line for line in result.stderr.splitlines() if "no document found" in line]
    assert (
        len(lines) == 1
        and str(folder.resolve()) in lines[0]
        and "--prune-empty" in lines[0]
        and "holds 4 from it" in lines[0]
    )
    assert "0 removed" in result.stdout

    data = build(store, folder).json()
    assert data["documents"]["removed"] == 0 and [f["path"] for f in data["failures"]] == [str(folder.resolve())]

    pruned = build(store, folder, "--prune-empty")
    assert pruned.code == 0, pruned
    assert pruned.json()["documents"]["removed"] == 4 and stored_paths(store) == set()


def test_an_emptied_subfolder_keeps_its_documents_and_the_rest_builds(tmp_path: Path, store: Path) -> None:
    folder = tmp_path / "docs"
    make_docs(folder, 2)
    mounted = make_docs(folder / "mnt", 2, start=2)
    assert build(store, folder).json()["documents"]["added"] == 4
    for path in mounted:
        path.unlink()
    make_docs(folder, 1, start=4)

    data = build(store, folder).json()
    assert data["documents"]["added"] == 1 and data["documents"]["removed"] == 0
    assert [f["path"] for f in data["failures"]] == [str((folder / "mnt").resolve())]
    assert {f"mnt/{p.name}" for p in mounted} <= stored_paths(store)


def test_excluding_everything_is_not_a_mass_deletion(tmp_path: Path, store: Path) -> None:
    folder = tmp_path / "docs"
    make_docs(folder, 3)
    assert build(store, folder).code == 0
    result = build(store, folder, "--exclude", "*")
    assert result.code == 3, result
    assert result.json()["documents"]["removed"] == 0 and len(stored_paths(store)) == 3
    assert build(store, folder, "--exclude", "*", "--prune-empty").json()["documents"]["removed"] == 3


def test_a_normal_reconcile_still_prunes_vanished_files(tmp_path: Path, store: Path) -> None:
    folder = tmp_path / "docs"
    files = make_docs(folder, 3)
    make_docs(folder / "sub", 1, start=3)
    assert build(store, folder).code == 0
    files[0].unlink()
    shutil.rmtree(folder / "sub")  # a folder deleted outright is gone, not empty
    result = build(store, folder)
    assert result.code == 0, result
    assert result.json()["documents"]["removed"] == 2 and result.json()["failures"] == []


def test_a_followed_symlink_whose_target_vanished_is_not_pruned(tmp_path: Path, store: Path) -> None:
    folder = tmp_path / "docs"
    make_docs(folder, 1)
    outside = tmp_path / "elsewhere" / "reports"
    make_docs(outside, 2, start=1)
    (folder / "reports").symlink_to(outside, target_is_directory=True)
    assert build(store, folder, "--follow-symlinks").json()["documents"]["added"] == 3

    shutil.rmtree(tmp_path / "elsewhere")
    result = build(store, folder, "--follow-symlinks")
    data = result.json()
    assert data["documents"]["removed"] == 0, result
    assert len(stored_paths(store)) == 3
    assert any("reports" in s["path"] and "broken symlink" in s["reason"] for s in data["skipped_files"])


# --------------------------------------------------------------------------- unreadable parts, as a user


def test_an_unreadable_subfolder_is_reported_and_nothing_in_it_is_pruned(shared_dir: Path) -> None:
    folder = shared_dir / "d"
    write_file(folder / "a.txt", "Alpha notes about the harbour.\n")
    write_file(folder / "sub" / "b.txt", "Bravo notes about the bridge.\n")
    write_file(folder / "sub" / "c.txt", "Charlie notes about the canal.\n")
    home = shared_dir / "home"
    home.mkdir()
    for path in shared_dir.rglob("*"):
        os.chown(path, NOBODY, NOBODY)
    store = home / "s.sqlite"
    everything = {"a.txt", "sub/b.txt", "sub/c.txt"}

    first = run_cli_as_nobody(home, "build", folder, "--store", store)
    assert first.code == 0, first
    (folder / "sub").chmod(0)
    second = run_cli_as_nobody(home, "build", folder, "--store", store)
    assert second.code == 3, second
    assert "sub: cannot read directory: permission denied" in second.stderr
    assert "removed" not in second.stderr and "0 removed" in second.stdout
    assert stored_paths(store) == everything

    # An unreadable root is the same: reported, nothing removed.
    (folder / "sub").chmod(0o755)
    folder.chmod(0)
    third = run_cli_as_nobody(home, "build", folder, "--store", store)
    folder.chmod(0o755)
    assert third.code == 3, third
    assert "0 removed" in third.stdout and stored_paths(store) == everything

    # Readable again: a normal build, nothing to do.
    fourth = run_cli_as_nobody(home, "build", folder, "--store", store)
    assert fourth.code == 0 and "3 unchanged" in fourth.stdout, fourth


# --------------------------------------------------------------------------- names that are not UTF-8


def test_a_file_name_that_is_not_utf8_is_built_under_a_printable_name(tmp_path: Path, store: Path) -> None:
    folder = tmp_path / "docs"
    make_docs(folder, 2)
    (Path(os.fsdecode(folder)) / os.fsdecode(BAD_NAME)).write_text("Notes on the lighthouse keeper's log.\n")
    (Path(os.fsdecode(folder)) / os.fsdecode(b"junk\xff.txt")).write_bytes(b"\x00\x01\x02" * 100)
    # No line with a letter in it: the title falls back to the file's name.
    (Path(os.fsdecode(folder)) / os.fsdecode(b"rule\xfe.txt")).write_text("--- *** ---\n")

    result = run_cli("build", folder, "--store", store)
    assert result.code == 3, result  # the binary one failed, alone
    assert "surrogates" not in result.stderr + result.stdout
    assert "docsum: failed junk\\xff.txt: binary content" in result.stderr
    assert "bad\\xff\\xfename.txt" in stored_paths(store)
    assert len(stored_paths(store)) == 4

    data = build(store, folder).json()  # JSON output holds the same printable names
    assert data["documents"]["unchanged"] == 4
    assert [f["path"] for f in data["failures"]] == ["junk\\xff.txt"]
    conn = sqlite3.connect(store)
    (text,) = conn.execute("SELECT summary FROM documents WHERE path = ?", ("bad\\xff\\xfename.txt",)).fetchone()
    conn.close()
    assert "lighthouse" in text
    conn = sqlite3.connect(store)
    assert conn.execute("SELECT title FROM documents WHERE path = ?", ("rule\\xfe.txt",)).fetchone() == ("rule\\xfe",)
    conn.close()
    shown = run_cli("summaries", "--store", store)
    assert shown.code == 0 and "bad\\xff\\xfename.txt" in shown.stdout


# --------------------------------------------------------------------------- exclusions and skipped files


def test_exclusions_are_neither_read_nor_failures(tmp_path: Path, store: Path) -> None:
    folder = tmp_path / "docs"
    make_docs(folder, 2)
    write_file(folder / "scanned.pdf", b"%PDF-1.4 not really")  # can never be read
    assert build(store, folder).code == 3

    # The answer to "one file that can never be read makes every build exit 3".
    write_file(folder / ".docsumignore", "# scans we cannot read\nscanned.pdf\ndrafts/\n")
    make_docs(folder / "drafts", 1, start=2)
    write_file(folder / "notes" / "x.txt", "An excluded note on the ferry timetable.\n")
    result = build(store, folder, "--exclude", "notes/*.txt")
    assert result.code == 0, result
    data = result.json()
    assert data["failures"] == [] and data["documents"]["added"] == 0
    excluded = sorted(s["path"] for s in data["skipped_files"] if s["reason"] == "excluded")
    assert excluded == ["drafts/", "notes/x.txt", "scanned.pdf"]
    assert data["skipped"]["excluded"] == 3

    bad = build(store, folder, "--exclude", "[z-a]")
    assert bad.code == 2 and "--exclude" in bad.stderr


def test_skipped_files_are_counted_on_one_line_listed_with_v_and_in_json(tmp_path: Path, store: Path) -> None:
    folder = tmp_path / "docs"
    make_docs(folder, 1)
    write_file(folder / "a.xlsx", b"PK")
    write_file(folder / "b.xlsx", b"PK")
    write_file(folder / "c.gif", b"GIF89a")
    write_file(folder / ".secret.txt", "hidden")
    write_file(folder / "old.txt", "old")

    result = run_cli("build", folder, "--store", store, "--exclude", "old.txt")
    assert result.code == 0, result
    lines = [line for line in result.stderr.splitlines() if line.startswith("docsum: skipped")]
    assert lines == [
        "docsum: skipped 5 not read: 3 unsupported (.xlsx 2, .gif 1), 1 excluded (.txt 1), 1 hidden (.txt 1) (-v lists them)"
    ]
    assert "skipped" not in result.stdout

    verbose = run_cli("build", folder, "--store", store, "-v", "--exclude", "old.txt")
    assert "docsum: skipped a.xlsx (unsupported)" in verbose.stderr
    assert "docsum: skipped .secret.txt (hidden)" in verbose.stderr
    assert "docsum: skipped old.txt (excluded)" in verbose.stderr

    data = build(store, folder, "--exclude", "old.txt").json()
    assert sorted((s["path"], s["reason"]) for s in data["skipped_files"]) == [
        (".secret.txt", "hidden"),
        ("a.xlsx", "unsupported"),
        ("b.xlsx", "unsupported"),
        ("c.gif", "unsupported"),
        ("old.txt", "excluded"),
    ]


def test_a_summary_sqlite_cannot_hold_fails_that_document_alone(
    tmp_path: Path, store: Path, fake_llm: FakeOpenAI
) -> None:
    folder = tmp_path / "docs"
    make_docs(folder, 3)
    # JSON may carry a lone surrogate ("\ud800"); SQLite cannot store it.
    fake_llm.script(Reply(text="A summary with a lone \ud800 surrogate."))
    result = run_cli("build", folder, "--store", store, "--concurrency", "1", *llm_args(fake_llm))
    assert result.code == 3, result
    failed = [line for line in result.stderr.splitlines() if line.startswith("docsum: failed")]
    assert len(failed) == 1 and "cannot be stored: text with an invalid character" in failed[0], result
    assert len(stored_paths(store)) == 2
    again = run_cli("build", folder, "--store", store, *llm_args(fake_llm))  # retried: the server behaves now
    assert again.code == 0 and len(stored_paths(store)) == 3, again
