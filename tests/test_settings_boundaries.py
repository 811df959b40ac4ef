"""Every setting is checked where it enters, whether from a flag, the
environment or config.toml: the same ranges, exit 2, and the message names
where the bad value came from (issue 15, class 2)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import run_cli

# (setting, environment variable, bad value)
BAD_VALUES = [
    ("timeout", "DOCSUM_TIMEOUT", "abc"),
    ("timeout", "DOCSUM_TIMEOUT", "nan"),
    ("timeout", "DOCSUM_TIMEOUT", "inf"),
    ("timeout", "DOCSUM_TIMEOUT", "-1"),
    ("timeout", "DOCSUM_TIMEOUT", "0"),
    ("max_retries", "DOCSUM_MAX_RETRIES", "-1"),
    ("max_retries", "DOCSUM_MAX_RETRIES", "1e9"),
    ("concurrency", "DOCSUM_CONCURRENCY", "0"),
    ("context_window", "DOCSUM_CONTEXT_WINDOW", "10"),
    ("max_output_tokens", "DOCSUM_MAX_OUTPUT_TOKENS", "1"),
    ("chunk_size", "DOCSUM_CHUNK_SIZE", "2"),
    ("chunk_overlap", "DOCSUM_CHUNK_OVERLAP", "-5"),
    ("top_k", "DOCSUM_TOP_K", "0"),
    ("base_url", "OPENAI_BASE_URL", "http://127.0.0.1:99999/v1"),
    ("base_url", "OPENAI_BASE_URL", "http://127.0.0.1:0/v1"),
    ("base_url", "OPENAI_BASE_URL", "http://127.0.0.1:port/v1"),
    ("base_url", "OPENAI_BASE_URL", "ftp://127.0.0.1/v1"),
    ("base_url", "OPENAI_BASE_URL", "127.0.0.1:8080"),
    ("llm", "DOCSUM_LLM", "gpt"),
]


@pytest.mark.parametrize(("name", "variable", "value"), BAD_VALUES)
def test_a_bad_value_from_the_environment_is_exit_2_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    result = run_cli("config", "show")
    assert result.code == 2, result
    assert f"environment variable {variable}: bad value for {name}" in result.stderr
    assert "internal error" not in result.stderr


@pytest.mark.parametrize(("name", "variable", "value"), BAD_VALUES)
def test_a_bad_value_from_the_config_file_is_exit_2_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, variable: str, value: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'{name} = "{value}"\n', encoding="utf-8")
    monkeypatch.setenv("DOCSUM_CONFIG", str(config))
    result = run_cli("config", "show")
    assert result.code == 2, result
    assert f"{config}: bad value for {name}" in result.stderr


def test_a_config_file_from_a_windows_editor_is_read_and_one_in_latin_1_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A byte-order mark was "Invalid statement (at line 1, column 1)", and a
    file that is not UTF-8 was an error that did not name the file."""
    config = tmp_path / "config.toml"
    monkeypatch.setenv("DOCSUM_CONFIG", str(config))
    config.write_bytes(b"\xef\xbb\xbftop_k = 2\r\n")
    result = run_cli("config", "show")
    assert result.code == 0, result
    assert re.search(r"top_k\s*=\s*2\b", result.stdout), result.stdout
    config.write_bytes(b'top_k = 2\nmodel = "caf\xe9"\n')
    result = run_cli("config", "show")
    assert result.code == 2, result
    assert f"{config}: cannot read config file (not UTF-8 text: byte 23)" in result.stderr


@pytest.mark.parametrize(
    "toml",
    ["timeout = nan", "timeout = inf", "concurrency = 2.5", "concurrency = true", "top_k = [1]", "timeout = {a = 1}"],
)
def test_a_config_value_of_the_wrong_kind_is_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(toml + "\n", encoding="utf-8")
    monkeypatch.setenv("DOCSUM_CONFIG", str(config))
    result = run_cli("config", "show")
    assert result.code == 2, result
    assert str(config) in result.stderr and "bad value for" in result.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--base-url", "http://127.0.0.1:70000/v1"], "--base-url: bad value for base_url"),
        (["--base-url", "localhost:8080"], "--base-url: bad value for base_url"),
        (["--llm", "gpt"], "'gpt' is not one of auto, openai, extractive"),
        (["--concurrency", "1000"], "--concurrency: bad value for concurrency"),
        (["--max-output-tokens", "4"], "--max-output-tokens"),
        (["--context-window", "100"], "--context-window"),
    ],
)
def test_a_bad_flag_is_exit_2_naming_the_flag(args: list[str], said: str) -> None:
    result = run_cli("ask", "anything?", *args)
    assert result.code == 2, result
    assert said in result.stderr


@pytest.mark.parametrize("cutoff", ["1.5", "-0.1", "nan"])
def test_cutoff_outside_0_to_1_is_exit_2(cutoff: str) -> None:
    result = run_cli("ask", "anything?", "--cutoff", cutoff)
    assert result.code == 2, result
    assert "--cutoff" in result.stderr


