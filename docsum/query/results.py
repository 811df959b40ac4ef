"""What `docsum ask` returns: typed records, turned into dicts only at the
output edge (`as_dict`, which the command line's `--json` prints).

`AskResult` itself stays mutable for one reason: a streamed answer is only
complete once it has been read (`drain`, or the text output), and its
citation markers and a model's decline are checked then (`finish`). Every
record it carries is frozen.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from docsum.citations import Citation, UnsupportedSentence, cite
from docsum.errors import DocsumError, ExitCode
from docsum.models.abstain import says_cannot_answer
from docsum.query.postprocess import StepReport
from docsum.query.retrieve import Candidate
from docsum.schema import CallRecord, NodeWithScore, ResponseStatus, Usage


@dataclass(frozen=True)
class DocumentHit:
    """A document retrieval scored: chosen for the answer (`AskResult.documents`),
    or one of the candidates --explain lists (`AskResult.candidates`)."""

    doc_id: str
    path: str
    score: float | None
    summary: str
    chosen: bool = False
    # The fused retriever's raw evidence, by name, and what a relevance floor
    # is compared with (docsum.query.retrieve.Candidate): only when present.
    signals: Mapping[str, float] = field(default_factory=dict)
    relevance: float | None = None

    @classmethod
    def of(cls, candidate: Candidate) -> DocumentHit:
        return cls(
            candidate.doc_id,
            candidate.path,
            candidate.score,
            candidate.summary,
            candidate.chosen,
            dict(candidate.signals),
            candidate.relevance,
        )

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"doc_id": self.doc_id, "path": self.path, "score": self.score, "summary": self.summary}
        if self.signals:
            out["signals"] = dict(self.signals)
        if self.relevance is not None:
            out["relevance"] = self.relevance
        return out


@dataclass(frozen=True)
class Source:
    """A passage the answer was given, with the pages it came from."""

    doc_id: str
    path: str
    root: str
    pages: tuple[int, ...]
    score: float | None
    text: str
    ocr_pages: tuple[int, ...] = ()  # those of `pages` whose text OCR read (a scan may be misread)

    def as_dict(self) -> dict[str, Any]:
        return {
            "doc_id": self.doc_id,
            "path": self.path,
            "root": self.root,
            "pages": list(self.pages),
            "score": self.score,
            "text": self.text,
            "ocr": bool(self.ocr_pages),
            "ocr_pages": list(self.ocr_pages),
        }


@dataclass(frozen=True)
class AnswerPlan:
    """What the answer step was planned to read and cost, before it ran
    (--explain's `plan:` line). `llm_calls` None: not known in advance."""

    documents: int
    nodes: int
    tokens: int
    llm_calls: int | None


@dataclass
class AskResult:
    question: str
    answer: str
    status: ResponseStatus
    reason: str
    mode: str
    retriever: str
    documents: list[DocumentHit] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    steps: list[StepReport] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # What the user should hear about even without --explain: an LLM answer
    # that could not be parsed, a step that would have removed everything.
    warnings: list[str] = field(default_factory=list)
    candidates: list[DocumentHit] = field(default_factory=list)
    plan: AnswerPlan | None = None
    calls: list[CallRecord] = field(default_factory=list)
    engine: str = ""
    stream: AsyncIterator[str] | None = None
    # The documents do not answer the question (as opposed to: there is
    # nothing to ask, such as an empty store). The text output says so.
    abstained: bool = False
    # The answer's [n] markers, each with its document, pages and quote, and
    # the cited sentences their passages do not support (docsum.citations).
    citations: list[Citation] = field(default_factory=list)
    unsupported: list[UnsupportedSentence] = field(default_factory=list)
    # The passages as numbered for the answer step (marker n is passages[n-1]),
    # and how to name each document to a person (doc_id → name).
    passages: list[NodeWithScore] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    roots: dict[str, str] = field(default_factory=dict)  # doc_id → build root

    @property
    def usage(self) -> Usage:
        return Usage.of(self.calls)

    async def drain(self) -> str:
        if self.stream is not None:
            self.answer = "".join([piece async for piece in self.stream])
            self.stream = None
            self.finish()
        return self.answer

    def finish(self) -> None:
        """Once the whole answer is known: a reply that declines is an
        abstention; otherwise its citation markers are checked."""
        if self.status is ResponseStatus.OK and says_cannot_answer(self.answer):
            self.abstain("the answer step found no answer in the passages")
            return
        self.attach_citations()

    def as_dict(self) -> dict[str, Any]:
        """The JSON document of this answer (the contract `--json` prints)."""
        return {
            "question": self.question,
            "answer": self.answer,
            "status": self.status.value,
            "reason": self.reason,
            "mode": self.mode,
            "retriever": self.retriever,
            "engine": self.engine,
            "documents": [d.as_dict() for d in self.documents],
            "sources": [s.as_dict() for s in self.sources],
            "steps": [s.as_dict() for s in self.steps],
            "notes": self.notes,
            "warnings": self.warnings,
            "abstained": self.abstained,
            "citations": [c.as_dict() for c in self.citations],
            "unsupported": [u.as_dict() for u in self.unsupported],
            "usage": self.usage.as_dict(),
        }

    def attach_citations(self) -> None:
        """Validate the answer's [n] markers against its numbered passages and
        fill `citations` and `unsupported` (once the answer is complete)."""
        if not self.passages or not self.answer:
            return
        self.answer, report = cite(self.answer, self.passages, self.roots)
        self.citations, self.unsupported = list(report.citations), list(report.unsupported)
        if report.removed_markers:
            numbers = ", ".join(f"[{m}]" for m in report.removed_markers)
            self.warnings.append(
                f"removed citation marker(s) {numbers}: no such passage (there are {len(self.passages)})"
            )

    def abstain(self, reason: str, status: ResponseStatus = ResponseStatus.NOT_SATISFIED) -> AskResult:
        """Turn this result into an abstention: no answer, no sources."""
        self.answer, self.status, self.reason, self.abstained = "", status, reason, True
        self.sources = []
        self.stream = None
        return self


def exit_code_of(result: AskResult | DocsumError) -> int:
    """An answer's own exit code, as `docsum ask` would end with it."""
    if isinstance(result, DocsumError):
        return int(result.exit_code)
    return int(ExitCode.OK if result.status is ResponseStatus.OK else ExitCode.NOTHING_TO_ANSWER)


# How bad each exit code is, for the exit code of many answers: an error over
# a bad question over nothing to answer from over ok.
_SEVERITY = {int(ExitCode.OK): 0, int(ExitCode.NOTHING_TO_ANSWER): 1, int(ExitCode.USAGE): 2}


def worst_exit_code(codes: Iterable[int]) -> int:
    return max(codes, key=lambda code: _SEVERITY.get(code, 3), default=int(ExitCode.OK))
