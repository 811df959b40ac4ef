"""Find the files a build should read.

Nothing here raises for a single bad entry: problems are collected in
``Discovery.errors``, symlinks that will not be followed in
``Discovery.skipped``, and hidden, unsupported and excluded files in
``Discovery.skipped_files``, so a walk over thousands of files never stops
because one of them is odd.

Discovery also says which parts of the tree it could not see
(``Discovery.protected``: unreadable folders, broken links, entries it could
not stat) and which folders were empty (``Discovery.empty_folders``), so the
build never takes "I could not look" or "the share is not mounted" for "the
files were deleted".
"""

from __future__ import annotations

import errno
import os
import re
import stat
import warnings
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from docsum.errors import ConfigError, LoadError, one_line, os_reason
from docsum.ingest.formats import IMAGE_KIND, kind_for
from docsum.userfiles import IGNORE_MAX_BYTES, read_regular_text, special_file_reason

if TYPE_CHECKING:
    import pathspec

_OUTSIDE_ROOT = "symlink leads outside the build root; use --follow-symlinks"
IGNORE_FILE = ".docsumignore"


@dataclass(frozen=True)
class FoundFile:
    path: Path  # absolute (not resolved: a followed symlink keeps its own path)
    root: Path  # build root it was found under (absolute, resolved)
    relpath: str  # POSIX path relative to root, printable (see printable_name); a file named directly: its name
    # The file's stat (through a symlink) as the walk saw it: a rebuild
    # compares size and time without a second stat per file.
    stat: os.stat_result | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class SkippedFile:
    """A file or folder the walk saw and deliberately did not read."""

    path: str  # printable, relative to its build root; a folder ends with "/"
    reason: str  # "hidden" | "unsupported" | "excluded" | NEEDS_OCR

    @property
    def kind(self) -> str:
        """What the skip line counts it as: the lower-case suffix, or a folder."""
        if self.path.endswith("/"):
            return "folder"
        return Path(self.path).suffix.lower() or "no suffix"


@dataclass
class Discovery:
    files: list[FoundFile]
    skipped_hidden: int = 0
    skipped_unsupported: int = 0
    errors: list[LoadError] = field(default_factory=list)
    # Symlinks not followed, as (path, reason): outside the root (without
    # follow_symlinks), loops, dangling links. They are a property of the
    # tree, not a failure of a document: a build reports them and moves on
    # (exit 0), and a cron job is not flagged every night because of them.
    skipped: list[tuple[str, str]] = field(default_factory=list)
    skipped_files: list[SkippedFile] = field(default_factory=list)
    skipped_excluded: int = 0
    # Absolute printable paths the walk could not see into (a folder it could
    # not list, a link whose target is gone, an entry it could not stat):
    # what the store holds below them must not be taken for deleted.
    protected: list[str] = field(default_factory=list)
    # Absolute printable paths of folders that listed no entry at all, and of
    # roots under which no file was found: an unmounted share looks like this.
    empty_folders: list[str] = field(default_factory=list)


