"""Each command's --help fits it: its own options first, then only the shared
options it uses, under a heading per group; an example or two; and the
top-level help names every format docsum reads. Read through the real CLI."""

from __future__ import annotations

import re

import pytest
from helpers import run_cli

from docsum.settings import SETTINGS

COMMANDS = {
    "build": ["build"],
    "ask": ["ask"],
    "eval": ["eval"],
    "summaries": ["summaries"],
    "show": ["show"],
    "remove": ["remove"],
    "config show": ["config", "show"],
    "mcp": ["mcp"],
}
MODEL_ONLY = ("--llm", "--model", "--base-url", "--context-window", "--concurrency", "--timeout", "--max-retries")


def sections(text: str) -> dict[str, str]:
    """--help split at its headings ("Options:", "Store options:", ...)."""
    parts = re.split(r"^(\w[\w ]*):\n", text, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def flags_in(section: str) -> set[str]:
    """The options a section lists (each row's first flag; not flags named in help text)."""
    return set(re.findall(r"^  (?:-\w, )?(--[a-z][a-z-]*)", section, flags=re.MULTILINE))


@pytest.mark.parametrize("command", list(COMMANDS))
def test_help_lists_own_options_first_and_only_the_shared_ones_used(command: str) -> None:
    result = run_cli(*COMMANDS[command], "--help")
    assert result.code == 0, result
    parts = sections(result.stdout)
    headings = [h for h in parts if h.endswith("options") or h == "Options"]
    assert headings[0] == "Options", headings
    own = {s.option for s in SETTINGS if command in s.commands and not s.group}
    assert flags_in(parts["Options"]) - {"--help"} == own
    for group in ("Store", "Model", "Output"):
        expected = {s.option for s in SETTINGS if s.group == group and command in s.commands}
        assert flags_in(parts.get(f"{group} options", "")) == expected, (command, group)
    assert "Examples" in parts and "docsum " in parts["Examples"], command


@pytest.mark.parametrize("command", ["summaries", "show", "remove"])
def test_commands_that_call_no_model_do_not_list_model_options(command: str) -> None:
    text = run_cli(*COMMANDS[command], "--help").stdout
    for flag in MODEL_ONLY:
        assert flag not in text, (command, flag)
    assert len(text.splitlines()) <= 30, text


def test_mcp_help_does_not_offer_json_its_stdout_is_the_protocol() -> None:
    assert "--json" not in run_cli("mcp", "--help").stdout


def test_an_unlisted_shared_option_is_still_accepted(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Scripts that pass the same flags to every command keep working.
    result = run_cli("summaries", "--store", tmp_path / "s.sqlite", "--base-url", "http://127.0.0.1:9/v1")
    assert "No such option" not in result.stderr, result


def test_top_level_help_names_every_format_read() -> None:
    from docsum.ingest.formats import SUPPORTED_SUFFIXES

    text = " ".join(run_cli("--help").stdout.split())
    for suffix in SUPPORTED_SUFFIXES:
        assert re.search(rf"{re.escape(suffix)}\b", text), suffix
    for name in ("PDF", "Word", "HTML", "Markdown", "text"):
        assert name in text, name
