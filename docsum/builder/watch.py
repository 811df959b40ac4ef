"""`docsum build --watch`: keep a store current with folders that change.

After the first reconcile the folders are watched (watchfiles, an optional
extra imported only here) and each batch of changes is a whole reconcile of
the same PATHS on the store held open under its build lock. A reconcile
rather than a list of changed files, so every rule of a build holds for a
batch exactly: a rename is a removal and an addition, an edited
.docsumignore or --exclude decides what is read, an unreadable or empty
folder removes nothing, and an unchanged file costs one stat.

When a batch starts is `Batcher`'s decision alone (pure, testable without a
file system): once nothing changed for `settle` seconds, so a file still
being written is read when its writer is done; or at the latest `max_wait`
after the first change, so a folder that never falls quiet is still built
(what is mid-write then is built again when it settles).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docsum.builder.pipeline import Builder, check_build_options, run_and_refresh, writable_store
from docsum.builder.report import BuildOptions, BuildReport, BuildReporter, calls_over_limit
from docsum.errors import ConfigError, LLMError
from docsum.locations import StoreLocation, is_postgres
from docsum.models.llm import LLM
from docsum.store.base import DocumentStore

# How often the loop looks at its roots while nothing happens: a folder
# removed (its watch is gone with it) is noticed within this, and an idle
# watch wakes this rarely.
HEALTH_SECONDS = 1.0


@dataclass
class Batcher:
    """Which changes make the next batch, and when it may start."""

    settle: float
    max_wait: float
    pending: set[str] = field(default_factory=set)
    first: float | None = None
    last: float | None = None

    @classmethod
    def for_settle(cls, settle: float) -> Batcher:
        # A writer that never pauses for `settle` still gets its folder built
        # within about twenty settle periods (10 s at least).
        return cls(settle, max(10.0, 20 * settle))

    def add(self, paths: set[str], now: float) -> None:
        if not paths:
            return
        self.pending |= paths
        self.first = now if self.first is None else self.first
        self.last = now

    def due(self, now: float) -> bool:
        if self.first is None or self.last is None:
            return False
        return now - self.last >= self.settle or now - self.first >= self.max_wait

    def wait(self, now: float) -> float | None:
        """Seconds until a batch is due (0: now); None: nothing pending."""
        if self.first is None or self.last is None:
            return None
        return max(0.0, min(self.last + self.settle, self.first + self.max_wait) - now)

    def take(self) -> set[str]:
        taken, self.pending, self.first, self.last = self.pending, set(), None, None
        return taken


@dataclass
class Batch:
    """One batch as reported: its number (0 is the first reconcile), how many
    changed paths started it, and its build report or why it did not run."""

    number: int
    changes: int
    report: BuildReport | None = None
    error: str = ""
    exit_code: int = 0

    def as_dict(self) -> dict[str, Any]:
        head: dict[str, Any] = {"batch": self.number, "changes": self.changes}
        if self.report is None:
            return head | {"error": self.error, "exit_code": self.exit_code}
        return head | self.report.as_dict()


def _identity(path: Path) -> tuple[int, int] | None:
    """The folder's device and inode, None when it is not there: a folder
    removed and made again is another folder, whose watch must be renewed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class _Ignore:
    """The watch filter: the store's own files (when it lies in a watched
    folder) and what watchfiles ignores by default (.git, editor swap files)."""

    def __init__(self, store_path: StoreLocation) -> None:
        from watchfiles import DefaultFilter

        self.default = DefaultFilter()
        self.store_prefix = None if is_postgres(store_path) else os.path.abspath(str(store_path))

    def __call__(self, change: Any, path: str) -> bool:
        if self.store_prefix is not None and os.path.abspath(path).startswith(self.store_prefix):
            return False
        return bool(self.default(change, path))


