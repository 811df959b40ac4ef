"""File discovery: what a build picks up, skips and reports about a folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import run_python_as_nobody
from helpers import write_file as write

from docsum.errors import ConfigError
from docsum.ingest.discover import Discovery, FoundFile, SkippedFile, discover, skipped_summary
from docsum.ingest.formats import SUPPORTED_SUFFIXES
from docsum.ingest.load import load_file

# --------------------------------------------------------------------------- discovery


def test_discover_sorts_counts_hidden_and_unsupported(tmp_path: Path) -> None:
    write(tmp_path / "b.txt", "b")
    write(tmp_path / "a.MD", "a")
    write(tmp_path / "sub" / "c.pdf", b"%PDF-1.4")  # never opened by discovery
    write(tmp_path / "sub" / "deeper" / "d.markdown", "d")
    write(tmp_path / ".hidden.txt", "h")
    write(tmp_path / ".git" / "config.txt", "h")
    write(tmp_path / "sub" / ".cache" / "x.txt", "h")
    write(tmp_path / "image.gif", b"GIF89a")
    write(tmp_path / "sub" / "table.xlsx", "x")
    write(tmp_path / "README", "no suffix")
    found = discover([tmp_path])
    assert isinstance(found, Discovery)
    assert [f.relpath for f in found.files] == ["a.MD", "b.txt", "sub/c.pdf", "sub/deeper/d.markdown"]
    root = tmp_path.resolve()
    assert all(isinstance(f, FoundFile) and f.root == root and f.path.is_absolute() for f in found.files)
    assert found.skipped_hidden == 3
    assert found.skipped_unsupported == 3
    assert found.errors == []
    assert set(SUPPORTED_SUFFIXES) == {
        ".txt",
        ".md",
        ".markdown",
        ".rst",
        ".csv",
        ".pdf",
        ".html",
        ".htm",
        ".docx",
        ".png",
        ".jpg",
        ".jpeg",
        ".tif",
        ".tiff",
    }


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

    (root / "outside-image.gif").symlink_to(outside)  # unsupported anyway: just counted

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


def test_unreadable_directory_is_an_error_and_protected(shared_dir: Path) -> None:
    write(shared_dir / "ok.txt", "fine")
    locked = shared_dir / "locked"
    write(locked / "inner.txt", "x")
    locked.chmod(0)
    # Root ignores permissions: list the folder as the unprivileged user.
    script = (
        "import json, sys; from pathlib import Path; from docsum.ingest.discover import discover; "
        "d = discover([Path(sys.argv[1])]); "
        "print(json.dumps([[f.relpath for f in d.files], [e.reason for e in d.errors], d.protected]))"
    )
    proc = run_python_as_nobody(script, shared_dir)
    assert proc.returncode == 0, proc.stderr
    files, reasons, protected = json.loads(proc.stdout)
    assert files == ["ok.txt"]
    assert reasons == ["cannot read directory: permission denied"]
    assert protected == [str(locked.resolve())]


def test_empty_folders_are_reported(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root / "a.txt", "a")
    (root / "mnt").mkdir()
    write(root / "only-images" / "x.gif", b"GIF89a")
    found = discover([root])
    # A folder with no entry at all; a folder with entries but no document is not "empty".
    assert found.empty_folders == [str(root.resolve() / "mnt")]
    # A root under which no document was found is.
    nothing = discover([root / "only-images"])
    assert nothing.empty_folders == [str((root / "only-images").resolve())]


def test_exclude_and_docsumignore_use_gitignore_syntax(tmp_path: Path) -> None:
    write(tmp_path / "a.txt", "a")
    write(tmp_path / "b.pdf", b"%PDF")
    write(tmp_path / "keep.pdf", b"%PDF")
    write(tmp_path / "drafts" / "c.md", "c")
    write(tmp_path / "sub" / "drafts.md", "d")
    write(tmp_path / "sub" / "e.txt", "e")
    # Written on Windows: a byte-order mark and CRLF line ends.
    write(tmp_path / ".docsumignore", "\ufeff*.pdf\r\n# comment\r\n!keep.pdf\r\ndrafts/\r\n")
    found = discover([tmp_path], exclude=["/sub/e.txt"])
    assert [f.relpath for f in found.files] == ["a.txt", "keep.pdf", "sub/drafts.md"]
    assert sorted((s.path, s.reason) for s in found.skipped_files) == [
        ("b.pdf", "excluded"),
        ("drafts/", "excluded"),
        ("sub/e.txt", "excluded"),
    ]
    assert found.skipped_excluded == 3 and found.skipped_hidden == 0  # .docsumignore itself is not counted
    # A file named directly is read whatever the patterns say.
    assert [f.relpath for f in discover([tmp_path / "b.pdf"], exclude=["*.pdf"]).files] == ["b.pdf"]


def test_bad_patterns(tmp_path: Path) -> None:
    write(tmp_path / "a.txt", "a")
    with pytest.raises(ConfigError, match="--exclude"):
        discover([tmp_path], exclude=["[z-a]"])
    write(tmp_path / ".docsumignore", "[z-a]\n")
    found = discover([tmp_path])
    # Without its exclusions the folder could cost money it was meant not to: not walked, not pruned.
    assert found.files == [] and found.protected == [str(tmp_path.resolve())]
    assert len(found.errors) == 1 and found.errors[0].path.endswith(".docsumignore")


def test_names_that_are_not_utf8_get_a_printable_relpath(tmp_path: Path) -> None:
    folder = os.fsencode(tmp_path)
    with open(folder + b"/bad\xff\xfename.txt", "wb") as fh:
        fh.write(b"text")
    with open(folder + b"/bad\\xff.txt", "wb") as fh:  # a real backslash name
        fh.write(b"text")
    with open(folder + b"/bad\xff.txt", "wb") as fh:  # whose printable form is the one above
        fh.write(b"text")
    found = discover([tmp_path])
    assert sorted(f.relpath for f in found.files) == ["bad\\xff.txt", "bad\\xff\\xfename.txt"]
    readable = {f.relpath: f for f in found.files}["bad\\xff\\xfename.txt"]
    assert readable.path.read_bytes() == b"text"  # the real path, not the printable one
    assert [(e.path, "taken" in e.reason) for e in found.errors] == [("bad\\xff.txt", True)]
    for text in [f.relpath for f in found.files] + [e.path for e in found.errors]:
        text.encode("utf-8")  # storable, printable, JSON-able


def test_skipped_summary_counts_by_reason_then_suffix() -> None:
    entries = [
        SkippedFile("a.docx", "unsupported"),
        SkippedFile("b.DOCX", "unsupported"),
        SkippedFile("x", "unsupported"),
        SkippedFile(".git/", "hidden"),
        SkippedFile("old.pdf", "excluded"),
    ]
    assert (
        skipped_summary(entries)
        == "5 not read: 3 unsupported (.docx 2, no suffix 1), 1 excluded (.pdf 1), 1 hidden (folder 1)"
    )