def test_chunk_overlap_against_chunk_size_names_both_sources(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCSUM_CHUNK_OVERLAP", "300")
    result = run_cli("build", tmp_path, "--chunk-size", "200")
    assert result.code == 2, result
    assert "env DOCSUM_CHUNK_OVERLAP" in result.stderr and "flag" in result.stderr


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"\xff\xfe not text\n", "not UTF-8 text"),
        (b"[" * 100_000 + b"]" * 100_000 + b"\n", "nested too deeply"),
        (b"[1, 2]\n", "a JSON object is expected"),
        (b'{"question": "q", "gold_docs": 5}\n', "'gold_docs' must be"),
        (b'{"question": {"a": 1}, "gold_docs": ["x"]}\n', "'question' must be"),
        (b'{"question": "q", "gold_docs": [{"a": 1}]}\n', "'gold_docs' must be"),
        (b'{"question": "q", "gold_docs": ["a"], "kind": ["x"]}\n', "'kind' must be"),
        (b'{"question": "q", "gold_docs": ["a"], "answer": {"x": 1}}\n', "'answer' must be"),
    ],
)
def test_a_bad_eval_file_is_exit_2_naming_the_line(tmp_path: Path, content: bytes, said: str) -> None:
    questions = tmp_path / "questions.jsonl"
    questions.write_bytes(content)
    result = run_cli("eval", questions, "--store", tmp_path / "none.sqlite")
    assert result.code == 2, result
    assert str(questions) in result.stderr and said in result.stderr
    assert "internal error" not in result.stderr


# -- one declaration (issue 14, redesign item 1) --------------------------------

HELP_COMMANDS = ["build", "ask", "eval", "summaries", "show", "remove", "config show"]


@pytest.mark.parametrize("command", HELP_COMMANDS)
def test_help_is_generated_from_the_declarations(command: str) -> None:
    """Each command's --help has exactly the options docsum.settings gives it,
    with the declared metavar, and names its arguments plainly (`PATH...`,
    never `{PATH}...` or `PATH <list[Path]>`)."""
    from docsum.settings import SETTINGS

    text = run_cli(*command.split(), "--help").stdout
    flags = set(re.findall(r"^\s+(?:-\w, )?(--[\w-]+)", text, re.MULTILINE)) - {"--help"}
    assert flags == {s.option for s in SETTINGS if command in s.commands}
    for setting in SETTINGS:
        if command in setting.commands and not (setting.kind.switch or setting.kind.toggle):
            assert f"{setting.option} {setting.kind.metavar}" in text, setting.name
    usage = next(line for line in text.splitlines() if line.startswith("Usage:"))
    arguments = text.split("Arguments:")[1].split("Options:")[0] if "Arguments:" in text else ""
    for part in (usage, arguments):
        assert "<" not in part and not re.search(r"\{[A-Z]", part), part


def test_usage_lines_name_arguments_plainly() -> None:
    assert "Usage: docsum build [OPTIONS] PATH..." in run_cli("build", "--help").stdout
    assert "Usage: docsum ask [OPTIONS] [QUESTION]" in run_cli("ask", "--help").stdout
    assert "Usage: docsum show [OPTIONS] DOC" in run_cli("show", "--help").stdout
    arguments = run_cli("eval", "--help").stdout.split("Arguments:")[1].split("Options:")[0]
    assert arguments.split()[0] == "QUESTIONS" and "<" not in arguments


def test_a_flag_that_is_not_a_config_setting_is_refused_in_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("dry_run = true\n", encoding="utf-8")
    monkeypatch.setenv("DOCSUM_CONFIG", str(config))
    result = run_cli("config", "show")
    assert result.code == 2 and "unknown setting(s) dry_run" in result.stderr


def test_every_new_flag_of_the_table_reaches_config_show(tmp_path: Path) -> None:
    result = run_cli("config", "show", "--json", "--timeout", "5", "--max-retries", "1")
    rows = {r["name"]: r for r in result.json()["settings"]}
    assert (rows["timeout"]["value"], rows["timeout"]["source"]) == (5.0, "flag")
    assert (rows["max_retries"]["value"], rows["max_retries"]["source"]) == (1, "flag")


def test_options_made_in_python_meet_the_declared_ranges(tmp_path: Path) -> None:
    """AskOptions from Python are checked by the same declarations as the
    command line (not by a second copy of the ranges)."""
    import asyncio

    from docsum.errors import ConfigError
    from docsum.models.extractive import ExtractiveLLM
    from docsum.query.ask import AskOptions, ask

    for options, said in (
        (AskOptions(top_k=0), "--top-k: 0 is out of range"),
        (AskOptions(cutoff=1.5), "--cutoff: 1.5 is out of range"),
        (AskOptions(retriever="bogus"), "--retriever: 'bogus' is not one of"),
    ):
        with pytest.raises(ConfigError, match=said):
            asyncio.run(ask(tmp_path / "none.sqlite", ExtractiveLLM(), "q?", options))


# -- limits computed once (issue 14, redesign item 2) ---------------------------


def test_concurrency_sets_every_limit_in_one_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """One --concurrency gives the LLM, the build and the question runner
    their limits, all from the same record."""
    from docsum.config import ask_options, build_options, load_settings, make_llm

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings = load_settings({"concurrency": "3"}, environ={})
    llm, _ = make_llm(settings)
    limits = settings.limits
    assert (limits.requests, limits.documents, limits.embed_batch, limits.questions) == (3, 6, 16, 3)
    assert llm.limits == limits
    assert build_options(settings, [Path(".")]).limits == limits
    assert ask_options(settings, llm, stream=False).limits == limits
    assert load_settings({"concurrency": "12"}, environ={}).limits.embed_batch == 48
    shown = run_cli("config", "show", "--json", "--concurrency", "5").json()["limits"]
    assert (shown["requests"], shown["documents"], shown["questions"]) == (5, 10, 5)
    # Offline no request is sent, so only the documents and questions limits are shown.
    assert "limits = 10 documents and 5 questions at once" in run_cli("config", "show", "--concurrency", "5").stdout
    assert (
        "limits = 5 LLM requests, 10 documents and 5 questions at once"
        in run_cli("config", "show", "--concurrency", "5", "--base-url", "http://127.0.0.1:9/v1").stdout
    )
