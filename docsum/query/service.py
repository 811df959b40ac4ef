"""One store served to many requests: what each tool of `docsum mcp` does,
as plain dicts, with no protocol in sight (the MCP wiring is the CLI's,
cli/mcp_cmd.py; this module is usable and testable alone).

The store is opened once, the first time a request needs it (a server may
start before the first build), and shared by every request: the event loop
runs one request's store reads at a time, as `ask --questions` does. Each
question reads the corpus anew, so a `docsum build --watch` committing
beside the server is seen by the next question.

Every argument comes from a client and is checked here with the CLI's own
rules (docsum.settings); a bad one is a ConfigError with a one-line message
that names the argument.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from docsum.builder.pipeline import build
from docsum.builder.report import BuildOptions, calls_over_limit
from docsum.errors import ConfigError
from docsum.locations import StoreLocation, display_location, is_postgres
from docsum.models.llm import LLM
from docsum.query.ask import ask_in_store
from docsum.query.corpus import StoreCorpus
from docsum.query.docref import document_details, find_one
from docsum.query.options import AskOptions
from docsum.query.results import AskResult
from docsum.query.retrieve import planned_choice_calls
from docsum.schema import ResponseStatus, usage_fields
from docsum.settings import RETRIEVERS, check
from docsum.store.base import DocumentStore
from docsum.store.opening import open_store, store_exists
from docsum.synthesizers import BUILTIN_MODES

# A page of `list_documents`: enough to see a folder, small enough for a model's context.
DEFAULT_PAGE = 50
MAX_PAGE = 500
# `search` lists each document's best passages, cut to this many characters.
PASSAGE_CHARS = 600


def first_line(text: str) -> str:
    stripped = text.strip()
    return stripped.splitlines()[0] if stripped else ""


def _text(value: Any, name: str, *, limit: int = 20_000) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name}: give a non-empty string")
    if len(value) > limit:
        raise ConfigError(f"{name}: longer than {limit} characters")
    return value


def _whole(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{name}: {value!r} is not a whole number in {low}..{high}")
    return value


def _setting(name: str, value: Any) -> Any:
    """`value` checked as the setting `name` is on the command line, the error naming the argument."""
    try:
        return check(name, value, where=name)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


class QueryService:
    """The tools over one store. `build_options` None: building is off (the
    server was not started with --allow-build); else a build's defaults,
    the paths replaced by each request's, and `build_max_calls` its limit."""

    def __init__(
        self,
        store_path: StoreLocation,
        llm: LLM,
        ask_options: AskOptions,
        *,
        build_options: BuildOptions | None = None,
        build_max_calls: int | None = None,
    ) -> None:
        self.store_path = store_path
        self.llm = llm
        self.ask_options = dataclasses.replace(ask_options, stream=False)
        self.build_options = build_options
        self.build_max_calls = build_max_calls
        self._store: DocumentStore | None = None
        self._corpus: StoreCorpus | None = None
        self._stamp: tuple[tuple[int, int] | None, ...] | None = None

    # ------------------------------------------------------------------ the store

    @property
    def where(self) -> str:
        return display_location(self.store_path)

    def _missing(self) -> ConfigError:
        return ConfigError(f"no store at {self.where}; run `docsum build PATH` first")

    def store(self) -> DocumentStore | None:
        """The open store, opened on first use; None while there is none."""
        if self._store is None and store_exists(self.store_path):
            self._store = open_store(self.store_path, create=False, readonly=True)
        return self._store

    def _existing(self) -> DocumentStore:
        store = self.store()
        if store is None:
            raise self._missing()
        return store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
        self._corpus = None

    def _files_stamp(self) -> tuple[tuple[int, int] | None, ...] | None:
        """What changes when a build commits to a SQLite store: its file and
        its write-ahead log (size, mtime). None for PostgreSQL: no stamp."""
        if is_postgres(self.store_path):
            return None
        stamps: list[tuple[int, int] | None] = []
        for name in (str(self.store_path), f"{self.store_path}-wal"):
            try:
                st = os.stat(name)
            except OSError:
                stamps.append(None)
            else:
                stamps.append((st.st_size, st.st_mtime_ns))
        return tuple(stamps)

    def corpus(self) -> tuple[DocumentStore, StoreCorpus]:
        """The open store and its corpus (vectors, BM25 index), kept while
        the store is unchanged: loading them is much of a question's cost.
        A build committing meanwhile (`build --watch`) renews it, so the next
        question sees what it stored."""
        store = self._existing()
        stamp = self._files_stamp()
        if self._corpus is None or stamp is None or stamp != self._stamp:
            self._corpus, self._stamp = StoreCorpus.beside(store), stamp
        return store, self._corpus

    # ------------------------------------------------------------------ questions

    def _options(self, mode: Any, top_k: Any, retriever: Any) -> AskOptions:
        changes: dict[str, Any] = {}
        if mode is not None:
            # Only the built-in modes: a custom synthesizer is a Python import,
            # never something a client may name.
            if mode not in BUILTIN_MODES:
                raise ConfigError(f"mode: {mode!r} is not one of {', '.join(BUILTIN_MODES)}")
            changes["mode"] = mode
        if top_k is not None:
            changes["top_k"] = _setting("top_k", top_k)
        if retriever is not None:
            if retriever not in RETRIEVERS:
                raise ConfigError(f"retriever: {retriever!r} is not one of {', '.join(RETRIEVERS)}")
            changes["retriever"] = retriever
        return dataclasses.replace(self.ask_options, **changes) if changes else self.ask_options

    async def _ask(self, question: Any, options: AskOptions) -> AskResult:
        text = _text(question, "question")
        # No store is an error here, as `docsum summaries` reports it: the
        # client named a store that was never built (an empty one is a result).
        return await ask_in_store(self.corpus(), self.store_path, self.llm, text, options)

    async def ask(self, question: Any, mode: Any = None, top_k: Any = None, retriever: Any = None) -> dict[str, Any]:
        """The answer, its status, and its citations, each checked against its passage."""
        result = await self._ask(question, self._options(mode, top_k, retriever))
        return answer_dict(result)

    async def search(self, query: Any, top_k: Any = None, retriever: Any = None) -> dict[str, Any]:
        """The documents retrieval picks for `query` and their best passages, no answer written."""
        result = await self._ask(query, self._options("no_text", top_k, retriever))
        passages: dict[str, list[dict[str, Any]]] = {}
        for source in result.sources:
            passages.setdefault(source.doc_id, []).append(
                {"pages": list(source.pages), "score": source.score, "text": source.text[:PASSAGE_CHARS]}
            )
        return {
            "query": result.question,
            "status": _status(result),
            "reason": result.reason,
            "documents": [
                {
                    "doc_id": d.doc_id,
                    "path": d.path,
                    "score": d.score,
                    "summary_first_line": first_line(d.summary),
                    "passages": passages.get(d.doc_id, [])[:3],
                }
                for d in result.documents
            ],
            # As `ask --json` counts: offline, no LLM call, the work under "offline".
            **usage_fields(result.calls, result.engine),
        }

    # ------------------------------------------------------------------ documents

    def list_documents(self, offset: Any = 0, limit: Any = DEFAULT_PAGE) -> dict[str, Any]:
        offset = _whole(offset, "offset", 0, 10**9)
        limit = _whole(limit, "limit", 1, MAX_PAGE)
        store = self._existing()
        total = store.document_count()
        page: list[dict[str, Any]] = []
        for i, doc in enumerate(store.iter_documents()):
            if i >= offset + limit:
                break
            if i >= offset:
                page.append(
                    {
                        "doc_id": doc.doc_id,
                        "path": doc.path,
                        "title": doc.title,
                        "pages": doc.page_count,
                        "summary_first_line": first_line(doc.summary)[:200],
                    }
                )
        following = offset + len(page)
        return {
            "store": self.where,
            "total": total,
            "offset": offset,
            "documents": page,
            "next_offset": following if following < total else None,
        }

    def summary(self, doc: Any) -> dict[str, Any]:
        """One document's whole summary, what `docsum show --json` prints."""
        ref = _text(doc, "doc", limit=4096)
        store = self._existing()
        data, pages = document_details(store, find_one(store, ref, "list_documents"))
        return data | {"pages_cited": pages}

    def documents(self) -> list[dict[str, str]]:
        """Every document as a resource is named: id, path, first line (no store: none)."""
        store = self.store()
        if store is None:
            return []
        return [
            {"doc_id": d.doc_id, "path": d.path, "title": d.title, "first_line": first_line(d.summary)[:200]}
            for d in store.iter_documents()
        ]

    # ------------------------------------------------------------------ cost and building

    async def plan(self, what: Any, paths: Any = None, question: Any = None, retriever: Any = None) -> dict[str, Any]:
        """What a build of `paths`, or a question, would cost, before anything is sent."""
        if what == "build":
            return await self._plan_build(self._paths(paths))
        if what == "ask":
            return self._plan_ask(_text(question, "question"), self._options(None, None, retriever))
        raise ConfigError(f"what: {what!r} is not one of build, ask")

    def _paths(self, paths: Any) -> list[Path]:
        if not isinstance(paths, list) or not paths or not all(isinstance(p, str) and p.strip() for p in paths):
            raise ConfigError("paths: give a non-empty list of folder or file names")
        return [Path(p).expanduser() for p in paths]

    def _build_options(self, paths: list[Path], *, dry_run: bool) -> BuildOptions:
        base = self.build_options or BuildOptions(paths=[])
        return dataclasses.replace(base, paths=paths, dry_run=dry_run)

    async def _plan_build(self, paths: list[Path]) -> dict[str, Any]:
        report = await build(self.store_path, self.llm, self._build_options(paths, dry_run=True))
        actions = report.planned_actions()
        return {
            "what": "build",
            "store": self.where,
            "paths": [str(p) for p in paths],
            "files": actions,
            "failed": [{"path": p.path, "error": p.error} for p in report.plan if p.error],
            "llm_calls": report.planned_calls,
            "prompt_tokens": report.planned_prompt_tokens,
            "engine": self.llm.metadata.engine,
            "building_allowed": self.build_options is not None,
            "max_calls": self.build_max_calls,
        }

    def _plan_ask(self, question: str, options: AskOptions) -> dict[str, Any]:
        store = self.store()
        documents = store.document_count() if store is not None else 0
        retrieval = planned_choice_calls(options.retriever, documents, options.choice_batch_size, options.candidates)
        extractive = self.llm.metadata.extractive
        return {
            "what": "ask",
            "question": question,
            "documents_in_store": documents,
            "retriever": options.retriever,
            "mode": options.label,
            "retrieval_llm_calls": retrieval,
            # The answer step is planned on the passages retrieval picks, so
            # it is known only then; the offline engine never calls a model.
            "answer_llm_calls": 0 if extractive else None,
            "answer_note": "the offline engine makes no LLM calls"
            if extractive
            else f"planned once retrieval has picked the passages; refused beyond max_calls {options.max_calls}",
            "max_calls": options.max_calls,
        }

    async def build(self, paths: Any) -> dict[str, Any]:
        """Reconcile the store with `paths`, as `docsum build` does; only with --allow-build."""
        if self.build_options is None:
            raise ConfigError("building is off: start the server with `docsum mcp --allow-build`")
        folders = self._paths(paths)
        if self.build_max_calls is not None:
            plan = await build(self.store_path, self.llm, self._build_options(folders, dry_run=True))
            refusal = calls_over_limit(plan, self.build_max_calls)
            if refusal is not None:
                raise ConfigError(refusal)
        report = await build(self.store_path, self.llm, self._build_options(folders, dry_run=False))
        # The next question reads the store as this build left it.
        self.close()
        data = report.as_dict()
        return {
            "what": "build",
            "store": data["store"],
            "documents": data["documents"],
            "failures": data["failures"],
            "usage": data["usage"],
            "elapsed_s": data["elapsed_s"],
        }


def _status(result: AskResult) -> str:
    if result.status is ResponseStatus.OK:
        return "answered"
    return "abstained" if result.abstained else "nothing_to_answer"


def answer_dict(result: AskResult) -> dict[str, Any]:
    """An answer as a model should read it: the text, whether it abstained and
    why, and each citation with whether its passage supports the sentence."""
    unsupported = {m for u in result.unsupported for m in u.markers}
    return {
        "question": result.question,
        "answer": result.answer,
        "status": _status(result),
        "reason": result.reason,
        "mode": result.mode,
        "retriever": result.retriever,
        "citations": [
            {
                "marker": c.marker,
                "path": os.path.join(c.root, c.path) if c.root else c.path,
                "pages": list(c.pages),
                "quote": c.quote,
                "supported": c.marker not in unsupported,
            }
            for c in result.citations
        ],
        "unsupported_sentences": [u.sentence for u in result.unsupported],
        "documents": [{"doc_id": d.doc_id, "path": d.path, "score": d.score} for d in result.documents],
        "warnings": list(result.warnings),
        **usage_fields(result.calls, result.engine),
    }
