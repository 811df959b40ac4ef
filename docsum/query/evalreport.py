"""What `docsum eval` returns: frozen records, turned into the documented
JSON only by `as_dict` (the `--json` edge)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from docsum.query.answermeasures import AnswerMeasures
from docsum.schema import CallRecord, Usage, usage_fields


@dataclass(frozen=True)
class Metrics:
    """Retrieval quality of one question's ranking within the top k."""

    recall: float
    precision: float
    mrr: float
    all_found: float

    def as_dict(self) -> dict[str, Any]:
        return {"recall": self.recall, "precision": self.precision, "mrr": self.mrr, "all_found": self.all_found}


@dataclass(frozen=True)
class KindMetrics(Metrics):
    """The same averaged over `n` questions (of one kind, or all)."""

    n: int = 0

    def as_dict(self) -> dict[str, Any]:
        return super().as_dict() | {"n": self.n}


def aggregate(rows: list[Metrics]) -> KindMetrics:
    if not rows:
        return KindMetrics(0.0, 0.0, 0.0, 0.0, 0)

    def mean(values: list[float]) -> float:
        return round(sum(values) / len(rows), 4)

    return KindMetrics(
        mean([r.recall for r in rows]),
        mean([r.precision for r in rows]),
        mean([r.mrr for r in rows]),
        mean([r.all_found for r in rows]),
        len(rows),
    )


@dataclass(frozen=True)
class AnswerGrade:
    """One question's answer and its grade, or why it was not graded."""

    text: str = ""
    status: str = ""
    correct: bool = False
    reason: str = ""
    skipped: str = ""  # set: not answered (no reference answer), the rest unset

    def as_dict(self) -> dict[str, Any]:
        if self.skipped:
            return {"skipped": self.skipped}
        return {"text": self.text, "status": self.status, "correct": self.correct, "reason": self.reason}


@dataclass(frozen=True)
class AnswerSummary:
    grader: str  # "llm-judge" or "token-overlap"
    mode: str
    graded: int
    accuracy: float | None
    by_kind: Mapping[str, float]
    # What a reader notices (docsum.query.answermeasures): the fact first,
    # length, the wrong entity, a short gold answer found.
    measures: AnswerMeasures | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "grader": self.grader,
            "mode": self.mode,
            "graded": self.graded,
            "accuracy": self.accuracy,
            "by_kind": dict(self.by_kind),
            "measures": self.measures.as_dict() if self.measures else None,
        }


@dataclass(frozen=True)
class AskOutcome:
    """How one run of a question ended (status ok means it answered)."""

    status: str
    abstained: bool
    reason: str
    # The offline engine's best answer score in this run (None: no answer
    # was weighed, or a model answered).
    best_score: float | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "abstained": self.abstained, "reason": self.reason}
        if self.best_score is not None:
            out["best_score"] = round(self.best_score, 4)
        return out

    def declined_at(self, floor: float, in_force: float) -> bool:
        """Whether this run would have declined under another answer floor:
        a run the floor decided (answered, or declined below `in_force`)
        turns on its best score; any other decline stays one."""
        if self.best_score is None:
            return self.abstained
        if self.abstained and self.best_score >= in_force:
            return True  # declined for another reason than the floor
        return self.best_score < floor


@dataclass(frozen=True)
class FloorRow:
    """What one answer floor would decline (estimated from each run's best score)."""

    floor: float
    answerable_declined: float | None
    unanswerable_declined: float | None
    in_force: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "floor": round(self.floor, 4),
            "answerable_declined": self.answerable_declined,
            "unanswerable_declined": self.unanswerable_declined,
            "in_force": self.in_force,
        }


# Offsets from the floor in force that eval's trade-off shows.
FLOOR_STEPS = (-0.2, -0.1, 0.0, 0.1, 0.2, 0.3)


