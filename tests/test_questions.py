"""Many questions in one process (`docsum ask --questions`) and the guard on
cost (`--max-calls`, the warning about LLM retrieval over a large store)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from fakeopenai import FakeOpenAI, Reply
from helpers import SAMPLE_DOCS, copy_into, llm_args, make_docs, prepared_once, run_cli, store_count

from docsum.query import callplan

LIBRARY = "When did the library reopen after the renovation?"
OVEN = "How much did Brindle & Daughter pay for the oven?"


def _build_sample(folder: Path) -> None:
    shutil.copytree(SAMPLE_DOCS, folder / "docs")
    assert run_cli("build", folder / "docs", "--store", folder / "s.sqlite", "--llm", "extractive").code == 0


@pytest.fixture(scope="module")
def built_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepared_once(tmp_path_factory.mktemp("questions"), _build_sample)


@pytest.fixture
def sample_store(tmp_path: Path, built_sample: Path) -> Path:
    """sample_data/docs built by the CLI, the module's build copied (asks write beside the store)."""
    copy_into(built_sample, tmp_path)
    return tmp_path / "s.sqlite"


def answers(stdout: str) -> dict[object, dict[str, object]]:
    lines = [json.loads(line) for line in stdout.splitlines()]
    return {line["id"]: line for line in lines}


def test_questions_file_gives_one_json_line_per_question_with_its_id(sample_store: Path, tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        json.dumps({"id": "lib", "question": LIBRARY})
        + "\n"
        + "\n"  # blank lines are skipped
        + OVEN
        + "\n"  # a plain line: its id is its line number
    )
    result = run_cli("ask", "--questions", questions, "--store", sample_store, "--llm", "extractive")
    assert result.code == 0, result
    got = answers(result.stdout)
    assert set(got) == {"lib", 3}
    single = run_cli("ask", LIBRARY, "--store", sample_store, "--llm", "extractive", "--json").json()
    # The same fields as `ask --json`, plus id and the answer's own exit code.
    assert set(got["lib"]) == set(single) | {"id", "exit_code"}
    assert got["lib"]["answer"] == single["answer"] and got["lib"]["exit_code"] == 0
    assert got[3]["question"] == OVEN and got[3]["status"] == "ok"


def test_exit_code_is_the_worst_of_the_answers(sample_store: Path, tmp_path: Path) -> None:
    unanswerable = "Zebra quantum xylophone?"
    cases = {
        (LIBRARY,): 0,
        (LIBRARY, unanswerable): 5,
        (LIBRARY, unanswerable, '{"id": 7, "text": "no question field"}'): 2,
        ('{"question": "broken json"', LIBRARY): 2,
    }
    for lines, expected in cases.items():
        questions = tmp_path / "q.txt"
        questions.write_text("\n".join(lines) + "\n")
        result = run_cli("ask", "--questions", questions, "--store", sample_store, "--llm", "extractive")
        assert result.code == expected, (lines, result)
        got = [json.loads(line) for line in result.stdout.splitlines()]
        assert len(got) == len(lines)  # a bad line is answered in its place, the rest still run
    bad = [json.loads(line) for line in result.stdout.splitlines() if json.loads(line)["status"] == "error"]
    assert "q.txt:1: not valid JSON" in bad[0]["reason"]
    assert "docsum: question 1: error:" in result.stderr


def test_one_bad_line_of_a_questions_file_costs_only_itself(sample_store: Path, tmp_path: Path) -> None:
    """A byte that is not UTF-8 refused the whole file, a line nested 100,000
    deep was a traceback, and a byte-order mark made the first JSON line a
    literal question."""
    questions = tmp_path / "q.jsonl"
    questions.write_bytes(
        b"\xef\xbb\xbf"
        + json.dumps({"id": "lib", "question": LIBRARY}).encode()
        + b"\n"
        + b"caf\xe9 in latin-1?\n"
        + b'{"question": '
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}\n"
        + json.dumps({"id": "two\nlines\u001b[2J", "question": ""}).encode()
        + b"\r\n"
        + OVEN.encode()
        + b"\r\n"
    )
    result = run_cli("ask", "--questions", questions, "--store", sample_store, "--llm", "extractive")
    assert result.code == 2, result
    got = answers(result.stdout)
    assert got["lib"]["question"] == LIBRARY and got["lib"]["status"] == "ok"
    assert got[5]["question"] == OVEN and got[5]["status"] == "ok"
    assert got[2]["reason"] == f"{questions}:2: not UTF-8 text (byte 4 of the line)"
    assert got[3]["reason"] == f"{questions}:3: not valid JSON (nested too deeply)"
    assert got["two\nlines\u001b[2J"]["status"] == "error"  # the id is kept as given in the JSON...
    # ...but printed on one inert line.
    assert "docsum: question two\\nlines\\x1b[2J: error: the question is empty" in result.stderr, result.stderr


