"""Results travel as typed records (issue 14): what the library returns holds
frozen dataclasses, and they become dicts only at the output edge
(`as_dict`), which is exactly what `--json` prints."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from helpers import run_cli

from docsum.citations import Citation
from docsum.models.extractive import ExtractiveLLM
from docsum.query.ask import ask
from docsum.query.options import AskOptions
from docsum.query.postprocess import StepReport
from docsum.query.results import AnswerPlan, AskResult, DocumentHit, Source

QUESTION = "When did the library reopen after the renovation?"


def _frozen_records(values: list[Any], kind: type) -> None:
    assert values, f"no {kind.__name__} to check"
    for value in values:
        assert isinstance(value, kind) and dataclasses.is_dataclass(value), value
        field = dataclasses.fields(value)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, getattr(value, field))


def test_an_answer_carries_typed_records_and_json_is_their_edge(offline_sample_store: Path) -> None:
    options = AskOptions(top_k=2, cutoff=0.0, reorder=True)
    result = asyncio.run(ask(offline_sample_store, ExtractiveLLM(), QUESTION, options))
    assert isinstance(result, AskResult) and result.status.value == "ok"
    _frozen_records(result.documents, DocumentHit)
    _frozen_records(result.candidates, DocumentHit)
    _frozen_records(result.sources, Source)
    _frozen_records(result.steps, StepReport)
    _frozen_records(result.citations, Citation)
    assert isinstance(result.plan, AnswerPlan)
    # Nothing the result carries is a dict but its name maps.
    for field in dataclasses.fields(result):
        value = getattr(result, field.name)
        if field.name not in ("names", "roots"):
            assert not isinstance(value, dict), field.name
        if isinstance(value, list):
            assert all(not isinstance(item, dict) for item in value), field.name
    # The edge: the CLI's --json prints the same document.
    printed = run_cli(
        "ask", QUESTION, "--store", offline_sample_store, "--top-k", "2", "--cutoff", "0", "--reorder", "--json"
    )
    assert printed.code == 0, printed
    edge = json.loads(json.dumps(result.as_dict()))
    assert {k: v for k, v in printed.json().items() if k != "usage"} == {k: v for k, v in edge.items() if k != "usage"}


def test_an_evaluation_is_typed_records_and_json_is_their_edge(offline_sample_store: Path) -> None:
    from docsum.query.evalreport import (
        AbstentionOutcome,
        AbstentionRates,
        AnswerGrade,
        AnswerSummary,
        EvalReport,
        KindMetrics,
        Metrics,
        QuestionRow,
    )
    from docsum.query.evaluate import evaluate, load_questions

    questions_file = Path(__file__).resolve().parents[1] / "sample_data" / "QUESTIONS.jsonl"
    questions = load_questions(questions_file)[:2]
    options = AskOptions(retriever="fused")
    report = asyncio.run(
        evaluate(
            offline_sample_store,
            ExtractiveLLM(),
            questions,
            retriever="fused",
            also=["bm25"],
            baseline="chunks",
            answers=options,
            unanswerable=options,
        )
    )
    assert isinstance(report, EvalReport)
    _frozen_records([report], EvalReport)
    _frozen_records(list(report.details), QuestionRow)
    _frozen_records([m for kinds in report.summary.values() for m in kinds.values()], KindMetrics)
    _frozen_records([m for row in report.details for m in row.metrics.values()], Metrics)
    _frozen_records([row.answer for row in report.details], AnswerGrade)  # type: ignore[misc]
    _frozen_records([row.abstention for row in report.details], AbstentionOutcome)  # type: ignore[misc]
    assert isinstance(report.answers, AnswerSummary) and isinstance(report.abstention, AbstentionRates)
    assert set(report.details[0].metrics) == {"fused", "summary", "bm25", "chunks"}
    printed = run_cli(
        "eval",
        questions_file,
        "--store",
        offline_sample_store,
        "--max-questions",
        "2",
        "--retriever",
        "fused,bm25",
        "--baseline",
        "chunks",
        "--answers",
        "--unanswerable",
        "--details",
        "--json",
    )
    assert printed.code == 0, printed
    edge = json.loads(json.dumps(report.as_dict(details=True)))
    assert {k: v for k, v in printed.json().items() if k != "elapsed_s"} == {
        k: v for k, v in edge.items() if k != "elapsed_s"
    }
