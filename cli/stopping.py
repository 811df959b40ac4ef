"""Running a command's coroutine so that SIGINT and SIGTERM always stop it.

The first signal cancels the coroutine: open transactions roll back, the
build lock is released, workers are killed, and the command exits 130 / 143.
Whatever a thread is doing meanwhile (a read from a stalled network share, a
custom synthesizer's blocking call) cannot hold the process: the loop no
longer waits for its executor's threads once a signal came, a thread still
busy at the end does not keep the interpreter from exiting (``leave``), and
if the cleanup itself has not finished within ``STOP_GRACE_S``, or a second
signal arrives, the process exits at once with the same code (the kernel
drops the build lock of a dead process; SQLite rolls back what was not
committed).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from docsum.errors import ExitCode, Interrupted

if TYPE_CHECKING:  # asyncio loads with the first command that runs a coroutine, not for --help
    import asyncio

T = TypeVar("T")

# How long the orderly stop after a signal may take before the process ends
# without it.
STOP_GRACE_S = 5.0
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _code_of(signum: int) -> int:
    return int(ExitCode.SIGTERM if signum == signal.SIGTERM else ExitCode.SIGINT)


def _exit_now(code: int, message: str) -> None:
    """End the process at once: nothing may wait on a stuck thread."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110 - a closed or broken stream must not stop the exit
            pass
    if message:
        try:
            os.write(2, message.encode("utf-8", "replace") + b"\n")
        except OSError:
            pass
    os._exit(code)


def _executor() -> Any:
    """The loop's threads for blocking work; once ``stopping`` is set, its
    shutdown does not wait for a thread stuck in a system call."""
    import concurrent.futures

    class Executor(concurrent.futures.ThreadPoolExecutor):
        stopping = False

        def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
            super().shutdown(wait=wait and not self.stopping, cancel_futures=cancel_futures or self.stopping)

    return Executor(thread_name_prefix="docsum")


class _Stopper:
    """What the signal handler does: cancel the command, start the clock on
    its cleanup, and end the process on a second signal."""

    def __init__(self, loop: asyncio.AbstractEventLoop, executor: Any) -> None:
        self.loop = loop
        self.executor = executor
        self.task: asyncio.Task[object] | None = None
        self.received: list[int] = []

    def __call__(self, signum: int, _frame: object = None) -> None:
        # A plain signal handler, not loop.add_signal_handler: it runs even
        # when the loop's own thread is blocked in a system call.
        if self.received:
            _exit_now(_code_of(self.received[0]), f"docsum: stopped at once by a second {signal.Signals(signum).name}")
        self.received.append(signum)
        self.executor.stopping = True
        threading.Thread(target=self._deadline, args=(signum,), daemon=True, name="docsum-stop").start()
        if self.task is not None:
            self.loop.call_soon_threadsafe(self.task.cancel)

    def _deadline(self, signum: int) -> None:
        time.sleep(STOP_GRACE_S)
        name = signal.Signals(signum).name
        _exit_now(_code_of(signum), f"docsum: interrupted by {name}; stopped without finishing the cleanup")


def run_async(coro_factory: Callable[[], Awaitable[T]]) -> T:
    """Run the command's coroutine; SIGINT and SIGTERM cancel it cleanly and
    become exit 130 / 143 (``Interrupted``) within STOP_GRACE_S, always."""
    import asyncio

    executor = _executor()
    with asyncio.Runner() as runner:
        loop = runner.get_loop()
        loop.set_default_executor(executor)
        stopper = _Stopper(loop, executor)

        async def main() -> T:
            stopper.task = asyncio.current_task()
            try:
                return await coro_factory()
            except asyncio.CancelledError:
                if stopper.received:
                    raise Interrupted(stopper.received[0]) from None
                raise

        in_main_thread = threading.current_thread() is threading.main_thread()
        saved = {signum: signal.signal(signum, stopper) for signum in _SIGNALS} if in_main_thread else {}
        try:
            return runner.run(main())
        finally:
            for signum, handler in saved.items():
                signal.signal(signum, handler)


def leave(code: int) -> None:
    """Exit with ``code``; at once when a thread is still busy (one a signal
    left stuck in a system call would otherwise hold the interpreter's exit)."""
    busy = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if busy:
        _exit_now(code, "")
    sys.exit(code)