def printable_name(name: str) -> str:
    """``name`` with bytes that are not UTF-8 written as ``\\xNN``.

    POSIX file names are bytes; Python carries undecodable ones as lone
    surrogates, which SQLite, JSON and a UTF-8 terminal all refuse.  Such a
    file is keyed, stored and shown under this printable form, and read
    through its real path."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return os.fsencode(name).decode("utf-8", errors="backslashreplace")


def _is_hidden(name: str) -> bool:
    return name.startswith(".")


def _is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


# Matching costs the same for every pattern and every path, so a huge list
# (a 500,000-line ignore file took minutes on six files) is refused, not
# applied: far beyond any hand-written list, and about 0.5 ms a path at the
# cap on an idle machine (bench/RESULTS.md).
MAX_PATTERNS = 1000


def _patterns(lines: list[str]) -> list[str]:
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]


def _compile(lines: list[str]) -> pathspec.PathSpec | None:
    """Gitignore-style lines as one matcher (None when there are none);
    ValueError with a one-line reason for a pattern that does not compile,
    or that Python's regular expressions only warn about (``[[:alpha:]]``: a
    POSIX class git knows and this matcher reads otherwise)."""
    patterns = _patterns(lines)
    if not patterns:
        return None
    if len(patterns) > MAX_PATTERNS:
        raise ValueError(f"{len(patterns):,} exclude patterns, more than the {MAX_PATTERNS:,} docsum applies")
    # pathspec is imported by _strict_spec, not at the top: ~80 ms that
    # `docsum ask` and builds without exclusions never need.
    try:
        return _strict_spec(lines)
    except (ValueError, re.error, Warning) as exc:
        # Only now, one by one: which pattern it was, for the message.
        culprit = next((p for p in patterns if _fails(p)), None)
        what = f"bad exclude pattern {culprit.strip()!r}" if culprit is not None else "bad exclude pattern"
        if isinstance(exc, Warning):
            reason = "docsum cannot match it as git would (POSIX classes like [:alpha:] are not supported)"
        else:
            reason = one_line(str(exc), 100)
        raise ValueError(f"{what}: {reason}") from exc


def _strict_spec(lines: list[str]) -> pathspec.PathSpec:
    """The matcher of ``lines``, a warning while compiling them raised as an error."""
    import pathspec

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return pathspec.GitIgnoreSpec.from_lines(lines)


def _fails(pattern: str) -> bool:
    try:
        _strict_spec([pattern])
    except (ValueError, re.error, Warning):
        return True
    return False


def exclusion_spec(patterns: Iterable[str], source: str) -> pathspec.PathSpec | None:
    """``patterns`` (gitignore syntax) as one matcher, None when there are none.

    A pattern that cannot be compiled is a ``ConfigError`` naming ``source``."""
    try:
        return _compile(list(patterns))
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from exc


def _root_spec(root: Path, given_lines: list[str]) -> pathspec.PathSpec | None:
    """The exclusions for one root: ``given_lines`` plus the root's .docsumignore.

    A .docsumignore that cannot be read or compiled is a ``LoadError`` for it."""
    ignore_path = root / IGNORE_FILE
    try:
        # An editor's byte-order mark is dropped: it must not become part of the first pattern.
        own = read_regular_text(ignore_path, IGNORE_MAX_BYTES, "an ignore", errors="surrogateescape").splitlines()
    except FileNotFoundError:
        own = []
    except OSError as exc:
        raise LoadError(printable_name(str(ignore_path)), f"cannot read exclusions: {os_reason(exc)}") from exc
    try:
        return _compile(given_lines + own)
    except ValueError as exc:
        raise LoadError(printable_name(str(ignore_path)), str(exc)) from exc


# --------------------------------------------------------------------------- discovery


@dataclass(frozen=True)
class _Candidate:
    relpath: str
    path: Path
    root: Path
    resolved: str
    via_symlink: bool
    stat: os.stat_result


# The skip reason of an image when OCR is not installed or is turned off.
NEEDS_OCR = "needing OCR (docsum[ocr], --ocr)"


class _Walker:
    def __init__(self, follow_symlinks: bool, images: bool = True) -> None:
        self.follow_symlinks = follow_symlinks
        self.images = images
        self.candidates: list[_Candidate] = []
        self.errors: list[LoadError] = []
        self.skipped: list[tuple[str, str]] = []
        self.skipped_files: list[SkippedFile] = []
        self.protected: list[str] = []
        self.empty_folders: list[str] = []
        # Resolved directories already walked: stops symlink cycles and keeps
        # an aliased directory from being read twice.
        self.visited: set[str] = set()
        self.exclude: pathspec.PathSpec | None = None  # of the root being walked

    def skip(self, relpath: str, reason: str) -> None:
        self.skipped_files.append(SkippedFile(printable_name(relpath), reason))

    def cannot_see(self, path: Path | str, reason: str) -> None:
        """Record an entry the walk could not look at; nothing below it is pruned."""
        shown = printable_name(str(path))
        self.errors.append(LoadError(shown, reason))
        self.protected.append(shown)

    def add_file(
        self, path: Path, root: Path, relpath: str, resolved: str, via_symlink: bool, st: os.stat_result
    ) -> None:
        kind = kind_for(relpath)
        if kind is None:
            self.skip(relpath, "unsupported")
            return
        if kind == IMAGE_KIND and not self.images:
            self.skip(relpath, NEEDS_OCR)
            return
        if not stat.S_ISREG(st.st_mode):
            # A FIFO or device named *.txt would block or never end on read.
            # Named like every other failure of the folder: by its path in it.
            self.errors.append(LoadError(printable_name(relpath), special_file_reason(st.st_mode)))
            return
        self.candidates.append(_Candidate(printable_name(relpath), path, root, resolved, via_symlink, st))

    def excluded(self, relpath: str, entry: os.DirEntry[str]) -> bool:
        if self.exclude is None:
            return False
        is_dir = _entry_is_dir(entry)  # through a symlink: "docs/" patterns match linked folders too
        if self.exclude.match_file(relpath + "/" if is_dir else relpath):
            self.skip(relpath + "/" if is_dir else relpath, "excluded")
            return True
        return False

    def walk(self, root: Path) -> None:  # noqa: C901 (listed when the check came in: simplify, then drop this)
        root_str = str(root)
        self.visited.add(root_str)
        found_before = len(self.candidates)
        # (logical path, relpath prefix, resolved path, reached through a symlink)
        pending: list[tuple[Path, str, str, bool]] = [(root, "", root_str, False)]
        # Symlinked directories wait until every real directory of the tree has
        # been walked, so an alias never claims files ahead of their real path.
        deferred: list[tuple[Path, str, str, bool]] = []
        while pending or deferred:
            if not pending:
                item = deferred.pop(0)
                if item[2] in self.visited:
                    continue  # an alias of a directory already walked
                self.visited.add(item[2])
                pending.append(item)
            directory, prefix, resolved_dir, through_link = pending.pop()
            try:
                with os.scandir(directory) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as exc:
                self.cannot_see(directory, f"cannot read directory: {os_reason(exc)}")
                continue
            if not entries:
                self.empty_folders.append(printable_name(str(directory)))
            subdirs: list[tuple[Path, str, str, bool]] = []
            for entry in entries:
                relpath = prefix + entry.name
                if _is_hidden(entry.name):
                    if not (prefix == "" and entry.name == IGNORE_FILE):  # settings, not content
                        self.skip(relpath + "/" if _entry_is_dir(entry, follow=False) else relpath, "hidden")
                    continue
                path = directory / entry.name
                # Before anything else: an excluded entry is never opened,
                # followed or reported on.
                if self.excluded(relpath, entry):
                    continue
                try:
                    if entry.is_symlink():
                        target = self._follow(path, relpath, root_str)
                        if target is None:
                            continue
                        st = os.stat(target)
                        if stat.S_ISDIR(st.st_mode):
                            if _is_within(resolved_dir, target):
                                # The link points at a directory containing itself.
                                self.skipped.append((printable_name(str(path)), "symlink loop"))
                            else:
                                deferred.append((path, relpath + "/", target, True))
                        else:
                            self.add_file(path, root, relpath, target, True, st)
                        continue
                    st = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    self.cannot_see(path, os_reason(exc))
                    continue
                resolved = os.path.join(resolved_dir, entry.name)
                if stat.S_ISDIR(st.st_mode):
                    if resolved not in self.visited:
                        self.visited.add(resolved)
                        subdirs.append((path, relpath + "/", resolved, through_link))
                else:
                    self.add_file(path, root, relpath, resolved, through_link, st)
            # Reversed so the stack pops directories in name order.
            pending.extend(reversed(subdirs))
        shown_root = printable_name(root_str)
        if len(self.candidates) == found_before and shown_root not in self.empty_folders + self.protected:
            self.empty_folders.append(shown_root)

    def _follow(self, link: Path, relpath: str, root_str: str) -> str | None:
        """Resolved target of ``link`` if it may be followed; records why not otherwise."""
        shown = printable_name(str(link))
        try:
            target = os.path.realpath(link, strict=True)
        except FileNotFoundError:
            # The target may be an unmounted share or a drive not plugged in:
            # what the store holds from it stays.
            self.skipped.append((shown, "broken symlink: target does not exist"))
            self.protected.append(shown)
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self.skipped.append((shown, "symlink loop"))
            else:
                self.cannot_see(link, os_reason(exc))
            return None
        except RuntimeError:  # older pathlib-style loop reporting
            self.skipped.append((shown, "symlink loop"))
            return None
        if not self.follow_symlinks and not _is_within(target, root_str):
            if os.path.isdir(target) or kind_for(link) is not None:
                self.skipped.append((shown, _OUTSIDE_ROOT))
            else:
                self.skip(relpath, "unsupported")  # would be skipped anyway: no notice
            return None
        return target


def _entry_is_dir(entry: os.DirEntry[str], follow: bool = True) -> bool:
    try:
        return entry.is_dir(follow_symlinks=follow)
    except OSError:
        return False


def discover(  # noqa: C901 (listed when the check came in: simplify, then drop this)
    paths: list[Path], follow_symlinks: bool = False, exclude: list[str] | None = None, images: bool = True
) -> Discovery:
    """Collect supported files under ``paths`` (directories recurse).

    Hidden entries, unsupported suffixes and entries matching ``exclude`` or
    the root's ``.docsumignore`` (gitignore syntax, relative to each root) are
    skipped and listed; a path named directly is never treated as hidden or
    excluded.  Symlinks are followed when their target lies inside the root
    they were found under, or anywhere when ``follow_symlinks`` is set.  The
    same file reached twice (overlapping arguments, aliases) is listed once,
    preferring a path without symlinks.  A bad ``exclude`` pattern raises
    ``ConfigError``; everything else is collected. Without ``images`` (no
    OCR to read them), image files are skipped as NEEDS_OCR.
    """
    given_lines = list(exclude or [])
    exclusion_spec(given_lines, "--exclude")  # a bad pattern is the caller's error, not a root's
    walker = _Walker(follow_symlinks, images)
    for given in paths:
        absolute = Path(os.path.abspath(given))
        shown = printable_name(str(given))
        if not os.path.lexists(absolute):
            walker.errors.append(LoadError(shown, "no such file or directory"))
            continue
        try:
            resolved = os.path.realpath(absolute, strict=True)
            st = os.stat(absolute)
        except FileNotFoundError:
            walker.errors.append(LoadError(shown, "broken symlink: target does not exist"))
            continue
        except (OSError, RuntimeError) as exc:
            reason = os_reason(exc) if isinstance(exc, OSError) else "symlink loop"
            walker.cannot_see(absolute, reason)
            continue
        folder = resolved if stat.S_ISDIR(st.st_mode) else os.path.realpath(absolute.parent)
        if printable_name(folder) != folder:
            # Documents are keyed by their root; one that cannot be stored as
            # text cannot key anything.  A parent folder can be built instead.
            walker.errors.append(LoadError(shown, "folder name is not valid UTF-8; build its parent folder instead"))
            continue
        if stat.S_ISDIR(st.st_mode):
            if resolved in walker.visited:
                continue
            try:
                walker.exclude = _root_spec(Path(resolved), given_lines)
            except LoadError as exc:
                # Reading the folder without its exclusions could summarize
                # (and pay for) files the user ruled out: skip it whole.
                walker.errors.append(exc)
                walker.protected.append(resolved)
                continue
            walker.walk(Path(resolved))
        else:
            walker.add_file(absolute, Path(folder), absolute.name, resolved, absolute.is_symlink(), st)

    chosen: dict[str, _Candidate] = {}
    for cand in sorted(walker.candidates, key=lambda c: (c.via_symlink, c.relpath, str(c.root))):
        chosen.setdefault(cand.resolved, cand)
    files: list[FoundFile] = []
    keys: set[tuple[str, str]] = set()
    # A real name and a printable stand-in can coincide ("a\xff.txt" typed
    # with a backslash): real names first, so the stand-in is the one refused.
    for cand in sorted(chosen.values(), key=lambda c: (str(c.path) != printable_name(str(c.path)), c.relpath)):
        if (str(cand.root), cand.relpath) in keys:
            walker.errors.append(
                LoadError(cand.relpath, "file name is not valid UTF-8 and its printable form is taken by another file")
            )
            continue
        keys.add((str(cand.root), cand.relpath))
        files.append(FoundFile(cand.path, cand.root, cand.relpath, cand.stat))
    files.sort(key=lambda f: (f.relpath, str(f.root)))
    skipped_files = walker.skipped_files
    return Discovery(
        files,
        skipped_hidden=sum(1 for s in skipped_files if s.reason == "hidden"),
        skipped_unsupported=sum(1 for s in skipped_files if s.reason == "unsupported"),
        errors=walker.errors,
        skipped=walker.skipped,
        skipped_files=skipped_files,
        skipped_excluded=sum(1 for s in skipped_files if s.reason == "excluded"),
        protected=walker.protected,
        empty_folders=walker.empty_folders,
    )


def skipped_summary(skipped: list[SkippedFile]) -> str:
    """One line counting ``skipped`` by reason, then by suffix within each,
    e.g. ``4 not read: 3 unsupported (.docx 2, .html 1), 1 hidden (folder 1)``."""
    by_reason: dict[str, Counter[str]] = {}
    for entry in skipped:
        by_reason.setdefault(entry.reason, Counter())[entry.kind] += 1
    parts = []
    for reason in sorted(by_reason, key=lambda r: (-sum(by_reason[r].values()), r)):
        kinds = by_reason[reason]
        detail = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
        parts.append(f"{sum(kinds.values())} {reason} ({detail})")
    return f"{len(skipped)} not read: " + ", ".join(parts)
