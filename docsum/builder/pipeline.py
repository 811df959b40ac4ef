"""`docsum build`: make the store match the folder.

New files are added, changed ones re-split and re-summarized, vanished ones
removed, unchanged ones cost nothing. Each finished document (nodes, summary,
embedding) is committed in its own transaction the moment it is done, so a run
killed at any point loses only the documents still in flight, and the next run
picks up the rest.

The stages live in their own modules: docsum.builder.plan decides what to do
(the folder against the store), docsum.builder.document does one document,
docsum.builder.schedule runs many at once; this module runs a build from start
to end and brings the files questions read (vectors, BM25 index) up to date.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from docsum.builder.document import DocumentWorker
from docsum.builder.embedbatch import SummaryEmbedder
from docsum.builder.plan import Plan, Reconciler, Work, check_build_options, fingerprints, lies_inside
from docsum.builder.report import BuildOptions, BuildReport, BuildReporter, FileOutcome, FileWarning, SilentReporter
from docsum.builder.schedule import CLAIM_POLL_SECONDS, Breaker, StoredElsewhere, run_gated
from docsum.errors import LLMError
from docsum.ingest.ocr import PageCounts
from docsum.ingest.ocr import installed as ocr_installed
from docsum.ingest.parsepool import ParsePool
from docsum.ingest.parsing import TextCache
from docsum.locations import StoreLocation, display_location, is_postgres
from docsum.models.calls import call_budget
from docsum.models.llm import LLM, track_calls
from docsum.paths import cache_dir
from docsum.schema import CallRecord
from docsum.store.base import DocumentStore
from docsum.store.evidence import refresh_evidence
from docsum.store.lock import BuildLock
from docsum.store.opening import open_store, store_exists
from docsum.store.records import DocumentRecord, StoredFile, StoredVersion
from docsum.store.sqlite import Store
from docsum.store.vectors import refresh_vectors

__all__ = [
    "BuildOptions",
    "BuildReport",
    "Builder",
    "FileOutcome",
    "build",
    "check_build_options",
    "run_and_refresh",
    "writable_store",
]

log = logging.getLogger("docsum")


class Builder:
    def __init__(
        self, store: DocumentStore, llm: LLM, options: BuildOptions, reporter: BuildReporter | None = None
    ) -> None:
        self.store = store
        self.llm = llm
        self.options = options
        self.reporter = reporter or SilentReporter()
        self.split_fp, self.summary_fp = fingerprints(llm, options)
        self.worker = DocumentWorker(store, llm, options, self.split_fp, self.summary_fp, self._cache_dir())

    async def reconcile(self) -> Plan:
        """What this build has to do (see docsum.builder.plan)."""
        return await Reconciler(self.store, self.options, self.split_fp, self.summary_fp).reconcile()

    async def run(self) -> BuildReport:
        options = self.options
        pool = self.worker.pool = ParsePool(options.jobs, options.parse_timeout_s, options.parse_memory_mb)
        try:
            report = await self._run()
        finally:
            # Also on SIGINT/SIGTERM (a cancellation): workers still parsing
            # are killed, not waited for.
            pool.close()
        if options.use_cache:
            await asyncio.to_thread(TextCache(self._cache_dir()).prune)
        return report

    def _cache_dir(self) -> Path:
        return self.options.cache_dir or (cache_dir() / "text")

    async def _run(self) -> BuildReport:  # noqa: C901 (listed when the check came in: simplify, then drop this)
        started = time.monotonic()
        report = BuildReport(
            self.store.label,
            dry_run=self.options.dry_run,
            model=self.llm.metadata.price_key,
            engine=self.llm.metadata.engine,
            num_output=self.llm.metadata.num_output,
            ocr_mode=self.options.ocr,
            ocr_installed=ocr_installed(),
        )
        plan = await self.reconcile()
        todo, to_remove, known = plan.todo, plan.to_remove, plan.known
        report.skipped = plan.skipped
        report.skipped_entries = plan.skipped_entries
        removals = 0 if self.options.dry_run else len(to_remove)  # each one is reported as it happens
        self.reporter.start(len(todo) + len(known) + removals, len(todo))
        for outcome in known:
            self._count(report, outcome)
            self.reporter.file_done(outcome)

        if self.options.dry_run:

            async def plan_one(work: Work) -> FileOutcome:
                outcome = await self.worker.plan(work)
                self.reporter.file_done(outcome)  # as each finishes: progress from the first file
                return outcome

            # Files are parsed in parallel (and their text cached for the build
            # that follows); the plan lists them in folder order.
            for work, outcome in zip(todo, await asyncio.gather(*(plan_one(w) for w in todo))):
                report.plan.append(dataclasses.replace(outcome, path=work.found.relpath))
                if outcome.page_origins:  # what the build would read: its pages are counted the same way
                    report.pages[work.found.relpath] = PageCounts.of(outcome.page_origins)
            report.plan.extend(FileOutcome(doc.path, "remove") for doc in to_remove)
            report.elapsed_s = time.monotonic() - started
            self.reporter.finish()
            return report

        # We hold the build lock: a build still marked running was killed.
        self.store.close_abandoned_runs("build")
        run_id = self.store.start_run(
            "build", {"paths": [str(p) for p in self.options.paths], "model": self.llm.metadata.model}
        )
        status = "interrupted"
        self.worker.run_id, self.worker.recorded = run_id, set()
        recorded = self.worker.recorded
        with call_budget(self.options.max_calls, "this build"), track_calls() as calls:
            try:
                for doc_id, size, mtime_ns in plan.touched:
                    self.store.touch_document(doc_id, size, mtime_ns)
                for doc in to_remove:
                    if not self._remove(doc):
                        continue
                    outcome = FileOutcome(doc.path, "removed")
                    self._count(report, outcome)
                    self.reporter.file_done(outcome)
                if self.options.prune:
                    # A failed file that has since vanished is no longer retried.
                    for failure in self.store.failures():
                        if (
                            lies_inside(failure["root"], failure["path"], plan.roots)
                            and not lies_inside(failure["root"], failure["path"], plan.protected)
                            and (failure["root"], failure["path"]) not in plan.seen
                        ):
                            self.store.clear_failure(failure["root"], failure["path"])
                # Bound documents in memory at once; requests in flight are bounded
                # separately (and process-wide) by the LLM's own limit.
                limits = self.options.limits
                gate = asyncio.Semaphore(limits.documents)
                embedder = self.worker.embedder = SummaryEmbedder(self.llm, capacity=limits.embed_batch)
                breaker = Breaker()

                deferred: list[Work] = []
                busy: list[Work] = []  # claimed by another builder sharing the store
                stored_elsewhere = StoredElsewhere(self.store, self.split_fp, self.summary_fp)

                async def one(work: Work) -> None:
                    # The gate was taken by run_gated() for this document.
                    holding = True

                    def release_gate() -> None:
                        # Waiting for its embedding, a document lets the next
                        # one start (the embedder bounds how many wait).
                        nonlocal holding
                        if holding:
                            holding = False
                            gate.release()

                    try:
                        if breaker.tripped:
                            deferred.append(work)  # neither failed nor recorded
                            return
                        if stored_elsewhere.has(work):
                            # Another builder stored it: no claim, no query.
                            report.done_elsewhere += 1
                            self._count(report, unchanged := FileOutcome(work.found.relpath, "unchanged"))
                            self.reporter.file_done(unchanged)
                            return
                        if not self.store.claim(work.doc_id):
                            busy.append(work)  # another builder has it; looked at again below
                            return
                        try:
                            with track_calls() as doc_calls:
                                done = self._done_elsewhere(work)
                                if done is not None:
                                    outcome = done
                                    report.done_elsewhere += 1
                                else:
                                    embedder.enter()
                                    try:
                                        outcome = await self.worker.process(work, release_gate)
                                    finally:
                                        embedder.leave()
                        finally:
                            self.store.release_claim(work.doc_id)
                    finally:
                        release_gate()
                    # Usage is committed with the document, so it survives a crash.
                    for call in doc_calls:
                        self._record_call(run_id, call, recorded)
                    breaker.observe(outcome)
                    self._count(report, outcome)
                    self.reporter.file_done(outcome)

                await run_gated(todo, gate, one)
                # A success that finished after the trip (documents complete out
                # of order) shows the server works: the deferred documents run
                # now. Each pass starts at least one document, so this ends.
                while deferred and not breaker.tripped:
                    batch, deferred[:] = list(deferred), []
                    await run_gated(batch, gate, one)
                # Documents other builders held: wait until each is stored by
                # them (then it is done) or its claim is released or taken
                # over (a dead builder's), and do it then.
                while busy and not breaker.tripped:
                    await asyncio.sleep(CLAIM_POLL_SECONDS)
                    batch, busy[:] = list(busy), []
                    await run_gated(batch, gate, one)
                if breaker.tripped:
                    status = "aborted"
                    raise LLMError(breaker.message(len(deferred)))
                status = "ok" if not report.counts["failed"] else "partial"
            finally:
                report.calls = list(calls)
                report.elapsed_s = time.monotonic() - started
                for call in report.calls:
                    self._record_call(run_id, call, recorded)
                self.store.finish_run(run_id, status, report.usage.as_dict(), dict(report.counts))
                self.reporter.finish()
        return report

    def _record_call(self, run_id: int, call: CallRecord, recorded: set[int]) -> None:
        if id(call) in recorded:
            return
        recorded.add(id(call))
        self.store.record_call(
            run_id, call.kind, call.model, call.prompt_tokens, call.completion_tokens, call.seconds, call.ok
        )

    def _count(self, report: BuildReport, outcome: FileOutcome) -> None:
        if outcome.action in report.counts:
            report.counts[outcome.action] += 1
        if outcome.action == "failed":
            report.failures.append(outcome)
        elif outcome.action == "skipped":
            report.skipped_files.append(outcome)
        report.warnings.extend(FileWarning(outcome.path, warning) for warning in outcome.warnings)
        if outcome.extractor:
            report.extractors[outcome.path] = outcome.extractor
        if outcome.page_origins:
            report.pages[outcome.path] = PageCounts.of(outcome.page_origins)

    def _done_elsewhere(self, work: Work) -> FileOutcome | None:
        """With builders sharing the store: whether another one stored this
        file, as it is now and with these settings, since this run looked
        (then it is unchanged here, and costs nothing)."""
        if not self.store.shared:
            return None
        current = next((d for d in self.store.find_documents(work.doc_id) if d.doc_id == work.doc_id), None)
        if current is None:
            return None
        stored = StoredVersion(current.size, current.mtime_ns, current.split_fingerprint, current.summary_fingerprint)
        if stored != StoredVersion(work.size, work.mtime_ns, self.split_fp, self.summary_fp):
            return None
        return FileOutcome(work.found.relpath, "unchanged")

    def _remove(self, doc: StoredFile | DocumentRecord) -> bool:
        """Remove a vanished file's document. With builders sharing the store,
        not when the file is back (another builder may have stored it after
        this run looked) or another builder holds its claim."""
        if not self.store.shared:
            self.store.remove_document(doc.doc_id)
            return True
        if os.path.lexists(PurePosixPath(doc.root, doc.path)) or not self.store.claim(doc.doc_id):
            return False
        try:
            return self.store.remove_document(doc.doc_id)
        finally:
            self.store.release_claim(doc.doc_id)


async def build(
    store_path: StoreLocation, llm: LLM, options: BuildOptions, reporter: BuildReporter | None = None
) -> BuildReport:
    """Reconcile the store at `store_path` (a file or a postgresql:// URL) with
    `options.paths`. A SQLite store is held by its build lock for the whole
    run; builders sharing a PostgreSQL store claim documents one by one
    instead. A dry run takes no lock and writes nothing."""
    check_build_options(options)
    if options.dry_run:
        if not store_exists(store_path):
            # Plan against an empty scratch store: a dry run creates nothing.
            with tempfile.TemporaryDirectory(prefix="docsum-dry-run-") as scratch:
                with Store.open(Path(scratch) / "plan.sqlite", create=True) as store:
                    report = await Builder(store, llm, options, reporter).run()
            report.store = display_location(store_path)
            return report
        with open_store(store_path, create=False, readonly=True) as store:
            return await Builder(store, llm, options, reporter).run()
    with writable_store(store_path, options.wait_seconds) as store:
        return await run_and_refresh(Builder(store, llm, options, reporter))


@contextlib.contextmanager
def writable_store(store_path: StoreLocation, wait_seconds: float = 0.0) -> Iterator[DocumentStore]:
    """The store opened for building, for as long as the block runs: a SQLite
    store held by its build lock (a second builder is exit 4), a PostgreSQL
    one shared (its builders claim documents one by one)."""
    if is_postgres(store_path):
        with open_store(store_path) as store:
            yield store
        return
    # Refuse a file that is not a docsum store before the lock file is made
    # beside it: a refused --store leaves nothing behind.
    Store.verify(Path(store_path))
    with BuildLock(Path(store_path), wait_seconds):
        with open_store(store_path) as store:
            yield store


async def run_and_refresh(builder: Builder) -> BuildReport:
    """Run one build on a store held by `writable_store`, then bring the
    files questions read up to date."""
    report = await builder.run()
    # Questions read vectors from this file; bring it up to date now rather
    # than on the first question (an interrupted build leaves it behind, and
    # the next question or build catches up). A store that searches its own
    # vectors (pgvector) needs no file; asking it also adds rows that
    # builders which started before its vector table existed left out.
    if builder.store.server_search() is None:
        refresh_vectors(builder.store, builder.store.vectors_file)
    # Likewise the BM25 index of summaries and nodes (fused and bm25
    # questions, any store): made here, not by the first question.
    refresh_evidence(builder.store)
    return report
