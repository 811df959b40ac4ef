"""The build lock: one `docsum build` per store at a time.

fcntl.flock on a side file next to the store. The kernel drops the lock when
the holder dies, even by SIGKILL, so a stale lock file never blocks anyone.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, Self

from docsum.errors import DocsumError, StoreLockedError, os_reason
from docsum.paths import private_umask
from docsum.store.base import ClosesOnExit
from docsum.store.records import utc_now


class BuildLock(ClosesOnExit):
    """Only one build per store at a time.

    fcntl.flock on a side file: the kernel drops the lock when the holder's
    process dies, even by SIGKILL, so a leftover lock file never blocks anyone.
    The file is never deleted (deleting would let two processes lock two
    different inodes under the same name); its content, who holds it, is only
    informational and read best-effort. Readers (ask) do not take the lock:
    SQLite's WAL already gives them consistent snapshots.
    """

    POLL_SECONDS = 0.1

    def __init__(self, store_path: Path, wait_seconds: float = 0.0) -> None:
        self.store_path = Path(store_path)
        # The whole name plus ".lock": with_suffix would give `notes.db` and
        # `notes.sqlite` one lock file, so two stores would exclude each other.
        self.path = self.store_path.with_name(self.store_path.name + ".lock")
        self.wait_seconds = max(0.0, float(wait_seconds))
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        deadline = time.monotonic() + self.wait_seconds
        try:
            with private_umask():
                self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DocsumError(
                f"{self.store_path}: cannot create the folder {self.path.parent} ({os_reason(exc)})"
            ) from exc
        while True:
            # os.open makes the fd non-inheritable (PEP 446): a child process
            # (a PDF helper, say) must not keep the lock alive after we die.
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as exc:
                raise DocsumError(
                    f"{self.store_path}: cannot create the lock file {self.path} ({os_reason(exc)})"
                ) from exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise StoreLockedError(self._locked_message()) from None
                time.sleep(min(self.POLL_SECONDS, remaining))
                continue
            except BaseException:
                os.close(fd)
                raise
            # Someone may have deleted/replaced the file between open and lock;
            # a lock on an unlinked inode protects nothing, so start over.
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            self._fd = fd
            break
        self._write_holder_info()

    def _write_holder_info(self) -> None:
        assert self._fd is not None
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_at": utc_now(),
            "argv0": sys.argv[0] if sys.argv else "",
        }
        data = json.dumps(info).encode("utf-8")
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, data, 0)
        except OSError:
            pass  # informational only; the flock is what excludes other builds

    def read_holder(self) -> dict[str, Any] | None:
        """Who holds (or last held) the lock, if the file says so."""
        try:
            info = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            # Missing, empty (released or being written) or partial: unknown.
            return None
        return info if isinstance(info, dict) else None

    def _locked_message(self) -> str:
        info = self.read_holder()
        if not info or "pid" not in info:
            return f"store {self.store_path} is locked by another build; try --wait SECONDS"
        return (
            f"store {self.store_path} is locked by a build running as pid {info.get('pid')} "
            f"on {info.get('host', '?')} since {info.get('started_at', '?')}; try --wait SECONDS"
        )

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            # Empty the holder info first so nobody reads a stale pid after us.
            os.ftruncate(fd, 0)
        except OSError:
            pass
        finally:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def close(self) -> None:
        """Release the lock (what leaving a `with BuildLock(...)` block does)."""
        self.release()
