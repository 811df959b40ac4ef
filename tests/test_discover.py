"""File discovery: what a build picks up, skips and reports about a folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from docsum.discover import Discovery, FoundFile, discover
from docsum.formats import SUPPORTED_SUFFIXES
from docsum.load import load_file
from helpers import write_file as write


# --------------------------------------------------------------------------- discovery


def test_discover_sorts_counts_hidden_and_unsupported(tmp_path: Path) -> None:
    write(tmp_path / "b.txt", "b")
    write(tmp_path / "a.MD", "a")
    write(tmp_path / "sub" / "c.pdf", b"%PDF-1.4")  # never opened by discovery
    write(tmp_path / "sub" / "deeper" / "d.markdown", "d")
    write(tmp_path / ".hidden.txt", "h")
    write(tmp_path / ".git" / "config.txt", "h")
    write(tmp_path / "sub" / ".cache" / "x.txt", "h")
    write(tmp_path / "image.png", b"\x89PNG")
    write(tmp_path / "sub" / "table.csv", "x")
    write(tmp_path / "README", "no suffix")
    found = discover([tmp_path])
    assert isinstance(found, Discovery)
    assert [f.relpath for f in found.files] == ["a.MD", "b.txt", "sub/c.pdf", "sub/deeper/d.markdown"]
    root = tmp_path.resolve()
    assert all(isinstance(f, FoundFile) and f.root == root and f.path.is_absolute() for f in found.files)
    assert found.skipped_hidden == 3
    assert found.skipped_unsupported == 3
    assert found.errors == []
    assert set(SUPPORTED_SUFFIXES) == {".txt", ".md", ".markdown", ".pdf"}


def test_discover_direct_file_and_missing_path(tmp_path: Path) -> None:
    path = write(tmp_path / "docs" / "one.txt", "x")
    found = discover([path, tmp_path / "missing"])
    assert [(f.relpath, f.root, f.path) for f in found.files] == [("one.txt", (tmp_path / "docs").resolve(), path)]
    assert len(found.errors) == 1 and found.errors[0].path == str(tmp_path / "missing")


def test_discover_overlapping_paths_list_each_file_once(tmp_path: Path) -> None:
    write(tmp_path / "sub" / "x.txt", "x")
    found = discover([tmp_path, tmp_path / "sub", tmp_path / "sub" / "x.txt"])
    assert [f.relpath for f in found.files] == ["sub/x.txt"]


def test_symlink_loop_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root / "a" / "doc.txt", "x")
    (root / "a" / "loop").symlink_to(root, target_is_directory=True)  # points at an ancestor
    (root / "self.txt").symlink_to(root / "self.txt")  # points at itself
    found = discover([root])
    assert [f.relpath for f in found.files] == ["a/doc.txt"]
    # Links that are not followed are a property of the tree, reported in
    # Discovery.skipped rather than as document errors.
    assert found.errors == []
    assert sorted(found.skipped) == sorted(
        [(str(root / "a" / "loop"), "symlink loop"), (str(root / "self.txt"), "symlink loop")]
    )


def test_symlinks_inside_root_are_followed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root / "real" / "doc.txt", "x")
    write(root / "notes.md", "n")
    (root / "alias").symlink_to(root / "real", target_is_directory=True)
    (root / "link.md").symlink_to(root / "notes.md")
    (root / "z-link.txt").symlink_to(root / "real" / "doc.txt")
    write(tmp_path / "outside-but-linked-in" / "only-here.txt", "y")
    (root / "elsewhere").symlink_to(root / "real")  # the same directory twice
    found = discover([root])
    # Aliases of files and directories already found are listed once, under
    # their real path.
    assert [f.relpath for f in found.files] == ["notes.md", "real/doc.txt"]
    assert found.errors == [] and found.skipped == []


def test_symlink_outside_root_needs_follow_symlinks(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root / "inside.txt", "in")
    outside = write(tmp_path / "elsewhere" / "shared" / "outside.txt", "out")
    (root / "shared").symlink_to(outside.parent, target_is_directory=True)
    (root / "file-link.txt").symlink_to(outside)
    (root / "broken.txt").symlink_to(tmp_path / "does-not-exist.txt")

    (root / "outside-image.png").symlink_to(outside)  # unsupported anyway: just counted

    found = discover([root])
    assert [f.relpath for f in found.files] == ["inside.txt"]
    assert found.errors == []
    reasons = {Path(path).name: reason for path, reason in found.skipped}
    assert reasons == {
        "shared": "symlink leads outside the build root; use --follow-symlinks",
        "file-link.txt": "symlink leads outside the build root; use --follow-symlinks",
        "broken.txt": "broken symlink: target does not exist",
    }
    assert found.skipped_unsupported == 1

    followed = discover([root], follow_symlinks=True)
    # file-link.txt and shared/outside.txt are the same file: listed once
    # (both go through a link, so the first relpath wins).
    assert [f.relpath for f in followed.files] == ["file-link.txt", "inside.txt"]
    assert [Path(path).name for path, _ in followed.skipped] == ["broken.txt"]
    assert load_file(followed.files[0].path).text == "out"


def test_unreadable_directory_is_an_error_not_a_crash(tmp_path: Path) -> None:
    write(tmp_path / "ok.txt", "fine")
    locked = tmp_path / "locked"
    write(locked / "inner.txt", "x")
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):
            pytest.skip("running with privileges that ignore directory permissions")
        found = discover([tmp_path])
        assert [f.relpath for f in found.files] == ["ok.txt"]
        assert len(found.errors) == 1 and "permission denied" in found.errors[0].reason
    finally:
        locked.chmod(0o755)
