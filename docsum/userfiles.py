"""Opening a file a user named or a folder holds, without ever blocking.

Every file docsum reads on a user's behalf (documents, ``.docsumignore``,
``config.toml``, ``--questions`` and eval files, prompt templates) goes
through ``open_regular``: a FIFO, socket or device under a document's name
would block ``open()`` or never reach end of file, so it is opened without
blocking, looked at through the open descriptor (no race with a swap between
a check and the open) and refused unless it is a regular file.

The refusals are ``OSError`` subclasses whose ``strerror`` is the one-line
reason, so every caller's existing "cannot read X (reason)" path says it.
"""

from __future__ import annotations

import errno
import os
import stat

from docsum.errors import ReasonedOSError

# O_NOCTTY: opening a terminal device must never make it our controlling terminal.
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)


# The most docsum reads of each kind of file a user hands it: far beyond any
# real one, small enough that a wrong file (a log, a disk image) named by
# mistake fails at once instead of filling memory or taking minutes.
CONFIG_MAX_BYTES = 1 << 20
TEMPLATE_MAX_BYTES = 1 << 20
IGNORE_MAX_BYTES = 256 << 10  # see docsum.ingest.discover: matching cost grows with the patterns
QUESTIONS_MAX_BYTES = 64 << 20  # --questions and eval files: 100,000 questions fit many times over


class NotRegularFile(ReasonedOSError):
    """The path is a FIFO, socket or device, not a file."""


class FileTooLarge(ReasonedOSError):
    """The file is larger than what docsum reads of its kind."""


def kind_of(mode: int) -> str:
    """What a non-regular file is, in a user's words."""
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def special_file_reason(mode: int) -> str:
    """The one-line refusal of a path whose mode is not a regular file's."""
    kind = kind_of(mode)
    return kind if kind.startswith("not ") else f"is {kind}, not a regular file"


def open_regular(path: str | os.PathLike[str]) -> int:
    """A blocking read-only descriptor on ``path``, which must be a regular
    file (through symlinks); ``NotRegularFile`` otherwise. The caller closes it."""
    fd = os.open(path, _FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, "is a directory, not a file", str(path))
            raise NotRegularFile(errno.EINVAL, special_file_reason(st.st_mode), str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _size_text(size: int) -> str:
    if size >= 1 << 20:
        return f"{size / (1 << 20):.1f} MB"
    if size >= 1 << 10:
        return f"{size / (1 << 10):.0f} KB"
    return f"{size} bytes"


def read_regular(path: str | os.PathLike[str], limit: int | None = None, what: str = "this kind of") -> bytes:
    """The bytes of the regular file ``path``; with ``limit``, a file larger
    than that is ``FileTooLarge`` (read no further than one byte past it)."""
    fd = open_regular(path)
    try:
        parts: list[bytes] = []
        total = 0
        while True:
            want = 1 << 20 if limit is None else min(1 << 20, limit + 1 - total)
            block = os.read(fd, want) if want > 0 else b""
            if not block:
                break
            parts.append(block)
            total += len(block)
            if limit is not None and total > limit:
                size = max(total, os.fstat(fd).st_size)
                raise FileTooLarge(
                    errno.EFBIG,
                    f"is {_size_text(size)}, more than the {_size_text(limit)} docsum reads of {what} file",
                    str(path),
                )
        return b"".join(parts)
    finally:
        os.close(fd)


def read_regular_text(
    path: str | os.PathLike[str], limit: int | None = None, what: str = "this kind of", errors: str = "strict"
) -> str:
    """``read_regular`` decoded as UTF-8 (a leading byte-order mark dropped:
    Windows editors write one); UnicodeDecodeError for bytes that are not."""
    return read_regular(path, limit, what).decode("utf-8-sig", errors=errors)
