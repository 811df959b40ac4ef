"""Find the files a build should read.

Nothing here raises for a single bad entry: problems are collected in
``Discovery.errors`` and symlinks that will not be followed in
``Discovery.skipped``, so a walk over thousands of files never stops because
one of them is odd.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from docsum.errors import LoadError, os_reason
from docsum.formats import kind_for

_OUTSIDE_ROOT = "symlink leads outside the build root; use --follow-symlinks"


@dataclass(frozen=True)
class FoundFile:
    path: Path  # absolute (not resolved: a followed symlink keeps its own path)
    root: Path  # build root it was found under (absolute, resolved)
    relpath: str  # POSIX path relative to root; a file named directly: its name


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


def _is_hidden(name: str) -> bool:
    return name.startswith(".")


def _is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


# --------------------------------------------------------------------------- discovery


@dataclass(frozen=True)
class _Candidate:
    relpath: str
    path: Path
    root: Path
    resolved: str
    via_symlink: bool


class _Walker:
    def __init__(self, follow_symlinks: bool) -> None:
        self.follow_symlinks = follow_symlinks
        self.candidates: list[_Candidate] = []
        self.skipped_hidden = 0
        self.skipped_unsupported = 0
        self.errors: list[LoadError] = []
        self.skipped: list[tuple[str, str]] = []
        # Resolved directories already walked: stops symlink cycles and keeps
        # an aliased directory from being read twice.
        self.visited: set[str] = set()

    def add_file(self, path: Path, root: Path, relpath: str, resolved: str, via_symlink: bool, st: os.stat_result) -> None:
        if kind_for(path) is None:
            self.skipped_unsupported += 1
            return
        if not stat.S_ISREG(st.st_mode):
            # A FIFO or device named *.txt would block or never end on read.
            self.errors.append(LoadError(str(path), "not a regular file"))
            return
        self.candidates.append(_Candidate(relpath, path, root, resolved, via_symlink))

    def walk(self, root: Path) -> None:
        root_str = str(root)
        self.visited.add(root_str)
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
                self.errors.append(LoadError(str(directory), f"cannot read directory: {os_reason(exc)}"))
                continue
            subdirs: list[tuple[Path, str, str, bool]] = []
            for entry in entries:
                if _is_hidden(entry.name):
                    self.skipped_hidden += 1
                    continue
                path = Path(entry.path)
                relpath = prefix + entry.name
                try:
                    if entry.is_symlink():
                        target = self._follow(path, root_str)
                        if target is None:
                            continue
                        st = os.stat(target)
                        if stat.S_ISDIR(st.st_mode):
                            if _is_within(resolved_dir, target):
                                # The link points at a directory containing itself.
                                self.skipped.append((str(path), "symlink loop"))
                            else:
                                deferred.append((path, relpath + "/", target, True))
                        else:
                            self.add_file(path, root, relpath, target, True, st)
                        continue
                    st = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    self.errors.append(LoadError(str(path), os_reason(exc)))
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

    def _follow(self, link: Path, root_str: str) -> str | None:
        """Resolved target of ``link`` if it may be followed; records why not otherwise."""
        try:
            target = os.path.realpath(link, strict=True)
        except FileNotFoundError:
            self.skipped.append((str(link), "broken symlink: target does not exist"))
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self.skipped.append((str(link), "symlink loop"))
            else:
                self.errors.append(LoadError(str(link), os_reason(exc)))
            return None
        except RuntimeError:  # older pathlib-style loop reporting
            self.skipped.append((str(link), "symlink loop"))
            return None
        if not self.follow_symlinks and not _is_within(target, root_str):
            if os.path.isdir(target) or kind_for(link) is not None:
                self.skipped.append((str(link), _OUTSIDE_ROOT))
            else:
                self.skipped_unsupported += 1  # would be skipped anyway: no notice
            return None
        return target


def discover(paths: list[Path], follow_symlinks: bool = False) -> Discovery:
    """Collect supported files under ``paths`` (directories recurse).

    Hidden entries and unsupported suffixes are skipped and counted; a path
    named directly is never treated as hidden.  Symlinks are followed when
    their target lies inside the root they were found under, or anywhere when
    ``follow_symlinks`` is set.  The same file reached twice (overlapping
    arguments, aliases) is listed once, preferring a path without symlinks.
    """
    walker = _Walker(follow_symlinks)
    for given in paths:
        absolute = Path(os.path.abspath(given))
        if not os.path.lexists(absolute):
            walker.errors.append(LoadError(str(given), "no such file or directory"))
            continue
        try:
            resolved = os.path.realpath(absolute, strict=True)
            st = os.stat(absolute)
        except FileNotFoundError:
            walker.errors.append(LoadError(str(given), "broken symlink: target does not exist"))
            continue
        except (OSError, RuntimeError) as exc:
            reason = os_reason(exc) if isinstance(exc, OSError) else "symlink loop"
            walker.errors.append(LoadError(str(given), reason))
            continue
        if stat.S_ISDIR(st.st_mode):
            if resolved in walker.visited:
                continue
            walker.walk(Path(resolved))
        else:
            root = Path(os.path.realpath(absolute.parent))
            walker.add_file(absolute, root, absolute.name, resolved, absolute.is_symlink(), st)

    chosen: dict[str, _Candidate] = {}
    for cand in sorted(walker.candidates, key=lambda c: (c.via_symlink, c.relpath, str(c.root))):
        chosen.setdefault(cand.resolved, cand)
    files = [FoundFile(c.path, c.root, c.relpath) for c in chosen.values()]
    files.sort(key=lambda f: (f.relpath, str(f.root)))
    return Discovery(files, walker.skipped_hidden, walker.skipped_unsupported, walker.errors, walker.skipped)