def test_questions_from_stdin_and_usage_errors(sample_store: Path, tmp_path: Path) -> None:
    result = run_cli(
        "ask", "--questions", "-", "--store", sample_store, "--llm", "extractive", input=f"{LIBRARY}\n{OVEN}\n"
    )
    assert result.code == 0 and sorted(answers(result.stdout)) == [1, 2]
    assert run_cli("ask", "--store", sample_store).code == 2
    assert run_cli("ask", LIBRARY, "--questions", "-", "--store", sample_store).code == 2
    missing = run_cli("ask", "--questions", tmp_path / "nope.txt", "--store", sample_store, "--llm", "extractive")
    assert missing.code == 2 and "nope.txt: cannot read the questions" in missing.stderr


def test_one_question_from_stdin(sample_store: Path) -> None:
    """`echo QUESTION | docsum ask -` asked "-" itself (and abstained)."""
    piped = run_cli("ask", "-", "--store", sample_store, "--llm", "extractive", "--json", input=f"  {OVEN}\n")
    typed = run_cli("ask", OVEN, "--store", sample_store, "--llm", "extractive", "--json")
    assert piped.code == typed.code == 0, piped
    assert json.loads(piped.stdout)["question"] == OVEN
    assert json.loads(piped.stdout)["answer"] == json.loads(typed.stdout)["answer"]
    marked = run_cli("ask", "-", "--store", sample_store, "--llm", "extractive", "--json", input=f"\ufeff{OVEN}\n")
    assert json.loads(marked.stdout)["question"] == OVEN  # a byte-order mark is not part of the question
    empty = run_cli("ask", "-", "--store", sample_store, "--llm", "extractive", input="\n")
    assert empty.code == 2 and "the question is empty" in empty.stderr


def test_questions_are_answered_concurrently_and_a_failed_one_is_reported_alone(tmp_path: Path) -> None:
    make_docs(tmp_path / "docs", 6)
    store = tmp_path / "s.sqlite"
    with FakeOpenAI() as fake:
        assert run_cli("build", tmp_path / "docs", "--store", store, *llm_args(fake)).code == 0

    def respond(body: dict[str, object]) -> Reply:
        text = json.dumps(body)
        if "DOCMARK003" in text:
            return Reply(status=400, error_message="this one is refused")
        return Reply(delay=0.3)

    with FakeOpenAI(responder=respond) as fake:
        questions = "".join(f"What does report {i} say about its topic DOCMARK{i:03d}?\n" for i in range(6))
        result = run_cli(
            "ask",
            "--questions",
            "-",
            "--store",
            store,
            *llm_args(fake),
            "--concurrency",
            "3",
            "--top-k",
            "1",
            input=questions,
        )
        assert fake.max_inflight >= 2  # several questions were in flight at once
        assert fake.max_inflight <= 3
    got = answers(result.stdout)
    assert len(got) == 6
    failed = [a for a in got.values() if a["status"] == "error"]
    assert len(failed) == 1 and failed[0]["exit_code"] == 1 and "refused" in str(failed[0]["reason"])
    assert all(a["status"] == "ok" for a in got.values() if a is not failed[0])
    assert result.code == 1


