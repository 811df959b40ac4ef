"""What goes into a build and what comes out: its options, the outcome of
each file, and the report (`docsum build --json` is `BuildReport.as_dict`).
Kept apart from the pipeline so that settings and the CLI can make options
and read reports without importing the build machinery."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from docsum.ingest.discover import SkippedFile
from docsum.ingest.ocr import MODE_OFF, PageCounts
from docsum.models.llm import estimated_cost
from docsum.models.prompts import DEFAULT_SUMMARY_QUERY, PromptTemplate
from docsum.schema import OFFLINE_ENGINE, CallRecord, Usage, usage_fields
from docsum.settings import DEFAULT_LIMITS, Limits, default


@dataclass
class BuildOptions:
    paths: list[Path]
    dry_run: bool = False
    prune: bool = True
    wait_seconds: float = 0.0
    summary_query: str = DEFAULT_SUMMARY_QUERY
    summary_template: PromptTemplate | None = None
    summary_language: str | None = None
    chunk_size: int = default("chunk_size")
    chunk_overlap: int = default("chunk_overlap")
    follow_symlinks: bool = False
    # Gitignore-style patterns (relative to each root) of files not to read.
    exclude: list[str] = field(default_factory=list)
    # Remove the documents of a folder that is now empty (see reconcile).
    prune_empty: bool = False
    jobs: int | None = None  # worker processes reading files (None: one per core)
    parse_timeout_s: float = default("parse_timeout")  # per file
    parse_memory_mb: int = default("parse_memory")  # per worker process
    ocr: str = default("ocr")  # docsum.ingest.ocr.MODES: which pages OCR reads
    cache_dir: Path | None = None  # extracted-text cache (None: the default under the docsum cache dir)
    use_cache: bool = True
    limits: Limits = DEFAULT_LIMITS  # documents in flight, embedding batch size
    max_calls: int | None = None  # LLM calls the build may send (--max-calls); the one past it is refused


@dataclass
class FileOutcome:
    path: str
    action: str  # added | updated | unchanged | removed | failed | skipped; dry run: add | update
    error: str = ""  # failed: why; skipped: why not followed
    nodes: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    warnings: list[str] = field(default_factory=list)
    attempts: int = 0  # failed: runs in a row this file has failed (0: not recorded)
    llm_failed: bool = False  # failed because the LLM server did (not because of the file)
    extractor: str = ""  # PDFs read this run: the engine whose text was used ("pdfium" | "pypdf")
    page_origins: str = ""  # paged documents read this run: each page's origin (docsum.ingest.ocr)


@dataclass
class FileWarning:
    path: str
    warning: str


@dataclass
class BuildReport:
    """What a build did (or, dry, plans to do), as records; `as_dict` is the
    JSON form (`docsum build --json`)."""

    store: str
    counts: dict[str, int] = field(
        default_factory=lambda: {k: 0 for k in ("added", "updated", "unchanged", "removed", "failed")}
    )
    failures: list[FileOutcome] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    elapsed_s: float = 0.0
    dry_run: bool = False
    # Dry run: one outcome per file, in folder order (action add, update or
    # remove; its nodes, calls and prompt tokens planned, or its error).
    plan: list[FileOutcome] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    skipped_files: list[FileOutcome] = field(default_factory=list)  # symlinks not followed (the reason in `error`)
    # Hidden, unsupported and excluded files, deliberately not read.
    skipped_entries: list[SkippedFile] = field(default_factory=list)
    warnings: list[FileWarning] = field(default_factory=list)
    extractors: dict[str, str] = field(default_factory=dict)  # path -> PDF engine, for PDFs read this run
    # path -> how its pages were read, for paged documents read this run
    # (dry run: the documents the plan reads).
    pages: dict[str, PageCounts] = field(default_factory=dict)
    ocr_mode: str = default("ocr")  # --ocr as asked (docsum.ingest.ocr.MODES)
    ocr_installed: bool = False  # the OCR extra is installed (docsum.ingest.ocr.installed)
    # Documents this run found summarized by another builder sharing the store
    # (counted as unchanged: this run did not pay for them).
    done_elsewhere: int = 0
    model: str | None = None  # the model the run is priced by; None when no price applies
    engine: str = ""  # LLMMetadata.engine: "extractive" is the offline engine, which calls no model
    num_output: int = 0

    @property
    def usage(self) -> Usage:
        return Usage.of(self.calls)

    @property
    def page_totals(self) -> PageCounts:
        return sum(self.pages.values(), PageCounts(0, 0, 0))

    @property
    def ocr_ran(self) -> bool:
        """OCR read (or tried) the pages without a text layer in this run."""
        return self.ocr_installed and self.ocr_mode != MODE_OFF

    @property
    def planned_calls(self) -> int:
        """Dry run: the LLM calls the plan will make."""
        return sum(p.calls for p in self.plan)

    def planned_actions(self) -> dict[str, int]:
        """Dry run: the files the plan adds, updates and removes."""
        return {a: sum(1 for p in self.plan if p.action == a) for a in ("add", "update", "remove")}

    @property
    def planned_prompt_tokens(self) -> int:
        return sum(p.prompt_tokens for p in self.plan)

    def as_dict(self) -> dict[str, Any]:
        usage = self.usage
        offline = self.engine == OFFLINE_ENGINE
        out: dict[str, Any] = {
            "store": self.store,
            "documents": dict(self.counts),
            "failures": [  # sorted: stable, whatever finished first
                {"path": f.path, "error": f.error} | ({"attempts": f.attempts} if f.attempts else {})
                for f in sorted(self.failures, key=lambda f: f.path)
            ],
            "engine": self.engine,
            **usage_fields(self.calls, self.engine),
            # Offline nothing is billed: 0, not null ("the price is unknown").
            "estimated_cost_usd": 0.0
            if offline
            else estimated_cost(self.model, usage.prompt_tokens, usage.completion_tokens),
            "elapsed_s": round(self.elapsed_s, 3),
            "skipped": self.skipped,
            "skipped_files": [{"path": s.path, "reason": s.error} for s in self.skipped_files]
            + [{"path": s.path, "reason": s.reason} for s in self.skipped_entries],
            "warnings": [{"path": w.path, "warning": w.warning} for w in self.warnings],
            "extractors": dict(sorted(self.extractors.items())),
            # Pages of the paged documents read this run: from the text layer,
            # by OCR, or left empty; per file for those with a page not from
            # the text layer. "ocr" says whether OCR could read the empty ones.
            "pages": self.page_totals.as_dict(),
            "ocr": {
                "requested": self.ocr_mode,
                "installed": self.ocr_installed,
                "in_effect": self.ocr_mode if self.ocr_ran else MODE_OFF,
            },
            "ocr_files": {path: c.as_dict() for path, c in sorted(self.pages.items()) if c.describe()},
            "done_elsewhere": self.done_elsewhere,
        }
        if self.dry_run:
            out["dry_run"] = True
            # Offline, the plan's steps are no LLM calls and its tokens are not billed: zero here.
            out["plan"] = [
                {
                    "path": p.path,
                    "action": p.action,
                    "nodes": p.nodes,
                    "llm_calls": 0 if offline else p.calls,
                    "prompt_tokens": 0 if offline else p.prompt_tokens,
                    "error": p.error,
                }
                for p in self.plan
            ]
            calls, prompt = (0, 0) if offline else (self.planned_calls, self.planned_prompt_tokens)
            out["planned"] = {
                "llm_calls": calls,
                "prompt_tokens": prompt,
                # At most: every answer may use the whole output budget.
                "max_completion_tokens": calls * self.num_output,
                "estimated_cost_usd": 0.0 if offline else estimated_cost(self.model, prompt, calls * self.num_output),
            }
            if offline:
                out["planned"]["offline"] = {
                    "documents_to_summarize": sum(1 for p in self.plan if p.action in ("add", "update") and not p.error)
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


def calls_over_limit(plan: BuildReport, limit: int) -> str | None:
    """The refusal of a planned build of more than `limit` LLM calls, or None."""
    if plan.planned_calls <= limit:
        return None
    actions = plan.planned_actions()
    return (
        f"this build plans {plan.planned_calls} LLM calls ({actions['add']} file(s) to add, "
        f"{actions['update']} to update, {actions['remove']} to remove; {plan.planned_prompt_tokens} prompt tokens), "
        f"more than --max-calls {limit}; nothing was sent (see `docsum build --dry-run`)"
    )
