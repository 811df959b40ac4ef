"""`docsum build`: make the store match the folder.

New files are added, changed ones re-split and re-summarized, vanished ones
removed, unchanged ones cost nothing. Each finished document (nodes, summary,
embedding) is committed in its own transaction the moment it is done, so a run
killed at any point loses only the documents still in flight, and the next run
picks up the rest.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from docsum.budget import PromptBudget
from docsum.errors import LLMError, LoadError
from docsum.lexical import LEXICAL_EMBED_MODEL, lexical_vectors
from docsum.llm import LLM, estimated_cost, track_calls
from docsum.load import FoundFile, LoadedDocument, discover, load_file
from docsum.prompts import DEFAULT_SUMMARY_QUERY, SUMMARY_LANGUAGE_SUFFIX, TREE_SUMMARIZE_PROMPT, PromptTemplate
from docsum.retrieve import summary_index_text
from docsum.schema import CallRecord, Usage
from docsum.split import split_document
from docsum.store import BuildLock, DocumentRecord, NodeRecord, Store, make_doc_id
from docsum.synthesize import TreeSummarize, planned_calls

log = logging.getLogger("docsum")

SPLITTER_VERSION = "1"
READ_BLOCK = 1 << 20


@dataclass
class BuildOptions:
    paths: list[Path]
    dry_run: bool = False
    prune: bool = True
    wait_seconds: float = 0.0
    summary_query: str = DEFAULT_SUMMARY_QUERY
    summary_template: PromptTemplate | None = None
    summary_language: str | None = None
    chunk_size: int = 1024
    chunk_overlap: int = 200
    follow_symlinks: bool = False


@dataclass
class FileOutcome:
    path: str
    action: str  # added | updated | unchanged | removed | failed | planned
    error: str = ""
    nodes: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    warnings: list[str] = field(default_factory=list)


@dataclass
class BuildReport:
    store: str
    counts: dict[str, int] = field(default_factory=lambda: {k: 0 for k in ("added", "updated", "unchanged", "removed", "failed")})
    failures: list[dict[str, str]] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    elapsed_s: float = 0.0
    dry_run: bool = False
    plan: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    model: str = ""

    @property
    def usage(self) -> Usage:
        return Usage.of(self.calls)

    def as_dict(self) -> dict[str, Any]:
        usage = self.usage
        out: dict[str, Any] = {
            "store": self.store,
            "documents": dict(self.counts),
            "failures": self.failures,
            "usage": usage.as_dict(),
            "estimated_cost_usd": estimated_cost(self.model, usage.prompt_tokens, usage.completion_tokens),
            "elapsed_s": round(self.elapsed_s, 3),
            "skipped": self.skipped,
        }
        if self.dry_run:
            out["dry_run"] = True
            out["plan"] = self.plan
            out["planned"] = {
                "llm_calls": sum(p["llm_calls"] for p in self.plan),
                "prompt_tokens": sum(p["prompt_tokens"] for p in self.plan),
            }
        return out


class BuildReporter(Protocol):
    def start(self, total_files: int, to_process: int) -> None: ...
    def file_done(self, outcome: FileOutcome) -> None: ...
    def finish(self) -> None: ...


class SilentReporter:
    def start(self, total_files: int, to_process: int) -> None:
        pass

    def file_done(self, outcome: FileOutcome) -> None:
        pass

    def finish(self) -> None:
        pass


def _fingerprint(parts: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def summary_template_for(options: BuildOptions) -> tuple[PromptTemplate, str]:
    """The summary prompt and query for these options."""
    template = (options.summary_template or TREE_SUMMARIZE_PROMPT).with_kind("summary", "summary")
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


class Builder:
    def __init__(self, store: Store, llm: LLM, options: BuildOptions, reporter: BuildReporter | None = None) -> None:
        self.store = store
        self.llm = llm
        self.options = options
        self.reporter = reporter or SilentReporter()
        self.split_fp, self.summary_fp = fingerprints(llm, options)
        self.template, self.query = summary_template_for(options)
        self.summarizer = TreeSummarize(llm, summary_template=self.template)
        self.budget = PromptBudget(llm.metadata)

    # -- deciding what to do ----------------------------------------------
    def reconcile(self) -> tuple[list[_Work], list[DocumentRecord], list[FileOutcome], dict[str, int]]:
        """Split the folder into work to do, documents to remove, and outcomes
        already known (unchanged files, discovery errors)."""
        discovery = discover(self.options.paths, follow_symlinks=self.options.follow_symlinks)
        stored = {d.doc_id: d for d in self.store.list_documents()}
        todo: list[_Work] = []
        known: list[FileOutcome] = []
        seen: set[str] = set()
        for err in discovery.errors:
            known.append(FileOutcome(err.path, "failed", err.reason))
        for found in discovery.files:
            root = str(found.root)
            doc_id = make_doc_id(root, found.relpath)
            seen.add(doc_id)
            try:
                st = os.stat(found.path)
            except OSError as exc:
                known.append(FileOutcome(found.relpath, "failed", f"cannot stat: {exc.strerror or exc}"))
                continue
            existing = stored.get(doc_id)
            if existing is not None and self._unchanged(existing, found.path, st):
                known.append(FileOutcome(found.relpath, "unchanged"))
                continue
            todo.append(_Work(found, doc_id, existing, st.st_size, st.st_mtime_ns))
        roots = {str(p.resolve()) for p in self.options.paths if p.exists()}
        roots |= {str(p.resolve().parent) for p in self.options.paths if p.is_file()}
        to_remove = []
        if self.options.prune:
            # Only documents under the roots of this build: building another
            # folder into the same store must not wipe the first one.
            to_remove = [d for d in stored.values() if d.doc_id not in seen and d.root in roots]
        skipped = {"hidden": discovery.skipped_hidden, "unsupported": discovery.skipped_unsupported}
        return todo, to_remove, known, skipped

    def _unchanged(self, doc: DocumentRecord, path: Path, st: os.stat_result) -> bool:
        if doc.split_fingerprint != self.split_fp or doc.summary_fingerprint != self.summary_fp:
            return False
        if doc.size == st.st_size and doc.mtime_ns == st.st_mtime_ns:
            return True
        if doc.size != st.st_size:
            return False
        # Same size, new mtime (a touch, a copy, a checkout): compare content.
        try:
            return sha256_of(path) == doc.sha256
        except OSError:
            return False

    # -- doing it -----------------------------------------------------------
    async def run(self) -> BuildReport:
        started = time.monotonic()
        report = BuildReport(str(self.store.path), dry_run=self.options.dry_run, model=self.llm.metadata.model)
        todo, to_remove, known, report.skipped = self.reconcile()
        self.reporter.start(len(todo) + len(known), len(todo))
        for outcome in known:
            self._count(report, outcome)
            self.reporter.file_done(outcome)

        if self.options.dry_run:
            for work in todo:
                outcome = await self._plan(work)
                report.plan.append(
                    {"path": work.found.relpath, "action": outcome.action, "nodes": outcome.nodes,
                     "llm_calls": outcome.calls, "prompt_tokens": outcome.prompt_tokens, "error": outcome.error}
                )
                self.reporter.file_done(outcome)
            for doc in to_remove:
                report.plan.append({"path": doc.path, "action": "remove", "nodes": 0, "llm_calls": 0, "prompt_tokens": 0, "error": ""})
            report.elapsed_s = time.monotonic() - started
            self.reporter.finish()
            return report

        run_id = self.store.start_run("build", {"paths": [str(p) for p in self.options.paths], "model": self.llm.metadata.model})
        status = "interrupted"
        with track_calls() as calls:
            try:
                for doc in to_remove:
                    self.store.remove_document(doc.doc_id)
                    outcome = FileOutcome(doc.path, "removed")
                    self._count(report, outcome)
                    self.reporter.file_done(outcome)
                # Bound documents in memory at once; requests in flight are bounded
                # separately (and process-wide) by the LLM's own limit.
                gate = asyncio.Semaphore(max(2, self.llm.concurrency * 2))

                async def one(work: _Work) -> None:
                    async with gate:
                        outcome = await self._process(work)
                    self._count(report, outcome)
                    self.reporter.file_done(outcome)

                await asyncio.gather(*(one(w) for w in todo))
                status = "ok" if not report.counts["failed"] else "partial"
            finally:
                report.calls = list(calls)
                report.elapsed_s = time.monotonic() - started
                for call in report.calls:
                    self.store.record_call(run_id, call.kind, call.model, call.prompt_tokens, call.completion_tokens, call.seconds, call.ok)
                self.store.finish_run(run_id, status, report.usage.as_dict(), dict(report.counts))
                self.reporter.finish()
        return report

    def _count(self, report: BuildReport, outcome: FileOutcome) -> None:
        if outcome.action in report.counts:
            report.counts[outcome.action] += 1
        if outcome.action == "failed":
            report.failures.append({"path": outcome.path, "error": outcome.error})

    async def _load_and_split(self, work: _Work) -> tuple[LoadedDocument, list[Any], str]:
        loaded = await asyncio.to_thread(load_file, work.found.path)
        sha = await asyncio.to_thread(sha256_of, work.found.path)
        chunks = await asyncio.to_thread(
            split_document, loaded.text, self.llm.metadata.tokenizer, self.options.chunk_size,
            self.options.chunk_overlap, loaded.page_starts or None,
        )
        return loaded, chunks, sha

    async def _plan(self, work: _Work) -> FileOutcome:
        action = "update" if work.existing else "add"
        try:
            loaded, chunks, _ = await self._load_and_split(work)
        except LoadError as exc:
            return FileOutcome(work.found.relpath, "failed", exc.reason)
        calls = planned_calls(self.summarizer, self.query, [loaded.text]) or 0
        template = self.template.partial_format(query_str=self.query)
        parts = self.budget.repack(template, [loaded.text])
        prompt_tokens = sum(self.budget.prompt_tokens(template) + self.budget.tokenizer.count(p) for p in parts)
        # Upper tree levels read the level below's answers (each up to the output budget).
        prompt_tokens += (calls - len(parts)) * (self.budget.prompt_tokens(template) + self.llm.metadata.num_output) if len(parts) > 1 else 0
        return FileOutcome(work.found.relpath, action, nodes=len(chunks), calls=calls, prompt_tokens=prompt_tokens)

    async def _process(self, work: _Work) -> FileOutcome:
        rel = work.found.relpath
        root = str(work.found.root)
        try:
            loaded, chunks, sha = await self._load_and_split(work)
        except LoadError as exc:
            self.store.record_failure(root, rel, exc.reason)
            return FileOutcome(rel, "failed", exc.reason)
        try:
            with track_calls() as calls:
                summary = await self.summarizer.aget_response(self.query, [loaded.text])
                assert isinstance(summary, str)
                summary = summary.strip()
                if not summary:
                    raise LLMError("the model returned an empty summary")
                embedding, embed_model = await self._embed(summary_index_text(rel, loaded.title, summary))
        except LLMError as exc:
            self.store.record_failure(root, rel, f"summary failed: {exc}")
            return FileOutcome(rel, "failed", f"summary failed: {exc}")
        tok = self.llm.metadata.tokenizer
        record = DocumentRecord(
            doc_id=work.doc_id,
            path=rel,
            root=root,
            size=work.size,
            mtime_ns=work.mtime_ns,
            sha256=sha,
            title=loaded.title,
            kind=loaded.kind,
            token_count=sum(c.token_count for c in chunks) if chunks else tok.count(loaded.text),
            page_count=len(loaded.page_starts) or None,
            split_fingerprint=self.split_fp,
            summary_fingerprint=self.summary_fp,
            summary=summary,
            summary_model=self.llm.metadata.model,
            embedding=embedding,
            embedding_model=embed_model,
        )
        nodes = [
            NodeRecord(work.doc_id, i, c.text, c.start_char, c.end_char, tuple(c.pages), c.token_count)
            for i, c in enumerate(chunks)
        ]
        self.store.put_document(record, nodes)
        return FileOutcome(
            rel, "updated" if work.existing else "added", nodes=len(nodes), calls=len(calls),
            prompt_tokens=sum(c.prompt_tokens for c in calls), warnings=loaded.warnings,
        )

    async def _embed(self, text: str) -> tuple[Any, str]:
        model = self.llm.metadata.embed_model
        if model == LEXICAL_EMBED_MODEL:
            return lexical_vectors([text])[0], LEXICAL_EMBED_MODEL
        try:
            return (await self.llm.aembed([text]))[0], model
        except LLMError as exc:
            # Summaries are the expensive part; do not throw one away because the
            # embedding endpoint failed. Lexical vectors keep retrieval working.
            log.warning("embedding failed (%s); storing lexical vectors for this summary", exc)
            return lexical_vectors([text])[0], LEXICAL_EMBED_MODEL


async def build(store_path: Path, llm: LLM, options: BuildOptions, reporter: BuildReporter | None = None) -> BuildReport:
    """Reconcile the store at `store_path` with `options.paths`. Holds the
    store's build lock for the whole run (a dry run takes no lock and writes
    nothing)."""
    if options.dry_run:
        if not store_path.exists():
            with Store.open(store_path, create=True) as store:
                return await Builder(store, llm, options, reporter).run()
        with Store.open(store_path, create=False, readonly=True) as store:
            return await Builder(store, llm, options, reporter).run()
    with BuildLock(store_path, options.wait_seconds):
        with Store.open(store_path) as store:
            return await Builder(store, llm, options, reporter).run()
