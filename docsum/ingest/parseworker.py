"""The loop a file-reading worker process runs (see docsum.ingest.parsing).

The build's fork server imports this module once and forks every worker from
it, so what is loaded here is loaded once per build, not once per worker:
PDFium, and the cl100k token table most models use.

A worker polices itself, so nothing depends on the build process staying
alive to stop it: it ends within a moment of the build (killed or not) and
of the fork server, and enforces the file's time limit and its memory limit
on its own.
"""

from __future__ import annotations

import contextlib
import multiprocessing.connection
import os
import select
import signal
import threading
import time
import warnings
from typing import Any

import pypdfium2  # noqa: F401 - loaded once in the fork server (see above)

from docsum.errors import LoadError, one_line
from docsum.ingest.parsing import WORKER_GRACE_S, parse_file, unexpected_reason
from docsum.models.tokens import get_encoding

get_encoding("cl100k_base")

# How often the watch looks at the build process where it cannot be told
# (no pidfd): well under the second a worker may outlive it.
_POLL_S = 0.25
_PR_SET_PDEATHSIG = 1


def worker_main(  # noqa: C901 (listed when the check came in: simplify, then drop this)
    conn: multiprocessing.connection.Connection,
    memory_mb: int,
    encoding: str,
    timeout_s: float = 0.0,
    build_pid: int = 0,
) -> None:
    """Serve parse requests on ``conn`` until it closes. ``timeout_s`` (0: none)
    bounds each file; ``build_pid`` (0: unwatched) is the build process,
    whose end ends this worker."""
    # The parent stops the build and kills its workers; a Ctrl-C reaching the
    # whole process group must not print a traceback from every worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The time limit is the kernel's alarm, whose default action ends the
    # process: no Python code has to run for it to act, so a library call
    # holding the interpreter (1.8 s at a time measured on a large text file)
    # cannot delay it, as it could a thread that watched a clock.
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    _die_with_fork_server()
    _Watch(build_pid)
    if memory_mb > 0:
        with contextlib.suppress(ValueError, OSError, ImportError):
            import resource

            limit = memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        # Loading the token table takes a moment; done before the first file's
        # clock starts, so it is not charged to that file's time limit.
        get_encoding(encoding)
        conn.send(("ready", None))
    except (OSError, ValueError):
        return
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        reply: tuple[str, Any]
        if timeout_s > 0:
            # Later than the build's own clock, which reports the file and
            # replaces this worker; this one holds when the build cannot.
            signal.setitimer(signal.ITIMER_REAL, timeout_s + WORKER_GRACE_S)
        try:
            reply = ("ok", _parse_noting_warnings(request))
        except LoadError as exc:
            reply = ("failed", exc.reason)
        except MemoryError:
            reply = ("failed", f"needs more than {memory_mb} MB of memory to read; stopped")
        except RecursionError:
            reply = ("failed", "nested too deeply to read; stopped")
        except Exception as exc:  # noqa: BLE001 - a bug on one odd file is that file's failure
            reply = ("failed", unexpected_reason(exc))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            conn.send(reply)
        except (OSError, ValueError):
            return


# A library's warnings about one file become at most this many of the file's
# own one-line warnings (shown under its name), never raw text on stderr.
_LIBRARY_WARNINGS_KEPT = 3


def _parse_noting_warnings(request: Any) -> Any:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parsed = parse_file(request)
    noted = [one_line(f"{w.category.__name__}: {w.message}") for w in caught]
    fresh = [text for text in dict.fromkeys(noted) if text not in parsed.loaded.warnings]
    parsed.loaded.warnings.extend(fresh[:_LIBRARY_WARNINGS_KEPT])
    return parsed


def _die_with_fork_server() -> None:
    """Ask the kernel to kill this process when its parent (the fork server) dies."""
    with contextlib.suppress(OSError, AttributeError, ImportError):
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class _Watch:
    """A thread that ends the worker when the build process is gone. It
    touches nothing the parse uses: all it ever does is wait and exit."""

    def __init__(self, build_pid: int) -> None:
        self.build_pid = build_pid
        self.pidfd = self._open_pidfd(build_pid)
        threading.Thread(target=self._run, daemon=True, name="docsum-parse-watch").start()

    @staticmethod
    def _open_pidfd(pid: int) -> int | None:
        if pid <= 0 or not hasattr(os, "pidfd_open"):
            return None
        try:
            return os.pidfd_open(pid)
        except ProcessLookupError:
            os._exit(1)  # the build ended before this worker began
        except OSError:
            return None  # an older kernel: polled below instead

    def _build_alive(self) -> bool:
        """Without a pidfd: whether the build's pid still exists."""
        if self.build_pid <= 0:
            return True
        try:
            os.kill(self.build_pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            pass  # exists, owned by someone else
        return True

    def _run(self) -> None:
        poller = None
        if self.pidfd is not None:
            poller = select.poll()
            poller.register(self.pidfd, select.POLLIN)
        while True:
            if poller is not None:
                if poller.poll(_POLL_S * 1000):
                    os._exit(1)  # the build process ended
            else:
                time.sleep(_POLL_S)
                if not self._build_alive():
                    os._exit(1)
