"""What a person reads at the command line: the engine in use said plainly
(offline: no LLM calls, tokens or cost, in text and JSON), a dry run's plan
printed once, no blank lines from a mode that writes no answer, file-name
prefixes for show/remove with the candidates listed, and the way to keep a
removed file out. Through the real CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fakeopenai import FakeOpenAI
from helpers import SAMPLE_DOCS, copy_into, llm_args, prepared_once, run_cli, write_file

MONEY = re.compile(r"LLM call|prompt token|completion token|cost|\$")


@pytest.fixture(scope="module")
def _built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def prepare(folder: Path) -> None:
        docs = folder / "docs"
        for quarter in ("Q1", "Q2", "Q3"):
            write_file(docs / f"2023_{quarter}_ACME.txt", f"ACME quarterly report for {quarter} 2023. Revenue grew.\n")
        write_file(docs / "greenhouse_plan.txt", "The greenhouse plan puts tomatoes by the south wall.\n")
        assert run_cli("build", docs, "--store", folder / "s.sqlite").code == 0

    return prepared_once(tmp_path_factory.mktemp("surface"), prepare)


@pytest.fixture
def built(_built: Path, tmp_path: Path) -> Path:
    copy_into(_built, tmp_path)
    return tmp_path


def test_offline_build_reports_no_calls_tokens_or_cost(tmp_path: Path) -> None:
    result = run_cli("build", SAMPLE_DOCS, "--store", tmp_path / "s.sqlite")
    assert result.code == 0, result
    assert "no model used" in result.stdout
    assert not MONEY.search(result.stdout + result.stderr), result


def test_a_build_with_a_model_still_reports_its_calls(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        result = run_cli("build", SAMPLE_DOCS, "--store", tmp_path / "s.sqlite", *llm_args(fake))
    assert result.code == 0, result
    assert "8 LLM calls" in result.stdout and "no model" not in result.stdout


def test_dry_run_prints_its_plan_once_and_offline_no_calls(tmp_path: Path) -> None:
    result = run_cli("build", SAMPLE_DOCS, "--store", tmp_path / "s.sqlite", "--dry-run")
    assert result.code == 0, result
    both = result.stdout + result.stderr
    for doc in SAMPLE_DOCS.iterdir():
        assert both.count(doc.name) == 1, (doc.name, both)
    assert "to summarize" not in both
    assert not MONEY.search(both), both
    data = run_cli("build", SAMPLE_DOCS, "--store", tmp_path / "s.sqlite", "--dry-run", "--json").json()
    assert data["planned"]["llm_calls"] == 0 and data["planned"]["offline"]["documents_to_summarize"] == 8
    assert all(p["llm_calls"] == 0 for p in data["plan"])


def test_offline_ask_json_counts_no_llm_usage(built: Path) -> None:
    result = run_cli("ask", "What does the greenhouse plan say?", "--store", built / "s.sqlite", "--json")
    assert result.code == 0, result
    data = result.json()
    assert data["engine"] == "extractive"
    assert set(data["usage"].values()) == {0}
    assert data["offline"]["tokens_read"] > 0
    explained = run_cli("ask", "What does the greenhouse plan say?", "--store", built / "s.sqlite", "--explain")
    plan = [line for line in explained.stderr.splitlines() if "plan:" in line]
    assert plan and "offline step(s) (no model)" in plan[0] and "LLM call" not in plan[0], plan


def test_config_show_says_which_engine_answers_and_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = run_cli("config", "show").stdout
    first = text.splitlines()[0]
    assert first.startswith("engine = offline extractive engine") and "no OPENAI_API_KEY" in first, first
    assert re.search(r"^model = gpt-4o-mini  \(default, not used offline\)$", text, re.MULTILINE), text
    assert "'" not in text.split("\n", 6)[-1], text  # values as typed, not Python reprs
    assert "LLM requests" not in text
    data = run_cli("config", "show", "--json").json()
    assert data["engine"]["answers_with"].startswith("offline extractive engine")
    monkeypatch.setenv("DOCSUM_BASE_URL", "http://127.0.0.1:9/v1")
    served = run_cli("config", "show").stdout.splitlines()[0]
    assert served.startswith("engine = model gpt-4o-mini on http://127.0.0.1:9/v1") and "base_url" in served, served


def test_no_text_mode_prints_no_blank_lines(built: Path) -> None:
    result = run_cli("ask", "greenhouse tomatoes?", "--store", built / "s.sqlite", "--mode", "no_text")
    assert result.code == 0, result
    assert result.stdout.startswith("Sources:") and "\n\n" not in result.stdout, result.stdout


def test_show_takes_a_file_name_prefix(built: Path) -> None:
    result = run_cli("show", "greenhouse", "--store", built / "s.sqlite", "--json")
    assert result.code == 0, result
    assert result.json()["path"] == "greenhouse_plan.txt"


def test_an_ambiguous_prefix_lists_every_candidate(built: Path) -> None:
    for command in ("show", "remove"):
        result = run_cli(command, "2023_Q", "--store", built / "s.sqlite")
        assert result.code == 2, result
        line = result.stderr.strip().splitlines()[-1]
        assert "matches 3 documents" in line, line
        for quarter in ("Q1", "Q2", "Q3"):
            assert f"2023_{quarter}_ACME.txt" in line, line
    # Nothing was removed by the ambiguous remove.
    assert len(run_cli("summaries", "--store", built / "s.sqlite", "--json").json()) == 4


def test_remove_says_how_to_keep_the_file_out_and_that_way_works(tmp_path: Path) -> None:
    built, store = tmp_path, tmp_path / "s.sqlite"
    for name in ("greenhouse_plan.txt", "orchard.txt", "hives.txt"):
        write_file(built / "docs" / name, f"Notes kept in {name}: the garden is doing well.\n")
    assert run_cli("build", built / "docs", "--store", store).code == 0
    result = run_cli("remove", "greenhouse", "--store", store)
    assert result.code == 0, result
    note = result.stderr.strip().splitlines()[-1]
    ignore = built / "docs" / ".docsumignore"
    assert ".docsumignore" in note and str(ignore) in note, note
    line = re.search(r"add the line (\S+) to", note)
    assert line is not None
    # Doing what the note says keeps the file out of the next build.
    ignore.write_text(line.group(1) + "\n", encoding="utf-8")
    assert run_cli("build", built / "docs", "--store", store).code == 0
    paths = [d["path"] for d in run_cli("summaries", "--store", store, "--json").json()]
    assert sorted(paths) == ["hives.txt", "orchard.txt"]


def test_remove_json_stays_one_document(built: Path) -> None:
    result = run_cli("remove", "greenhouse", "--store", built / "s.sqlite", "--json")
    assert json.loads(result.stdout) == {
        "removed": {"doc_id": result.json()["removed"]["doc_id"], "path": "greenhouse_plan.txt"}
    }
