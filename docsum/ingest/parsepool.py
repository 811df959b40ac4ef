"""Reading and splitting files in worker processes (the work itself is
docsum.ingest.parsing.parse_file).

PDF extraction is CPU-bound (and pypdf is pure Python), so a build reads and
splits its files in a pool of worker processes, one per core by default.
Each file gets a time limit and each worker an address-space limit: a PDF
that hangs or explodes costs one worker (killed and replaced) and fails on its
own line, the rest of the build goes on.  Cancelling a parse (SIGINT/SIGTERM
reach the build as a cancellation) kills the worker doing it at once, so an
interrupt never waits for a 100,000-page file.

Workers are forked from a small fork server started once per docsum process
(no fork of a process that runs threads and an event loop); everything a
worker needs travels in its request, never through the environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from docsum.errors import LoadError
from docsum.ingest.formats import kind_for
from docsum.ingest.load import READERS
from docsum.ingest.parsing import Parsed, ParseRequest, parse_file, unexpected_reason
from docsum.settings import default

# Plain-text files up to this size are read in the build's own process (see ParsePool.parse).
IN_PROCESS_MAX_BYTES = 1 << 20


def default_jobs() -> int:
    """Worker processes for parsing: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


# --------------------------------------------------------------------------- workers


Context = multiprocessing.context.ForkServerContext | multiprocessing.context.SpawnContext
_CONTEXT: Context | None = None


def _context() -> Context:
    global _CONTEXT
    if _CONTEXT is None:
        ctx: Context
        try:
            ctx = multiprocessing.get_context("forkserver")
            # Imported once in the fork server, so each worker starts warm.
            ctx.set_forkserver_preload(["docsum.ingest.parseworker"])
        except ValueError:  # no forkserver on this platform
            ctx = multiprocessing.get_context("spawn")
        _CONTEXT = ctx
    return _CONTEXT


_ENVIRON_LOCK = threading.Lock()


@contextlib.contextmanager
def _safe_path() -> Iterator[None]:
    """PYTHONSAFEPATH=1 for the processes started meanwhile. The fork server
    and the resource tracker run as `python -c ...`, which puts the current
    folder first on sys.path: a `json.py` or `enum.py` in the folder a build
    ran from was imported in their place and every PDF failed with an
    EOFError. The variable is set only while a worker starts (the first start
    launches the fork server), then put back as it was."""
    with _ENVIRON_LOCK:
        before = os.environ.get("PYTHONSAFEPATH")
        os.environ["PYTHONSAFEPATH"] = "1"
        try:
            yield
        finally:
            if before is None:
                del os.environ["PYTHONSAFEPATH"]
            else:
                os.environ["PYTHONSAFEPATH"] = before


# How long a new worker may take to start (fork, then load the token table)
# before the build gives up on it; generous, for machines under heavy load.
_START_TIMEOUT_S = 120.0


class _Worker:
    def __init__(self, memory_mb: int, encoding: str, timeout_s: float = 0.0) -> None:
        from docsum.ingest.parseworker import worker_main  # loads PDFium: only a build that starts workers pays

        ctx = _context()
        self.conn, child = ctx.Pipe(duplex=True)
        self.process = ctx.Process(
            target=worker_main,
            # The worker is the fork server's child, not ours: it is told
            # whose end must end it, and the file's time limit to hold alone.
            args=(child, memory_mb, encoding, timeout_s, os.getpid()),
            daemon=True,
            name="docsum-parse",
        )
        with _safe_path():
            self.process.start()
        child.close()

    def kill(self) -> None:
        with contextlib.suppress(Exception):
            self.process.kill()
        with contextlib.suppress(Exception):
            self.process.join(timeout=5)
        with contextlib.suppress(Exception):
            self.conn.close()

    def stop(self) -> None:
        """Ask an idle worker to exit (closing its pipe), then make sure."""
        with contextlib.suppress(Exception):
            self.conn.close()
        with contextlib.suppress(Exception):
            self.process.join(timeout=2)
        if self.process.is_alive():
            self.kill()