def floor_trade_off(
    answerable: list[AskOutcome], unanswerable: list[AskOutcome], in_force: float
) -> tuple[FloorRow, ...]:
    """Answerable against unanswerable questions declined, for floors around
    the one in force: what raising or lowering --answer-floor would trade."""

    def share(runs: list[AskOutcome], floor: float) -> float | None:
        return round(sum(r.declined_at(floor, in_force) for r in runs) / len(runs), 4) if runs else None

    return tuple(
        FloorRow(in_force + step, share(answerable, in_force + step), share(unanswerable, in_force + step), step == 0.0)
        for step in FLOOR_STEPS
    )


@dataclass(frozen=True)
class AbstentionOutcome:
    """A question asked as usual and with its gold documents hidden."""

    normal: AskOutcome
    hidden_gold: AskOutcome

    def as_dict(self) -> dict[str, Any]:
        return {"normal": self.normal.as_dict(), "hidden_gold": self.hidden_gold.as_dict()}


@dataclass(frozen=True)
class KindRates:
    n: int
    answer_rate: float | None
    abstention_rate: float | None

    def as_dict(self) -> dict[str, Any]:
        return {"n": self.n, "answer_rate": self.answer_rate, "abstention_rate": self.abstention_rate}


@dataclass(frozen=True)
class AbstentionRates:
    """Per kind, and the trade-off abstention strikes: answerable questions
    declined (asked as usual), questions of kind "unanswerable" declined, and
    answerable questions declined with their gold documents hidden."""

    mode: str
    by_kind: Mapping[str, KindRates]
    answerable_declined: float | None = None
    unanswerable_declined: float | None = None
    hidden_gold_declined: float | None = None
    trade_off: tuple[FloorRow, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "trade_off": [row.as_dict() for row in self.trade_off],
            "mode": self.mode,
            "by_kind": {kind: rates.as_dict() for kind, rates in self.by_kind.items()},
            "answerable_declined": self.answerable_declined,
            "unanswerable_declined": self.unanswerable_declined,
            "hidden_gold_declined": self.hidden_gold_declined,
        }


@dataclass(frozen=True)
class QuestionRow:
    """One question's figures: per system ("summary", each retriever, "chunks")."""

    id: str
    kind: str
    gold: tuple[str, ...]
    metrics: Mapping[str, Metrics]
    retrieved: tuple[str, ...]
    chunks_retrieved: tuple[str, ...] | None = None
    answer: AnswerGrade | None = None
    abstention: AbstentionOutcome | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "gold": list(self.gold)}
        out |= {system: m.as_dict() for system, m in self.metrics.items()}
        out["retrieved"] = list(self.retrieved)
        if self.chunks_retrieved is not None:
            out["chunks_retrieved"] = list(self.chunks_retrieved)
        if self.answer is not None:
            out["answer"] = self.answer.as_dict()
        if self.abstention is not None:
            out["abstention"] = self.abstention.as_dict()
        return out


@dataclass(frozen=True)
class EvalReport:
    retriever: str
    top_k: int
    summary: Mapping[str, Mapping[str, KindMetrics]]  # system -> kind ("all", "single", ...) -> metrics
    details: tuple[QuestionRow, ...] = ()
    answers: AnswerSummary | None = None
    abstention: AbstentionRates | None = None
    calls: tuple[CallRecord, ...] = ()
    unresolved: tuple[str, ...] = ()
    elapsed_s: float = 0.0
    engine: str = ""  # LLMMetadata.engine; the offline engine's work is not reported as LLM usage

    @property
    def usage(self) -> Usage:
        return Usage.of(list(self.calls))

    def as_dict(self, details: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "retriever": self.retriever,
            "top_k": self.top_k,
            "metrics": {
                system: {kind: m.as_dict() for kind, m in kinds.items()} for system, kinds in self.summary.items()
            },
            "answers": self.answers.as_dict() if self.answers else None,
            "abstention": self.abstention.as_dict() if self.abstention else None,
            **usage_fields(list(self.calls), self.engine),
            "unresolved_gold_docs": list(self.unresolved),
            "elapsed_s": round(self.elapsed_s, 3),
        }
        if details:
            out["questions"] = [row.as_dict() for row in self.details]
        return out
