"""A document summary index as one object, for use from Python.

    index = DocumentSummaryIndex("notes.sqlite", llm=ExtractiveLLM())
    index.build(["./data"])
    print(index.get_document_summary("report.pdf"))
    print(index.query("What was decided?", mode="refine").answer)

It is a thin layer over the same functions the CLI calls, so what it stores and
answers is exactly what `docsum build` / `docsum ask` would.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from docsum.builder.pipeline import build
from docsum.builder.report import BuildOptions, BuildReport
from docsum.errors import ConfigError
from docsum.locations import StoreLocation, display_location, is_postgres
from docsum.models.llm import LLM
from docsum.query.ask import ask
from docsum.query.options import AskOptions
from docsum.query.results import AskResult
from docsum.store.opening import open_store


class DocumentSummaryIndex:
    def __init__(self, store_path: StoreLocation, llm: LLM, **build_defaults: Any) -> None:
        # A postgresql:// URL stays a string (Path would fold its "//").
        self.store_path: StoreLocation = store_path if is_postgres(store_path) else Path(store_path)
        self.llm = llm
        self.build_defaults = build_defaults

    def build(self, paths: list[str | Path], **options: Any) -> BuildReport:
        """Reconcile the store with `paths` (add, update, remove, skip)."""
        opts = BuildOptions(paths=[Path(p) for p in paths], **{**self.build_defaults, **options})
        return asyncio.run(build(self.store_path, self.llm, opts))

    def insert(self, path: str | Path) -> BuildReport:
        """Add or update one file without pruning anything else."""
        return self.build([path], prune=False)

    def delete(self, doc: str) -> bool:
        """Remove a document by id or stored path; False if it is not there."""
        with open_store(self.store_path) as store:
            record = store.get_document(doc)
            return record is not None and store.remove_document(record.doc_id)

    def get_document_summary(self, doc: str) -> str:
        with open_store(self.store_path, create=False, readonly=True) as store:
            record = store.get_document(doc)
        if record is None:
            raise ConfigError(f"no document {doc!r} in {display_location(self.store_path)}")
        return record.summary

    def document_ids(self) -> list[str]:
        with open_store(self.store_path, create=False, readonly=True) as store:
            return [d.doc_id for d in store.list_documents()]

    def query(self, question: str, **options: Any) -> AskResult:
        """Answer `question`; options are those of `AskOptions` (mode, retriever, top_k...)."""
        result = asyncio.run(ask(self.store_path, self.llm, question, AskOptions(**options)))
        return result