class ParsePool:
    """Up to ``jobs`` files parsed at once, each in a worker process."""

    def __init__(
        self,
        jobs: int | None = None,
        timeout_s: float = default("parse_timeout"),
        memory_mb: int = default("parse_memory"),
    ) -> None:
        self.jobs = max(1, jobs or default_jobs())
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self._slots = asyncio.Semaphore(self.jobs)
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._closed = False

    async def parse(self, request: ParseRequest, label: str | None = None, size: int | None = None) -> Parsed:
        """Parse one file in a worker; a failure of the file is a LoadError.

        A small plain-text file (``size`` at most IN_PROCESS_MAX_BYTES) is
        parsed in a thread of this process instead: it takes milliseconds, far
        less than starting a worker, and is never the file that hangs."""
        name = label or request.path
        if size is not None and size <= IN_PROCESS_MAX_BYTES and _plain_text(request.path):
            async with self._slots:
                return await asyncio.to_thread(_parse_here, request, name)
        async with self._slots:
            if self._closed:
                raise LoadError(name, "not read: the build is stopping")
            worker = self._idle.pop() if self._idle else None
            fresh = worker is None
            if worker is None:
                worker = await asyncio.to_thread(_Worker, self.memory_mb, request.encoding, self.timeout_s)
            self._busy.add(worker)
            healthy = False
            try:
                if fresh:
                    await self._reply(worker, name, _START_TIMEOUT_S, starting=True)
                worker.conn.send(request)
                status, value = await self._reply(worker, name, self.timeout_s)
                healthy = True
            finally:
                self._busy.discard(worker)
                if healthy and not self._closed:
                    self._idle.append(worker)
                else:
                    # Timed out, crashed, or the build was cancelled: a worker
                    # in an unknown state is never reused. SIGKILL, not a
                    # request: a worker deep in a PDF would not answer one.
                    worker.kill()
        if status != "ok":
            raise LoadError(name, str(value))
        return value

    async def _reply(self, worker: _Worker, name: str, timeout_s: float, starting: bool = False) -> tuple[str, Any]:
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        fd = worker.conn.fileno()

        def on_ready() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(fd, on_ready)
        try:
            await asyncio.wait_for(ready, timeout_s)
        except TimeoutError:
            if starting:
                raise LoadError(name, f"not read: no reader process started within {timeout_s:g} s") from None
            raise LoadError(name, _timed_out(timeout_s)) from None
        finally:
            loop.remove_reader(fd)
        try:
            reply = await asyncio.to_thread(worker.conn.recv)
        except (EOFError, OSError):
            worker.process.join(timeout=5)
            if starting:
                raise LoadError(
                    name, f"not read: the reader process failed to start (exit code {worker.process.exitcode})"
                ) from None
            raise LoadError(name, _death_reason(worker.process.exitcode, self.memory_mb, self.timeout_s)) from None
        if not (isinstance(reply, tuple) and len(reply) == 2):
            raise LoadError(name, "the reader process sent a malformed reply")
        return reply

    def close(self) -> None:
        """Stop every worker; parses in flight are killed."""
        self._closed = True
        for worker in list(self._busy):
            worker.kill()
        for worker in self._idle:
            worker.stop()
        self._idle.clear()

    async def __aenter__(self) -> ParsePool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)


def _plain_text(path: str) -> bool:
    kind = kind_for(Path(path))
    return kind is not None and kind not in READERS  # no reader of its own: decoded as text


def _parse_here(request: ParseRequest, name: str) -> Parsed:
    try:
        return parse_file(request)
    except LoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - as in a worker: a bug on one odd file is that file's failure
        raise LoadError(name, unexpected_reason(exc)) from exc


def _timed_out(timeout_s: float) -> str:
    return f"still being read after {timeout_s:g} s; stopped (see --parse-timeout)"


def _death_reason(exitcode: int | None, memory_mb: int, timeout_s: float) -> str:
    if exitcode == -signal.SIGALRM:
        # The worker's own clock on the file.
        return _timed_out(timeout_s)
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"the reader crashed ({name}); the file may need more than {memory_mb} MB of memory or be malformed"
    return f"the reader process ended unexpectedly (exit code {exitcode})"
