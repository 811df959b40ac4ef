"""`docsum build`: make the store match the folder.

New files are added, changed ones re-split and re-summarized, vanished ones
removed, unchanged ones cost nothing. Each finished document (nodes, summary,
embedding) is committed in its own transaction the moment it is done, so a run
killed at any point loses only the documents still in flight, and the next run
picks up the rest.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from docsum.build.embedbatch import SummaryEmbedder
from docsum.build.report import BuildOptions, BuildReport, BuildReporter, FileOutcome, FileWarning, SilentReporter
from docsum.errors import ConfigError, ContextLengthError, LLMError, LoadError
from docsum.ingest.discover import FoundFile, SkippedFile, discover, exclusion_spec, printable_name
from docsum.ingest.formats import SUPPORTED_SUFFIXES
from docsum.ingest.parsing import Parsed, ParsePool, ParseRequest, TextCache, unexpected_reason
from docsum.ingest.split import Chunk
from docsum.ingest.textquality import garbage_reason
from docsum.lexical import LEXICAL_EMBED_MODEL, lexical_vectors
from docsum.models.llm import LLM, track_calls
from docsum.models.prompts import (
    DOCUMENT_SUMMARY_PROMPT,
    KIND_DOCUMENT_SUMMARY,
    SUMMARY_LANGUAGE_SUFFIX,
    PromptTemplate,
)
from docsum.models.tokens import Tokenizer
from docsum.paths import cache_dir
from docsum.query.budget import PromptBudget
from docsum.query.evidence import refresh_evidence
from docsum.query.retrieve import summary_index_text
from docsum.query.synthesizers import TreeSummarize
from docsum.schema import CallRecord
from docsum.store.base import DocumentStore, StoreLocation, display_location, is_postgres, open_store, store_exists
from docsum.store.lock import BuildLock
from docsum.store.records import CallRow, DocumentRecord, NodeRecord, StoredVersion, make_doc_id
from docsum.store.sqlite import Store
from docsum.store.vectors import refresh_vectors

log = logging.getLogger("docsum")

SPLITTER_VERSION = "1"
# How often a builder looks again at documents another builder holds a claim on.
CLAIM_POLL_SECONDS = 0.5
READ_BLOCK = 1 << 20


def _fingerprint(parts: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def summary_template_for(options: BuildOptions) -> tuple[PromptTemplate, str]:
    """The summary prompt and query for these options."""
    # Its own kind: the offline engine writes a document summary for it, and
    # a question-focused answer (which may decline) for tree_summarize.
    template = (options.summary_template or DOCUMENT_SUMMARY_PROMPT).with_kind(KIND_DOCUMENT_SUMMARY, "summary")
    query = options.summary_query
    if options.summary_language:
        query = query.rstrip() + SUMMARY_LANGUAGE_SUFFIX.format(language=options.summary_language)
    return template, query


def fingerprints(llm: LLM, options: BuildOptions) -> tuple[str, str]:
    meta = llm.metadata
    template, query = summary_template_for(options)
    split_fp = _fingerprint(
        {"v": SPLITTER_VERSION, "size": options.chunk_size, "overlap": options.chunk_overlap, "tok": meta.tokenizer.name}
    )
    summary_fp = _fingerprint(
        {
            "engine": meta.engine,
            "engine_version": getattr(llm, "version", ""),
            "model": meta.model,
            "template": template.template,
            "system": template.system,
            "query": query,
            "window": meta.context_window,
            "output": meta.num_output,
            "embed": meta.embed_model,
            "index_text": 2,  # what is embedded: file name + title + summary
        }
    )
    return split_fp, summary_fp


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(READ_BLOCK):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class _Work:
    found: FoundFile
    doc_id: str
    existing: DocumentRecord | None
    size: int
    mtime_ns: int
    # True: the content and the summary settings are unchanged, only the node
    # split is not: re-split and keep the stored summary (no LLM call).
    resplit_only: bool = False
    # The opened file must lie under this folder (a symlink swapped in after
    # discovery is not followed out of the tree); None: no such check.
    inside: Path | None = None


@dataclass
class _Reconciled:
    todo: list[_Work]
    to_remove: list[DocumentRecord]
    known: list[FileOutcome]  # unchanged, skipped and discovery failures
    skipped: dict[str, int]
    skipped_entries: list[SkippedFile]
    touched: list[tuple[str, int, int]]  # (doc_id, size, mtime_ns): same content, new stat
    roots: set[str]  # folders whose vanished documents and failures are pruned
    seen: set[tuple[str, str]]  # (root, relpath) of every file found
    protected: set[str]  # folders and files nothing below which may be pruned


class Builder:
    def __init__(self, store: DocumentStore, llm: LLM, options: BuildOptions, reporter: BuildReporter | None = None) -> None:
        self.store = store
        self.llm = llm
        self.options = options
        self.reporter = reporter or SilentReporter()
        self.split_fp, self.summary_fp = fingerprints(llm, options)
        self.template, self.query = summary_template_for(options)
        self.summarizer = TreeSummarize(llm, summary_template=self.template)
        self.budget = PromptBudget(llm.metadata)
        # Set per run: its id, and which calls (by identity) are already in the store.
        self._run_id = 0
        self._recorded: set[int] = set()
        self._embed_dims: dict[str, int] = {}  # embedding model -> size of the vectors the store holds
        self._embedder = SummaryEmbedder(llm)  # replaced per run (its semaphore belongs to the run's loop)

    # -- deciding what to do ----------------------------------------------
    async def reconcile(self) -> _Reconciled:
        """Split the folder into work to do, documents to remove, and outcomes
        already known (unchanged files, skipped symlinks, discovery errors).

        Walking and hashing run off the event loop, so SIGINT/SIGTERM stay
        responsive while thousands of touched files are re-hashed."""
        discovery = await asyncio.to_thread(
            discover, self.options.paths, follow_symlinks=self.options.follow_symlinks, exclude=self.options.exclude
        )
        # Without summaries: the comparison needs sizes, times and hashes only.
        stored = {d.doc_id: d for d in self.store.iter_documents(with_summaries=False)}
        todo: list[_Work] = []
        known: list[FileOutcome] = []
        touched: list[tuple[str, int, int]] = []
        seen_ids: set[str] = set()
        seen: set[tuple[str, str]] = set()
        for err in discovery.errors:
            known.append(FileOutcome(err.path, "failed", err.reason))
        for path, reason in discovery.skipped:
            known.append(FileOutcome(path, "skipped", reason))
        where = _StoredRoots(stored.values())
        given_dirs = {str(p.resolve()) for p in self.options.paths if p.is_dir()}
        for found in discovery.files:
            # Files found by walking a given folder must still be inside it
            # when opened (README Guarantee 8); a file named directly is read
            # wherever its symlink leads, as is everything with --follow-symlinks.
            inside = found.root if not self.options.follow_symlinks and str(found.root) in given_dirs else None
            found = where.canonical(found)
            root = str(found.root)
            doc_id = make_doc_id(root, found.relpath)
            seen_ids.add(doc_id)
            seen.add((root, found.relpath))
            try:
                st = found.stat if found.stat is not None else os.stat(found.path)
            except OSError as exc:
                known.append(FileOutcome(found.relpath, "failed", f"cannot stat: {exc.strerror or exc}"))
                continue
            existing = stored.get(doc_id)
            state = await self._classify(existing, found.path, st) if existing is not None else "changed"
            if state in ("unchanged", "touched"):
                known.append(FileOutcome(found.relpath, "unchanged"))
                if state == "touched":
                    touched.append((doc_id, st.st_size, st.st_mtime_ns))
                continue
            todo.append(_Work(found, doc_id, existing, st.st_size, st.st_mtime_ns, resplit_only=state == "resplit", inside=inside))
        # Only folders given to this build are pruned: building another folder
        # into the same store must not wipe the first one, and a file named
        # directly (`docsum build folder/a.txt`) must not remove its siblings.
        roots = {str(p.resolve()) for p in self.options.paths if p.is_dir()}
        # What the walk could not see is not gone: an unreadable folder, a
        # link to a share that is not mounted (see docsum.ingest.discover).
        protected = set(discovery.protected)
        to_remove = []
        if self.options.prune:
            vanished = [d for d in stored.values() if d.doc_id not in seen_ids and _inside(d.root, d.path, roots)]
            protected |= self._guard_empty(discovery.empty_folders, vanished, known)
            to_remove = [d for d in vanished if not _inside(d.root, d.path, protected)]
        skipped = {
            "hidden": discovery.skipped_hidden,
            "unsupported": discovery.skipped_unsupported,
            "excluded": discovery.skipped_excluded,
            "symlinks": len(discovery.skipped),
        }
        return _Reconciled(todo, to_remove, known, skipped, discovery.skipped_files, touched, roots, seen, protected)

    def _guard_empty(self, empty_folders: list[str], vanished: list[DocumentRecord], known: list[FileOutcome]) -> set[str]:
        """Folders that are empty now although the store holds documents from
        them: an unmounted share or a failed sync looks exactly like this, and
        pruning would throw away every summary paid for.  Nothing below them is
        removed and each is reported as failed (exit 3) unless the options say
        emptying them is wanted (``prune_empty``)."""
        if self.options.prune_empty or not vanished:
            return set()
        guarded: set[str] = set()
        for folder in sorted(empty_folders, key=len):  # outermost first: one line per empty tree
            if _inside(folder, "", guarded):
                continue
            held = sum(1 for d in vanished if _inside(d.root, d.path, {folder}))
            if held:
                guarded.add(folder)
                known.append(FileOutcome(folder, "failed", (
                    f"no document found in this folder but the store holds {held} from it; nothing removed "
                    "(an unmounted share?); pass --prune-empty to remove them"
                )))
        return guarded

    async def _classify(self, doc: DocumentRecord, path: Path, st: os.stat_result) -> str:
        """unchanged | touched (same content, new mtime) | resplit (only the
        split settings changed) | changed (content or summary settings)."""
        if doc.summary_fingerprint != self.summary_fp:
            return "changed"
        if doc.size != st.st_size:
            return "changed"
        if doc.mtime_ns != st.st_mtime_ns:
            # Same size, new mtime (a touch, a copy, a checkout): compare content.
            try:
                if await asyncio.to_thread(sha256_of, path) != doc.sha256:
                    return "changed"
            except OSError:
                return "changed"  # _process reports why it cannot be read
        if doc.split_fingerprint != self.split_fp:
            return "resplit"
        return "unchanged" if doc.mtime_ns == st.st_mtime_ns else "touched"

    # -- doing it -----------------------------------------------------------
    async def run(self) -> BuildReport:
        options = self.options
        self._pool = ParsePool(options.jobs, options.parse_timeout_s, options.parse_memory_mb)
        try:
            report = await self._run()
        finally:
            # Also on SIGINT/SIGTERM (a cancellation): workers still parsing
            # are killed, not waited for.
            self._pool.close()
        if options.use_cache:
            await asyncio.to_thread(TextCache(self._cache_dir()).prune)
        return report

    def _cache_dir(self) -> Path:
        return self.options.cache_dir or (cache_dir() / "text")

    async def _run(self) -> BuildReport:
        started = time.monotonic()
        report = BuildReport(self.store.label, dry_run=self.options.dry_run, model=self.llm.metadata.price_key, num_output=self.llm.metadata.num_output)
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
            async def plan_one(work: _Work) -> FileOutcome:
                outcome = await self._plan(work)
                self.reporter.file_done(outcome)  # as each finishes: progress from the first file
                return outcome

            # Files are parsed in parallel (and their text cached for the build
            # that follows); the plan lists them in folder order.
            for work, outcome in zip(todo, await asyncio.gather(*(plan_one(w) for w in todo))):
                report.plan.append(dataclasses.replace(outcome, path=work.found.relpath))
            report.plan.extend(FileOutcome(doc.path, "remove") for doc in to_remove)
            report.elapsed_s = time.monotonic() - started
            self.reporter.finish()
            return report

        # We hold the build lock: a build still marked running was killed.
        self.store.close_abandoned_runs("build")
        run_id = self.store.start_run("build", {"paths": [str(p) for p in self.options.paths], "model": self.llm.metadata.model})
        status = "interrupted"
        self._run_id, self._recorded = run_id, set()
        recorded = self._recorded
        with track_calls() as calls:
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
                        if (_inside(failure["root"], failure["path"], plan.roots)
                                and not _inside(failure["root"], failure["path"], plan.protected)
                                and (failure["root"], failure["path"]) not in plan.seen):
                            self.store.clear_failure(failure["root"], failure["path"])
                # Bound documents in memory at once; requests in flight are bounded
                # separately (and process-wide) by the LLM's own limit.
                limits = self.options.limits
                gate = asyncio.Semaphore(limits.documents)
                embedder = self._embedder = SummaryEmbedder(self.llm, capacity=limits.embed_batch)
                breaker = _Breaker()

                deferred: list[_Work] = []
                busy: list[_Work] = []  # claimed by another builder sharing the store
                stored_elsewhere = _StoredElsewhere(self.store, self.split_fp, self.summary_fp)

                async def one(work: _Work) -> None:
                    # The gate was taken by run_all() for this document.
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
                                        outcome = await self._process(work, release_gate)
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

                async def run_all(works: list[_Work]) -> None:
                    """Start each document when the gate lets it in, not all at
                    once: 100,000 waiting tasks would hold memory for nothing."""
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
                        for task in running:
                            task.cancel()

                await run_all(todo)
                # A success that finished after the trip (documents complete out
                # of order) shows the server works: the deferred documents run
                # now. Each pass starts at least one document, so this ends.
                while deferred and not breaker.tripped:
                    batch, deferred[:] = list(deferred), []
                    await run_all(batch)
                # Documents other builders held: wait until each is stored by
                # them (then it is done) or its claim is released or taken
                # over (a dead builder's), and do it then.
                while busy and not breaker.tripped:
                    await asyncio.sleep(CLAIM_POLL_SECONDS)
                    batch, busy[:] = list(busy), []
                    await run_all(batch)
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

    def _call_rows(self, calls: list[CallRecord]) -> list[CallRow]:
        """The calls to commit with a document, less those already written."""
        rows = [
            (self._run_id, c.kind, c.model, c.prompt_tokens, c.completion_tokens, c.seconds, c.ok)
            for c in calls
            if id(c) not in self._recorded
        ]
        return rows

    def _record_call(self, run_id: int, call: CallRecord, recorded: set[int]) -> None:
        if id(call) in recorded:
            return
        recorded.add(id(call))
        self.store.record_call(run_id, call.kind, call.model, call.prompt_tokens, call.completion_tokens, call.seconds, call.ok)

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

    def _parse_request(self, work: _Work) -> ParseRequest:
        options = self.options
        tokenizer = self.llm.metadata.tokenizer
        cache = self._cache_dir()
        return ParseRequest(
            path=str(work.found.path),
            inside=str(work.inside) if work.inside is not None else None,
            encoding=tokenizer.encoding.name,
            margin=tokenizer.margin,
            chunk_size=options.chunk_size,
            chunk_overlap=options.chunk_overlap,
            cache_dir=str(cache) if options.use_cache else None,
        )

    async def _load_and_split(self, work: _Work) -> Parsed:
        """Read (once), extract and split the file in a worker process."""
        parsed = await self._pool.parse(self._parse_request(work), str(work.found.path), work.size)
        # Garbage text (a broken font encoding) fails the file like unreadable
        # bytes do: reported with its reason, any previous summary kept.
        unreadable = garbage_reason(parsed.loaded.text)
        if unreadable:
            raise LoadError(work.found.relpath, unreadable)
        return parsed

    async def _plan(self, work: _Work) -> FileOutcome:
        action = "update" if work.existing else "add"
        try:
            parsed = await self._load_and_split(work)
            loaded, chunks = parsed.loaded, parsed.chunks
        except LoadError as exc:
            return FileOutcome(work.found.relpath, "failed", exc.reason)
        except Exception as exc:  # noqa: BLE001 - same rule as _process
            return FileOutcome(work.found.relpath, "failed", unexpected_reason(exc))
        if work.resplit_only:
            return FileOutcome(work.found.relpath, action, nodes=len(chunks), extractor=loaded.extractor)
        calls = self.summarizer.plan(self.query, [loaded.text]) or 0
        return FileOutcome(
            work.found.relpath, action, nodes=len(chunks), calls=calls,
            prompt_tokens=self._planned_prompt_tokens(loaded.text), extractor=loaded.extractor,
        )

    def _planned_prompt_tokens(self, text: str) -> int:
        """Prompt tokens the summary of `text` will send, counted exactly as
        the engines count a prompt locally (the rendered chat messages with
        their per-message overhead), so for a document that fits one prompt
        the plan equals the build. Upper tree levels read the answers of the
        level below, unknown before they exist: each answer is counted at the
        full output budget (the server stops there), an upper bound."""
        template = self.template.partial_format(query_str=self.query)
        parts = self.budget.repack(template, [text]) or [""]
        tokens = sum(self.llm.count_messages(template.format_messages(context_str=p)) for p in parts)
        overhead = self.llm.count_messages(template.format_messages(context_str=""))
        per_answer = self.llm.metadata.num_output
        levels = self.summarizer.planned_levels(self.query, [text])
        for below, calls in zip(levels, levels[1:]):
            # `calls` prompts holding the `below` answers of the level under them.
            tokens += calls * overhead + below * (per_answer + 1)  # +1: the blank line joining answers
        return tokens

    def _failed(self, root: str, rel: str, reason: str) -> FileOutcome:
        attempts = self.store.record_failure(root, rel, reason)
        return FileOutcome(rel, "failed", reason, attempts=attempts)

    async def _process(self, work: _Work, release_gate: Callable[[], None] | None = None) -> FileOutcome:
        rel = work.found.relpath
        root = str(work.found.root)
        try:
            parsed = await self._load_and_split(work)
            loaded, chunks = parsed.loaded, parsed.chunks
        except LoadError as exc:
            return self._failed(root, rel, exc.reason)
        except Exception as exc:  # noqa: BLE001
            # A bug reading one odd file must not cost the other thousand
            # documents of the run: report it as this file's failure.
            log.debug("reading %s failed", rel, exc_info=True)
            return self._failed(root, rel, unexpected_reason(exc))
        if work.resplit_only:
            current = next((d for d in self.store.find_documents(work.doc_id) if d.doc_id == work.doc_id), None)
            if current is not None:  # else removed meanwhile (`docsum remove` does not take the lock): summarize anew
                return self._resplit(work, current, parsed)
        try:
            with track_calls() as calls:
                summary = await self.summarizer.aget_response(self.query, [loaded.text])
                assert isinstance(summary, str)
                summary = summary.strip()
                if not summary:
                    raise LLMError("the model returned an empty summary")
                embedding, embed_model = await self._embed(summary_index_text(rel, loaded.title, summary), rel, release_gate)
        except LLMError as exc:
            outcome = self._failed(root, rel, f"summary failed: {exc}")
            # A prompt too long for the model is this document's problem; any
            # other server failure may be the server's (see _Breaker).
            outcome.llm_failed = not isinstance(exc, ContextLengthError)
            return outcome
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
            # A malformed answer the client did not catch: this document failed.
            log.debug("summarizing %s failed", rel, exc_info=True)
            return self._failed(root, rel, f"summary failed: {unexpected_reason(exc)}")
        record = DocumentRecord(
            doc_id=work.doc_id,
            path=rel,
            root=root,
            # From the same read as the text: a file rewritten during the
            # build is seen as changed by the next one.
            size=parsed.size,
            mtime_ns=parsed.mtime_ns,
            sha256=parsed.sha256,
            title=loaded.title,
            kind=loaded.kind,
            token_count=_token_count(parsed, self.llm.metadata.tokenizer),
            page_count=len(loaded.page_starts) or None,
            split_fingerprint=self.split_fp,
            summary_fingerprint=self.summary_fp,
            summary=summary,
            summary_model=self.llm.metadata.model,
            embedding=embedding,
            embedding_model=embed_model,
        )
        nodes = _node_records(work.doc_id, chunks)
        try:
            self.store.put_document(record, nodes, self._call_rows(calls))
        except UnicodeEncodeError as exc:
            # Text SQLite cannot hold (a lone surrogate from a server's JSON
            # or a document) belongs to this document: it fails alone, the
            # store is untouched (the write is one transaction) and the build goes on.
            return self._failed(root, rel, f"cannot be stored: text with an invalid character ({exc.reason})")
        self._recorded.update(id(c) for c in calls)  # committed: not to be written again
        return FileOutcome(
            rel, "updated" if work.existing else "added", nodes=len(nodes), calls=len(calls),
            prompt_tokens=sum(c.prompt_tokens for c in calls), warnings=loaded.warnings, extractor=loaded.extractor,
        )

    def _resplit(self, work: _Work, current: DocumentRecord, parsed: Parsed) -> FileOutcome:
        """Only the split settings changed: new nodes, the stored summary and
        embedding kept (the summary reads the whole text, not the nodes)."""
        rel = work.found.relpath
        loaded, chunks = parsed.loaded, parsed.chunks
        record = dataclasses.replace(
            current,
            size=parsed.size,
            mtime_ns=parsed.mtime_ns,
            sha256=parsed.sha256,
            token_count=_token_count(parsed, self.llm.metadata.tokenizer),
            page_count=len(loaded.page_starts) or None,
            split_fingerprint=self.split_fp,
            updated_at="",
        )
        nodes = _node_records(work.doc_id, chunks)
        self.store.put_document(record, nodes)
        return FileOutcome(rel, "updated", nodes=len(nodes), warnings=loaded.warnings, extractor=loaded.extractor)

    async def _embed(self, text: str, rel: str = "", release_gate: Callable[[], None] | None = None) -> tuple[Any, str]:
        model = self.llm.metadata.embed_model
        if model == LEXICAL_EMBED_MODEL:
            return lexical_vectors([text])[0], LEXICAL_EMBED_MODEL
        try:
            vector = await self._embedder.embed(text, release_gate)
            expected = self._embed_dim(model)
            if expected is not None and vector.shape[-1] != expected:
                # One vector of another size makes the whole summary matrix
                # unusable (ask would fall back to lexical scoring for all).
                raise LLMError(
                    f"the embedding server returned {vector.shape[-1]} dimensions, "
                    f"the store's other {model} vectors have {expected}"
                )
            self._embed_dims.setdefault(model, int(vector.shape[-1]))
            return vector, model
        except (LLMError, ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
            # Summaries are the expensive part; do not throw one away because the
            # embedding endpoint failed or answered nonsense. Lexical vectors
            # keep retrieval working.
            reason = str(exc) if isinstance(exc, LLMError) else unexpected_reason(exc)
            log.warning("embedding failed%s (%s); storing lexical vectors for this summary", f" for {rel}" if rel else "", reason)
            return lexical_vectors([text])[0], LEXICAL_EMBED_MODEL

    def _embed_dim(self, model: str) -> int | None:
        """Size of the `model` vectors already in the store (None: none yet)."""
        if model not in self._embed_dims:
            dim = self.store.embedding_dim(model)
            if dim is None:
                return None
            self._embed_dims[model] = dim
        return self._embed_dims[model]

    def _done_elsewhere(self, work: _Work) -> FileOutcome | None:
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

    def _remove(self, doc: DocumentRecord) -> bool:
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


class _StoredElsewhere:
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

    def has(self, work: _Work) -> bool:
        if not self._store.shared:
            return False
        now = time.monotonic()
        if self._token is None or now - self._checked >= CLAIM_POLL_SECONDS:
            self._token, written = self._store.written_since(self._token)
            self._versions.update(written)
            self._checked = now
        return self._versions.get(work.doc_id) == StoredVersion(work.size, work.mtime_ns, *self._wanted)


class _StoredRoots:
    """Keys a found file the way the store already knows it.

    A document is keyed by (build root, path below it). Building `docs` and
    later `docs/sub` (or the other way round, or naming one file) reaches the
    same files from different roots; keyed naively they would be stored, paid
    for and retrieved twice. A file is therefore keyed under a stored root
    that contains it: the one that already holds it, else the outermost."""

    def __init__(self, documents: Iterable[DocumentRecord]) -> None:
        self.keys = {(d.root, d.path) for d in documents}
        # Outermost first: "/a" sorts before "/a/b".
        self.roots = sorted({d.root for d in documents}, key=lambda r: (len(PurePosixPath(r).parts), r))
        # Per build root, the stored roots that can contain its files (see
        # _plan). Path arithmetic once per root, string operations per file:
        # at 100,000 files the per-file PurePosixPath work took seconds.
        self._plans: dict[str, list[tuple[str, str, bool]]] = {}

    def _plan(self, base: str) -> list[tuple[str, str, bool]]:
        """(stored root, prefix, below) in outermost-first order for every
        stored root on the same branch as `base`: a root containing `base`
        keys base's file `rel` as prefix + rel; a root inside `base` (below)
        holds the files whose rel starts with prefix, keyed without it."""
        here = PurePosixPath(base)
        plan = []
        for root in self.roots:
            if here.is_relative_to(root):
                up = here.relative_to(root).as_posix()
                plan.append((root, "" if up == "." else up + "/", False))
            elif PurePosixPath(root).is_relative_to(here):
                plan.append((root, PurePosixPath(root).relative_to(here).as_posix() + "/", True))
        return plan

    def canonical(self, found: FoundFile) -> FoundFile:
        base = str(found.root)
        plan = self._plans.get(base)
        if plan is None:
            plan = self._plans[base] = self._plan(base)
        candidates = []
        for root, prefix, below in plan:
            if below:
                if not found.relpath.startswith(prefix):
                    continue
                rel = found.relpath[len(prefix):]
            else:
                rel = prefix + found.relpath
            if (root, rel) in self.keys:
                return found if (root, rel) == (base, found.relpath) else dataclasses.replace(found, root=Path(root), relpath=rel)
            candidates.append((root, rel))
        if (base, found.relpath) in self.keys or not candidates:
            return found
        root, rel = candidates[0]
        return dataclasses.replace(found, root=Path(root), relpath=rel)


def _inside(root: str, relpath: str, folders: set[str]) -> bool:
    """Whether the stored file root/relpath lies in one of `folders`."""
    location = PurePosixPath(root, relpath)
    return any(location.is_relative_to(folder) for folder in folders)


class _Breaker:
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


def check_build_options(options: BuildOptions) -> None:
    """Everything about the options that can be wrong, before anything is
    read, locked or pruned (docsum.config.build_options checks them too, so
    the command line reports them before it says anything else)."""
    _check_paths(options.paths)
    exclusion_spec(options.exclude, "--exclude")  # a bad pattern is exit 2 now, not a failed walk


def _check_paths(paths: list[Path]) -> None:
    """A PATH that does not exist is a usage error, reported before anything
    is read, locked or pruned (an unmounted share must not look like an
    empty folder)."""
    if not paths:
        raise ConfigError("give at least one folder or file to build from")
    missing = [printable_name(str(p)) for p in paths if not os.path.lexists(p)]
    if missing:
        raise ConfigError(f"no such file or directory: {', '.join(missing)}")
    # A file named directly is meant to be read: do not skip it in silence.
    unsupported = [printable_name(str(p)) for p in paths if p.is_file() and p.suffix.lower() not in SUPPORTED_SUFFIXES]
    if unsupported:
        kinds = ", ".join(sorted(SUPPORTED_SUFFIXES))
        raise ConfigError(f"unsupported file type: {', '.join(unsupported)} (docsum reads {kinds})")


async def build(store_path: StoreLocation, llm: LLM, options: BuildOptions, reporter: BuildReporter | None = None) -> BuildReport:
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
    if is_postgres(store_path):
        with open_store(store_path) as store:
            return await _run_and_refresh(Builder(store, llm, options, reporter))
    # Refuse a file that is not a docsum store before the lock file is made
    # beside it: a refused --store leaves nothing behind.
    Store.verify(Path(store_path))
    with BuildLock(Path(store_path), options.wait_seconds):
        with open_store(store_path) as store:
            return await _run_and_refresh(Builder(store, llm, options, reporter))


async def _run_and_refresh(builder: Builder) -> BuildReport:
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


def _node_records(doc_id: str, chunks: list[Chunk]) -> list[NodeRecord]:
    """The stored nodes of a document's chunks, in order (new and re-split documents alike)."""
    return [
        NodeRecord(doc_id, i, c.text, c.start_char, c.end_char, tuple(c.pages), c.token_count)
        for i, c in enumerate(chunks)
    ]


def _token_count(parsed: Parsed, tokenizer: Tokenizer) -> int:
    """A document's size in tokens: its chunks' sum, or its text's when it has none."""
    chunks = parsed.chunks
    return sum(c.token_count for c in chunks) if chunks else tokenizer.count(parsed.loaded.text)
