"""Scheduling a build's documents: how many run at once, when a failing
server stops the build, and what other builders sharing the store did
meanwhile."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from docsum.builder.plan import Work
from docsum.builder.report import FileOutcome
from docsum.store.base import DocumentStore
from docsum.store.records import StoredVersion

# How often a builder looks again at documents another builder holds a claim on.
CLAIM_POLL_SECONDS = 0.5


async def run_gated(works: list[Work], gate: asyncio.Semaphore, one: Callable[[Work], Awaitable[None]]) -> None:
    """Run `one(work)` for every work, each started when the gate lets it in
    (`one` releases it), not all at once: 100,000 waiting tasks would hold
    memory for nothing. A document that raises stops the starting of more,
    and the error is raised once those running have ended."""
    running: set[asyncio.Task[None]] = set()
    raised: list[BaseException] = []

    def finished(task: asyncio.Task[None]) -> None:
        running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            raised.append(task.exception())  # type: ignore[arg-type]

    try:
        for work in works:
            await gate.acquire()
            if raised:
                gate.release()
                break  # a document raised: start no more
            task = asyncio.ensure_future(one(work))
            running.add(task)
            task.add_done_callback(finished)
        await asyncio.gather(*running)
        if raised:
            raise raised[0]
    finally:
        for task in list(running):
            task.cancel()
        # Wait for them to end before the caller closes the store: a task
        # cancelled but not awaited runs its cleanup (releasing a claim) at
        # interpreter shutdown, against a closed store, and asyncio prints
        # each one's traceback ("unhandled exception during asyncio.run()
        # shutdown"). What they raise now adds nothing to the first error.
        if running:
            await asyncio.gather(*running, return_exceptions=True)


class StoredElsewhere:
    """Documents other builders sharing the store wrote during this run, as
    one query every CLAIM_POLL_SECONDS at most: a builder that reaches a file
    another already stored (as it is now, with these settings) counts it as
    unchanged without claiming it or reading its row. With four builders in
    the same folder that is three files in four, and each claim, read and
    release was a round trip to the server. A store with one builder (SQLite)
    reports nothing and costs nothing."""

    def __init__(self, store: DocumentStore, split_fp: str, summary_fp: str) -> None:
        self._store = store
        self._wanted = (split_fp, summary_fp)
        self._token: int | None = None
        self._checked = 0.0
        self._versions: dict[str, StoredVersion] = {}

    def has(self, work: Work) -> bool:
        if not self._store.shared:
            return False
        now = time.monotonic()
        if self._token is None or now - self._checked >= CLAIM_POLL_SECONDS:
            self._token, written = self._store.written_since(self._token)
            self._versions.update(written)
            self._checked = now
        return self._versions.get(work.doc_id) == StoredVersion(work.size, work.mtime_ns, *self._wanted)


class Breaker:
    """Stops a build whose LLM server has not answered once.

    A dead server, a wrong base URL, a bad key or an unknown model fail every
    document the same way; without a stop, a build over thousands of files
    would retry each one (with back-off) for hours and record thousands of
    failures that say nothing about the files. The first TRIP_AFTER documents
    in a row failing at the server, before any success, stop the build
    (exit 1); the documents not yet attempted are left for the next run.
    Documents finish out of order, so a success that arrives after the trip
    (from a document already in flight) cancels it and the deferred documents
    are built after all. After one success, failures are per document as usual.
    """

    TRIP_AFTER = 3

    def __init__(self) -> None:
        self.streak = 0
        self.succeeded = False
        self.tripped = False
        self.last_error = ""

    def observe(self, outcome: FileOutcome) -> None:
        if outcome.action in ("added", "updated"):
            self.succeeded = True
            self.tripped = False  # a later success outranks an early streak
            self.streak = 0
        elif outcome.action == "failed" and outcome.llm_failed:
            self.streak += 1
            self.last_error = outcome.error
            if not self.succeeded and self.streak >= self.TRIP_AFTER:
                self.tripped = True
        elif outcome.action == "failed":
            self.streak = 0

    def message(self, not_attempted: int) -> str:
        return (
            f"stopped: the first {self.streak} documents all failed at the LLM server and none succeeded "
            f"(last: {self.last_error.removeprefix('summary failed: ')}); "
            f"{not_attempted} document(s) not attempted, the next build retries them"
        )