class Watch:
    """The watch loop over a store held for building (see `watch`)."""

    def __init__(
        self,
        store: DocumentStore,
        store_path: StoreLocation,
        llm: LLM,
        options: BuildOptions,
        on_batch: Callable[[Batch], None],
        *,
        settle: float,
        max_calls: int | None,
        reporter: Callable[[int], BuildReporter | None],
    ) -> None:
        self.store, self.llm, self.options, self.on_batch = store, llm, options, on_batch
        self.batcher = Batcher.for_settle(settle)
        self.max_calls, self.reporter = max_calls, reporter
        self.roots = [Path(p) for p in options.paths]
        self.filter = _Ignore(store_path)
        self.number = 0

    async def _plan_refusal(self) -> str | None:
        if self.max_calls is None:
            return None
        plan = await Builder(self.store, self.llm, dataclasses.replace(self.options, dry_run=True)).run()
        return calls_over_limit(plan, self.max_calls)

    async def batch(self, changes: int) -> Batch:
        number, self.number = self.number, self.number + 1
        missing = [str(p) for p in self.roots if not os.path.lexists(p)]
        if missing:
            # An unmounted share or a folder moved away: nothing is removed,
            # and the batch runs when it is back.
            reason = f"no such file or directory: {', '.join(missing)}; its documents are kept until it is back"
            return Batch(number, changes, error=reason, exit_code=int(ConfigError.exit_code))
        refusal = await self._plan_refusal()
        if refusal is not None:
            if number == 0:
                raise ConfigError(refusal)  # as a build without --watch: exit 2, nothing sent
            return Batch(number, changes, error=refusal, exit_code=int(ConfigError.exit_code))
        try:
            report = await run_and_refresh(Builder(self.store, self.llm, self.options, self.reporter(number)))
        except LLMError as exc:
            # The server failed for good in this batch: say so and keep
            # watching (what finished is kept; the rest is retried next batch).
            return Batch(number, changes, error=str(exc), exit_code=int(exc.exit_code))
        return Batch(number, changes, report, exit_code=3 if report.counts["failed"] else 0)

    async def run(self) -> None:
        changes = 0
        while True:
            await self._watch_until_a_root_changes(changes)
            # A root went away, or came back as a new folder (its watch went
            # with the old one): say so, wait for it, then build what is
            # there and watch it afresh.
            if not all(os.path.lexists(p) for p in self.roots):
                self.on_batch(await self.batch(1))
            changes = 1

    async def _until_roots_exist(self) -> None:
        while not all(os.path.lexists(p) for p in self.roots):
            await asyncio.sleep(HEALTH_SECONDS / 4)

    async def _watch_until_a_root_changes(self, changes: int) -> None:
        """Watch, build (`changes` says why), then build each batch until a root changes."""
        from watchfiles import awatch

        await self._until_roots_exist()
        identities = [_identity(p) for p in self.roots]
        queue: asyncio.Queue[set[str]] = asyncio.Queue()
        stop = asyncio.Event()

        async def listen() -> None:
            # The watcher's own grouping is short (step 50 ms): when a batch
            # starts is the Batcher's decision.
            async for found in awatch(
                *self.roots, watch_filter=self.filter, debounce=400, step=50, stop_event=stop, rust_timeout=5_000
            ):
                queue.put_nowait({path for _change, path in found})

        listener = asyncio.create_task(listen())
        try:
            # The listener's first step sets the watch up (and then waits in a
            # thread): the build below starts only once it is in place, so a
            # change made while it runs is seen, not lost.
            await asyncio.sleep(0)
            self.on_batch(await self.batch(changes))
            while True:
                now = time.monotonic()
                wait = self.batcher.wait(now)
                timeout = HEALTH_SECONDS if wait is None else min(wait, HEALTH_SECONDS)
                with contextlib.suppress(TimeoutError):
                    self.batcher.add(await asyncio.wait_for(queue.get(), timeout), time.monotonic())
                while not queue.empty():
                    self.batcher.add(queue.get_nowait(), time.monotonic())
                if [_identity(p) for p in self.roots] != identities:
                    self.batcher.take()
                    return
                if listener.done():
                    listener.result()  # the watcher failed with its roots in place: raise it
                    return
                if self.batcher.due(time.monotonic()):
                    self.on_batch(await self.batch(len(self.batcher.take())))
        finally:
            stop.set()
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await listener


def check_available() -> None:
    try:
        import watchfiles  # noqa: F401
    except ImportError:
        raise ConfigError("--watch needs watchfiles: pip install 'docsum[watch]'") from None


async def watch(
    store_path: StoreLocation,
    llm: LLM,
    options: BuildOptions,
    on_batch: Callable[[Batch], None],
    *,
    settle: float = 0.5,
    max_calls: int | None = None,
    reporter: Callable[[int], BuildReporter | None] = lambda _n: None,
) -> None:
    """Reconcile the store with `options.paths`, then rebuild on every batch
    of changes until cancelled (SIGINT/SIGTERM in the CLI). The store is held
    for the whole watch: a second builder is refused (exit 4) while
    questions read it as usual. `reporter(n)` is batch n's progress, if any."""
    check_available()
    check_build_options(options)
    if options.dry_run:
        raise ConfigError("--watch and --dry-run do not go together (a dry run changes nothing to watch)")
    with writable_store(store_path, options.wait_seconds) as store:
        await Watch(
            store, store_path, llm, options, on_batch, settle=settle, max_calls=max_calls, reporter=reporter
        ).run()
