"""What a new user notices (issue 14, "Consistency"): one JSON document for
every outcome with --json, --version, help that names values plainly, an
honest model name and cost against a custom server, and nothing ignored in
silence."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakeopenai import FakeOpenAI, Reply
from helpers import llm_args, make_docs, run_cli, run_cli_subprocess

OFFLINE_NOTICE = "docsum: no API key or base URL configured"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "s.sqlite"
    make_docs(tmp_path / "docs", 2)
    assert run_cli("build", tmp_path / "docs", "--store", path, "-q").code == 0
    return path


def _error_document(result: object, code: int, kind: str) -> str:
    assert result.code == code, result  # type: ignore[attr-defined]
    error = result.json()["error"]  # type: ignore[attr-defined]
    assert error["exit_code"] == code and error["type"] == kind
    return str(error["message"])


def test_with_json_every_error_is_one_json_document(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One retry, not the default four: the errors are the same, the back-off waits are not.
    monkeypatch.setenv("DOCSUM_MAX_RETRIES", "1")
    assert "unknown response mode 'foo'" in _error_document(
        run_cli("ask", "q", "--mode", "foo", "--json", "--store", store), 2, "ConfigError"
    )
    dead = run_cli("ask", "bees?", "--store", store, "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--json")
    assert "cannot reach" in _error_document(dead, 1, "LLMError")
    with FakeOpenAI() as fake:
        fake.script(*[Reply(status=500, error_message="boom")] * 10)
        failed = run_cli("ask", "bees?", "--store", store, *llm_args(fake), "--json")
        assert "answered 500" in _error_document(failed, 1, "LLMError")
    readme = tmp_path / "README.md"
    readme.write_text("# notes\n", encoding="utf-8")
    refused = run_cli("build", tmp_path / "docs", "--store", readme, "--json")
    assert "not a docsum store" in _error_document(refused, 1, "DocsumError")


def test_version() -> None:
    result = run_cli("--version")
    assert result.code == 0 and result.stdout.startswith("docsum ") and result.stdout.split()[1][0].isdigit()


@pytest.mark.parametrize("command", ["build", "ask", "eval", "summaries", "config show"])
def test_help_names_values_plainly(command: str) -> None:
    result = run_cli(*command.split(), "--help")
    assert result.code == 0, result
    options = [line for line in result.stdout.splitlines() if line.lstrip().startswith("--")]
    assert options
    for line in options:
        assert "<" not in line.split("  ")[0].strip(), line  # "--wait FLOAT", never "--wait <float range>"


def test_a_custom_server_without_a_model_says_which_model_and_prices_nothing(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    make_docs(tmp_path / "docs", 1)
    result = run_cli(
        "build", tmp_path / "docs", "--store", tmp_path / "s.sqlite", "--base-url", fake_llm.base_url, "--json"
    )
    assert result.code == 0, result
    assert f"asking {fake_llm.base_url} for model 'gpt-4o-mini'" in result.stderr
    assert result.json()["estimated_cost_usd"] is None  # a local "gpt-4o-mini" is not OpenAI's price
    assert fake_llm.chat_requests()[0].body["model"] == "gpt-4o-mini"


def test_the_offline_engine_says_what_it_ignores(store: Path, tmp_path: Path) -> None:
    asked = run_cli("ask", "bees?", "--store", store, "--polish", "--emotion", "EP01")
    assert asked.code == 0, asked
    assert "offline engine ignores --polish and --emotion" in asked.stderr
    built = run_cli("build", tmp_path / "docs", "--store", store, "--summary-language", "French")
    assert "offline engine ignores --summary-language" in built.stderr
    unused = run_cli("ask", "bees?", "--store", store, "--var", "tone=dry")
    assert unused.code == 0 and "--var tone: no --template or --refine-template uses it" in unused.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--mode", "foo"],
        ["--cutoff", "2"],
        ["--var", "novalue"],
        ["--emotion", "EP99"],
        ["--top-k", "0"],
        ["--llm", "gpt"],
        ["--template", "missing.txt"],
        ["--questions", "q.txt"],
    ],
)
def test_a_usage_error_comes_alone_before_any_engine_notice(store: Path, args: list[str]) -> None:
    """Everything the command was given is checked before the engine says
    anything: whatever the kind of usage error, stderr is that one line."""
    result = run_cli("ask", "bees?", "--store", store, *args)
    assert result.code == 2, result
    assert result.stderr.splitlines() == [result.stderr.strip()] and result.stderr.startswith("docsum: error:"), (
        result.stderr
    )


@pytest.mark.parametrize(
    "args", [["ask", "--questions", "missing.jsonl"], ["build", "missing-folder"], ["eval", "missing.jsonl"]]
)
def test_a_file_named_on_the_command_line_is_checked_before_the_notice(tmp_path: Path, args: list[str]) -> None:
    result = run_cli(*args[:-1], tmp_path / args[-1], "--store", tmp_path / "s.sqlite")
    assert result.code == 2, result
    assert result.stderr.splitlines() == [result.stderr.strip()] and "missing" in result.stderr, result.stderr


@pytest.mark.parametrize("command", [["ask", "bees?"], ["build", "."], ["eval", "questions.jsonl"]])
def test_an_error_during_the_run_follows_the_engine_notice(tmp_path: Path, command: list[str]) -> None:
    """Once the command goes on to work, the notice comes first, then the error."""
    not_a_store = tmp_path / "README.md"
    not_a_store.write_text("# notes\n", encoding="utf-8")
    (tmp_path / "questions.jsonl").write_text('{"question": "q", "gold_docs": ["a"]}\n', encoding="utf-8")
    result = run_cli(
        *[str(tmp_path / a) if a in (".", "questions.jsonl") else a for a in command], "--store", not_a_store
    )
    assert result.code == 1, result
    lines = result.stderr.splitlines()
    assert lines[0].startswith(OFFLINE_NOTICE) and lines[-1].startswith("docsum: error:"), lines


def test_a_usage_error_from_the_option_parser_is_a_json_document_too(tmp_path: Path) -> None:
    """`docsum ask q --top-kk 3 --json` as a real process: the parser's own
    error on stderr, exit 2, and the error document on stdout; a value out of
    range is the same document from the settings check."""
    result = run_cli_subprocess("ask", "q", "--top-kk", "3", "--json", "--store", tmp_path / "s.sqlite")
    assert result.code == 2, result
    assert "--top-kk" in result.stderr
    error = result.json()["error"]
    assert error["exit_code"] == 2 and error["type"] == "UsageError" and "--top-kk" in error["message"]
    plain = run_cli_subprocess("ask", "q", "--top-kk", "3", "--store", tmp_path / "s.sqlite")
    assert plain.code == 2 and plain.stdout == ""
    ranged = run_cli_subprocess("ask", "q", "--top-k", "0", "--json", "--store", tmp_path / "s.sqlite")
    assert "--top-k: bad value for top_k" in _error_document(ranged, 2, "ConfigError")
    version = run_cli_subprocess("--version")
    assert version.code == 0 and version.stdout.startswith("docsum ")


@pytest.mark.parametrize("question", ["   ", "many words " * 100])
@pytest.mark.parametrize("server", [False, True])
def test_an_empty_or_too_long_question_is_refused_before_the_engine(store: Path, question: str, server: bool) -> None:
    """Like every usage error: alone on stderr, exit 2, the JSON error
    document, and before the engine is made or announced (against a server,
    its window comes from the settings: nothing is asked of it)."""
    engine = ["--base-url", "http://127.0.0.1:9/v1"] if server else []
    result = run_cli("ask", question, "--store", store, "--context-window", "300", "--json", *engine)
    message = _error_document(result, 2, "ConfigError")
    assert (
        message == "the question is empty"
        or message.startswith("the question is 200 tokens long")
        or "300-token" in message
    ), message
    assert result.stderr.splitlines() == [f"docsum: error: {message}"], result.stderr


@pytest.mark.parametrize(
    "flags",
    [
        {},
        {"context_window": "5000", "max_output_tokens": "300"},
        {"base_url": "http://127.0.0.1:9/v1", "model": "gpt-4o"},
        {"base_url": "http://127.0.0.1:9/v1", "model": "llama3"},
    ],
)
def test_the_question_check_before_the_engine_agrees_with_the_engine(flags: dict[str, str]) -> None:
    from docsum.config import load_settings, make_llm, question_room
    from docsum.query.question import QuestionRoom

    settings = load_settings(flags, environ={})
    early, engine = question_room(settings), QuestionRoom.of(make_llm(settings)[0].metadata)
    assert (early.context_window, early.num_output, early.limit) == (
        engine.context_window,
        engine.num_output,
        engine.limit,
    )
    assert (early.tokenizer.encoding.name, early.tokenizer.margin) == (
        engine.tokenizer.encoding.name,
        engine.tokenizer.margin,
    )


def test_eval_refuses_a_mode_it_would_not_use(store: Path, tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"question": "bees?", "gold_docs": ["doc0.txt"]}\n', encoding="utf-8")
    refused = run_cli("eval", questions, "--mode", "refine", "--store", store, "--json")
    assert "--mode says how answers are written" in _error_document(refused, 2, "ConfigError")
    assert refused.stderr.splitlines() == [refused.stderr.strip()], refused.stderr
    answered = run_cli("eval", questions, "--mode", "refine", "--answers", "--store", store, "--json")
    assert answered.code == 0, answered
    assert answered.json()["answers"]["mode"] == "refine"


def test_the_note_names_exactly_what_is_ignored(store: Path, tmp_path: Path) -> None:
    """The offline engine ignores the wording a built-in mode's prompts get
    (a template, an emotion stimulus, the polish pass); a mode that writes no
    answer has nothing to polish, whatever the engine. (A custom synthesizer
    given the template: tests/test_custom_synth.py.)"""
    template = tmp_path / "qa.txt"
    template.write_text("Be brief.\n{context_str}\n{query_str}\n", encoding="utf-8")
    worded = run_cli("ask", "bees?", "--store", store, "--template", template)
    assert worded.code == 0, worded
    assert "docsum: note: the offline engine ignores --template (it steers a language model)" in worded.stderr
    no_text = run_cli("ask", "bees?", "--store", store, "--mode", "no_text", "--polish")
    assert no_text.code == 0, no_text
    assert "the no_text mode writes no answer, so --polish has no effect" in no_text.stderr
    assert "offline engine ignores" not in no_text.stderr
