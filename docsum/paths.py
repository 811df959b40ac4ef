"""Where docsum keeps its files.

One environment variable, DOCSUM_HOME, moves everything (data and config) under a
single folder: tests, CI and people with several setups use it to keep stores
apart without touching the platform directories. Without it we follow the
platform conventions through platformdirs (XDG on Linux, ~/Library on macOS).

Nothing here creates directories: resolving a path must not have side effects,
the store creates its own directory (with mode 0700) when it first writes.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import platformdirs

APP_NAME = "docsum"

# Index names become file names, so they are restricted to characters that are
# safe on every file system and cannot contain a path separator.
_INDEX_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def _env_path(name: str) -> Path | None:
    # An empty variable counts as unset: `DOCSUM_HOME= docsum ...` is a common
    # way to switch an exported variable off for one command.
    value = os.environ.get(name, "")
    if not value:
        return None
    return Path(value).expanduser()


def docsum_home() -> Path | None:
    """$DOCSUM_HOME if set (and not empty), else None."""
    return _env_path("DOCSUM_HOME")


def data_dir() -> Path:
    """Directory for stores: $DOCSUM_HOME/data, else the platform's user data dir."""
    home = docsum_home()
    if home is not None:
        return home / "data"
    # appauthor=False: on Windows platformdirs would otherwise nest docsum\docsum.
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def cache_dir() -> Path:
    """Directory for files docsum can always rebuild: $DOCSUM_HOME/cache, else the platform's user cache dir."""
    home = docsum_home()
    if home is not None:
        return home / "cache"
    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def config_dir() -> Path:
    """Directory for configuration: $DOCSUM_HOME/config, else the platform's user config dir."""
    home = docsum_home()
    if home is not None:
        return home / "config"
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def validate_index_name(index: str) -> str:
    """Return `index` unchanged if it is a valid index name, else raise ValueError."""
    if not _INDEX_NAME.fullmatch(index) or index in {".", ".."}:
        raise ValueError(f"invalid index name {index!r}: use only letters, digits, '_', '.' and '-'")
    return index


def index_store_path(index: str) -> Path:
    """The store file of the named index, under data_dir()/indexes."""
    return data_dir() / "indexes" / f"{validate_index_name(index)}.sqlite"


def existing_indexes() -> list[str]:
    """The names of the indexes that have a store file, sorted (for the
    message naming what exists when a command is given one that does not)."""
    folder = data_dir() / "indexes"
    try:
        names = [p.stem for p in folder.iterdir() if p.suffix == ".sqlite" and _INDEX_NAME.fullmatch(p.stem)]
    except OSError:  # no folder yet: no index
        return []
    return sorted(names)


@contextlib.contextmanager
def replaced_atomically(path: Path) -> Iterator[BinaryIO]:
    """A private (0600) file written beside `path` and renamed over it when
    the block ends; on any error it is removed and `path` is left as it was,
    so a reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """Files and directories created inside get 0600/0700 (the store, its
    lock, its side files).

    The umask is process-wide, hence restored immediately. SQLite gives the -wal
    and -shm files the permissions of the database file, so they follow.
    """
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)
