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

from docsum.models.extractive import ExtractiveLLM
from docsum.query.ask import ask
from docsum.query.citations import Citation
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
    printed = run_cli("ask", QUESTION, "--store", offline_sample_store, "--top-k", "2", "--cutoff", "0", "--reorder", "--json")
    assert printed.code == 0, printed
    edge = json.loads(json.dumps(result.as_dict()))
    assert {k: v for k, v in printed.json().items() if k != "usage"} == {k: v for k, v in edge.items() if k != "usage"}