def test_max_calls_refuses_a_question_before_its_answer_with_the_plan(sample_store: Path, tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        result = run_cli(
            "ask",
            LIBRARY,
            "--store",
            sample_store,
            *llm_args(fake),
            "--embed-model",
            "docsum-lexical-v1",
            "--mode",
            "refine",
            "--max-calls",
            "1",
        )
        assert result.code == 2, result
        assert "plans" in result.stderr and "answer (refine)" in result.stderr and "--max-calls 1" in result.stderr
        assert fake.chat_requests() == []
        # The same limit from config.toml.
        config = tmp_path / "config.toml"
        config.write_text("max_calls = 1\n")
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("DOCSUM_CONFIG", str(config))
            again = run_cli(
                "ask",
                LIBRARY,
                "--store",
                sample_store,
                *llm_args(fake),
                "--embed-model",
                "docsum-lexical-v1",
                "--mode",
                "refine",
            )
            assert again.code == 2 and fake.chat_requests() == []
            shown = run_cli("config", "show", "--json").json()
            assert {"name": "max_calls", "value": 1} in [
                {k: r[k] for k in ("name", "value")} for r in shown["settings"]
            ]
        # Within the default it answers.
        ok = run_cli(
            "ask",
            LIBRARY,
            "--store",
            sample_store,
            *llm_args(fake),
            "--embed-model",
            "docsum-lexical-v1",
            "--mode",
            "refine",
        )
        assert ok.code == 0, ok


def test_the_rerank_plan_counts_the_batches_rerank_sends(sample_store: Path) -> None:
    """Rerank rates 10 passages a call whatever --choice-batch-size (which
    sizes the summaries' batches) says; the plan counted one call per
    --choice-batch-size passages."""
    result = run_cli(
        "ask",
        OVEN,
        "--store",
        sample_store,
        "--llm",
        "extractive",
        "--rerank",
        "5",
        "--choice-batch-size",
        "1",
        "--max-calls",
        "1",
    )
    assert result.code == 2, result
    # However many passages retrieval hands on (two or more), one rerank call.
    passages = re.search(r"over (\d+) passages", result.stderr)
    assert passages is not None and int(passages.group(1)) >= 2 and "rerank 1," in result.stderr


def test_llm_retrieval_over_a_large_store_warns_and_max_calls_refuses_it_before_any_call(
    sample_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(callplan, "EXPENSIVE_RETRIEVAL_CALLS", 3)  # the 8 sample documents count as "large"
    with FakeOpenAI() as fake:
        args = [
            "--store",
            sample_store,
            *llm_args(fake),
            "--embed-model",
            "docsum-lexical-v1",
            "--retriever",
            "llm",
            "--choice-batch-size",
            "1",
        ]
        refused = run_cli("ask", LIBRARY, *args, "--max-calls", "5")
        assert refused.code == 2 and "retrieval (llm) 8" in refused.stderr and "--retriever hybrid" in refused.stderr
        assert fake.chat_requests() == []
        warned = run_cli("ask", LIBRARY, *args)
        assert "warning: LLM retrieval shows the LLM all 8 summaries" in warned.stderr
        assert "--retriever hybrid" in warned.stderr
        explained = run_cli("ask", LIBRARY, *args, "--explain", "--json")
        assert "explain: retrieval: LLM retrieval shows the LLM all 8 summaries" in explained.stderr
        assert any("--retriever hybrid" in w for w in explained.json()["warnings"])
        hybrid = run_cli("ask", LIBRARY, *args[:-4], "--retriever", "hybrid", "--choice-batch-size", "1")
        assert "LLM retrieval shows" not in hybrid.stderr


def test_build_max_calls_plans_first_and_refuses_without_a_call(tmp_path: Path) -> None:
    make_docs(tmp_path / "docs", 5)
    store = tmp_path / "s.sqlite"
    with FakeOpenAI() as fake:
        refused = run_cli("build", tmp_path / "docs", "--store", store, *llm_args(fake), "--max-calls", "4")
        assert refused.code == 2, refused
        assert "plans 5 LLM calls (5 file(s) to add" in refused.stderr
        assert fake.requests == [] and store_count(store) == 0
        done = run_cli("build", tmp_path / "docs", "--store", store, *llm_args(fake), "--max-calls", "5")
        assert done.code == 0 and store_count(store) == 5
