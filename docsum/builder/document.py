"""One document of a build: read and split it (in a worker process),
summarize it, embed the summary, and commit it all in one transaction, or
record why it failed. A dry run asks the same worker for its plan (calls and
prompt tokens) instead.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from docsum.builder.embedbatch import SummaryEmbedder
from docsum.builder.plan import Work, summary_template_for
from docsum.builder.report import BuildOptions, FileOutcome
from docsum.errors import ContextLengthError, LLMError, LoadError
from docsum.ingest.parsepool import ParsePool, default_jobs
from docsum.ingest.parsing import Parsed, ParseRequest, unexpected_reason
from docsum.ingest.split import Chunk
from docsum.ingest.textquality import garbage_reason
from docsum.lexical import LEXICAL_EMBED_MODEL, lexical_vectors
from docsum.models.llm import LLM, track_calls
from docsum.models.tokens import Tokenizer
from docsum.schema import CallRecord
from docsum.store.base import DocumentStore
from docsum.store.records import CallRow, DocumentRecord, NodeRecord, summary_index_text
from docsum.synthesizers import TreeSummarize
from docsum.synthesizers.budget import PromptBudget

log = logging.getLogger("docsum")


class DocumentWorker:
    """Builds documents one at a time (many run concurrently). Set per run:
    `pool` (the parse workers), `embedder` (bound to the run's event loop),
    `run_id`, and `recorded`, the calls (by identity) already in the store."""

    def __init__(
        self, store: DocumentStore, llm: LLM, options: BuildOptions, split_fp: str, summary_fp: str, cache: Path
    ) -> None:
        self.store = store
        self.llm = llm
        self.options = options
        self.split_fp, self.summary_fp = split_fp, summary_fp
        self.cache = cache  # the extracted-text cache
        self.template, self.query = summary_template_for(options)
        self.summarizer = TreeSummarize(llm, summary_template=self.template)
        self.budget = PromptBudget(llm.metadata)
        self.pool: ParsePool | None = None
        self.embedder = SummaryEmbedder(llm, capacity=options.limits.embed_batch)
        self.run_id = 0
        self.recorded: set[int] = set()
        self._embed_dims: dict[str, int] = {}  # embedding model -> size of the vectors the store holds

    def _call_rows(self, calls: list[CallRecord]) -> list[CallRow]:
        """The calls to commit with a document, less those already written."""
        rows = [
            (self.run_id, c.kind, c.model, c.prompt_tokens, c.completion_tokens, c.seconds, c.ok)
            for c in calls
            if id(c) not in self.recorded
        ]
        return rows

    def _parse_request(self, work: Work) -> ParseRequest:
        options = self.options
        tokenizer = self.llm.metadata.tokenizer
        cache = self.cache
        return ParseRequest(
            path=str(work.found.path),
            inside=str(work.inside) if work.inside is not None else None,
            encoding=tokenizer.encoding.name,
            margin=tokenizer.margin,
            chunk_size=options.chunk_size,
            chunk_overlap=options.chunk_overlap,
            cache_dir=str(cache) if options.use_cache else None,
            ocr=options.ocr,
            # The cores shared among the workers reading at once.
            ocr_threads=max(1, default_jobs() // max(1, options.jobs or default_jobs())),
        )

    async def _load_and_split(self, work: Work) -> Parsed:
        """Read (once), extract and split the file in a worker process."""
        assert self.pool is not None, "the run sets the pool"
        parsed = await self.pool.parse(self._parse_request(work), str(work.found.path), work.size)
        # Garbage text (a broken font encoding) fails the file like unreadable
        # bytes do: reported with its reason, any previous summary kept.
        unreadable = garbage_reason(parsed.loaded.text)
        if unreadable:
            raise LoadError(work.found.relpath, unreadable)
        return parsed

    async def plan(self, work: Work) -> FileOutcome:
        action = "update" if work.existing else "add"
        try:
            parsed = await self._load_and_split(work)
            loaded, chunks = parsed.loaded, parsed.chunks
        except LoadError as exc:
            return FileOutcome(work.found.relpath, "failed", exc.reason)
        except Exception as exc:  # noqa: BLE001 - same rule as _process
            return FileOutcome(work.found.relpath, "failed", unexpected_reason(exc))
        if work.resplit_only:
            return FileOutcome(
                work.found.relpath,
                action,
                nodes=len(chunks),
                extractor=loaded.extractor,
                page_origins=loaded.page_origins,
            )
        calls = self.summarizer.plan(self.query, [loaded.text]) or 0
        return FileOutcome(
            work.found.relpath,
            action,
            nodes=len(chunks),
            calls=calls,
            prompt_tokens=self._planned_prompt_tokens(loaded.text),
            extractor=loaded.extractor,
            page_origins=loaded.page_origins,
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

    async def process(self, work: Work, release_gate: Callable[[], None] | None = None) -> FileOutcome:
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
                embedding, embed_model = await self._embed(
                    summary_index_text(rel, loaded.title, summary), rel, release_gate
                )
        except LLMError as exc:
            outcome = self._failed(root, rel, f"summary failed: {exc}")
            # A prompt too long for the model is this document's problem; any
            # other server failure may be the server's (see docsum.builder.schedule.Breaker).
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
            title=loaded.title,
            kind=loaded.kind,
            **self._file_fields(parsed),
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
        self.recorded.update(id(c) for c in calls)  # committed: not to be written again
        return FileOutcome(
            rel,
            "updated" if work.existing else "added",
            nodes=len(nodes),
            calls=len(calls),
            prompt_tokens=sum(c.prompt_tokens for c in calls),
            warnings=loaded.warnings,
            extractor=loaded.extractor,
            page_origins=loaded.page_origins,
        )

    def _resplit(self, work: Work, current: DocumentRecord, parsed: Parsed) -> FileOutcome:
        """Only the split settings changed: new nodes, the stored summary and
        embedding kept (the summary reads the whole text, not the nodes)."""
        rel = work.found.relpath
        loaded, chunks = parsed.loaded, parsed.chunks
        record = dataclasses.replace(current, **self._file_fields(parsed), updated_at="")
        nodes = _node_records(work.doc_id, chunks)
        self.store.put_document(record, nodes)
        return FileOutcome(
            rel,
            "updated",
            nodes=len(nodes),
            warnings=loaded.warnings,
            extractor=loaded.extractor,
            page_origins=loaded.page_origins,
        )

    def _file_fields(self, parsed: Parsed) -> dict[str, Any]:
        """The fields of a document's record that come from its file and its
        split (new and re-split documents alike). From the same read as the
        text: a file rewritten during the build is seen as changed by the next one."""
        return {
            "size": parsed.size,
            "mtime_ns": parsed.mtime_ns,
            "sha256": parsed.sha256,
            "token_count": _token_count(parsed, self.llm.metadata.tokenizer),
            "page_count": len(parsed.loaded.page_starts) or None,
            "page_origins": parsed.loaded.page_origins,
            "split_fingerprint": self.split_fp,
        }

    async def _embed(self, text: str, rel: str = "", release_gate: Callable[[], None] | None = None) -> tuple[Any, str]:
        model = self.llm.metadata.embed_model
        if model == LEXICAL_EMBED_MODEL:
            return lexical_vectors([text])[0], LEXICAL_EMBED_MODEL
        try:
            vector = await self.embedder.embed(text, release_gate)
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
            log.warning(
                "embedding failed%s (%s); storing lexical vectors for this summary",
                f" for {rel}" if rel else "",
                reason,
            )
            return lexical_vectors([text])[0], LEXICAL_EMBED_MODEL

    def _embed_dim(self, model: str) -> int | None:
        """Size of the `model` vectors already in the store (None: none yet)."""
        if model not in self._embed_dims:
            dim = self.store.embedding_dim(model)
            if dim is None:
                return None
            self._embed_dims[model] = dim
        return self._embed_dims[model]


def _node_records(doc_id: str, chunks: list[Chunk]) -> list[NodeRecord]:
    """The stored nodes of a document's chunks, in order (new and re-split documents alike)."""
    return [
        NodeRecord(doc_id, i, c.node_text, c.start_char, c.end_char, tuple(c.pages), c.token_count)
        for i, c in enumerate(chunks)
    ]


def _token_count(parsed: Parsed, tokenizer: Tokenizer) -> int:
    """A document's size in tokens: its chunks' sum, or its text's when it has none."""
    chunks = parsed.chunks
    return sum(c.token_count for c in chunks) if chunks else tokenizer.count(parsed.loaded.text)
