"""One exit code per cause, the same in every command: a store or index that
does not exist is exit 2, naming the indexes that do; exit 5 is only
"nothing to answer from". Through the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli, write_file

from docsum.errors import EXIT_CODE_MEANINGS, ExitCode

READERS = {
    "ask": ["ask", "what is stored?"],
    "summaries": ["summaries"],
    "show": ["show", "anything"],
    "remove": ["remove", "anything"],
    "eval": ["eval", "QUESTIONS"],
}


@pytest.fixture
def two_indexes(tmp_path: Path) -> Path:
    write_file(tmp_path / "docs" / "a.txt", "The orchard report says the apples were late this year.\n")
    for name in ("alpha", "beta"):
        assert run_cli("build", tmp_path / "docs", "--index", name).code == 0
    write_file(tmp_path / "q.jsonl", '{"question": "apples?", "gold_docs": ["a.txt"]}\n')
    return tmp_path


@pytest.mark.parametrize("command", list(READERS))
def test_a_missing_index_is_exit_2_naming_the_indexes_that_exist(command: str, two_indexes: Path) -> None:
    args = [str(two_indexes / "q.jsonl") if a == "QUESTIONS" else a for a in READERS[command]]
    result = run_cli(*args, "--index", "nosuch")
    assert result.code == ExitCode.USAGE, result
    assert result.stdout == ""
    line = result.stderr.strip().splitlines()[-1]
    assert "no index 'nosuch'" in line and "alpha, beta" in line, line
    as_json = run_cli(*args, "--index", "nosuch", "--json")
    assert as_json.code == 2 and as_json.json()["error"]["exit_code"] == 2


@pytest.mark.parametrize("command", list(READERS))
def test_a_missing_store_file_is_exit_2_in_every_command(command: str, two_indexes: Path) -> None:
    args = [str(two_indexes / "q.jsonl") if a == "QUESTIONS" else a for a in READERS[command]]
    result = run_cli(*args, "--store", two_indexes / "typo.sqlite")
    assert result.code == 2, result
    assert "no store at" in result.stderr and "alpha, beta" in result.stderr
    assert not (two_indexes / "typo.sqlite").exists()


@pytest.mark.parametrize("command", list(READERS))
def test_a_store_and_an_index_at_once_is_exit_2(command: str, two_indexes: Path) -> None:
    # Before: --store won without a word, and `ask … --store S --index nosuch`
    # answered (or abstained, exit 5) from S.
    args = [str(two_indexes / "q.jsonl") if a == "QUESTIONS" else a for a in READERS[command]]
    store = two_indexes / "s.sqlite"
    assert run_cli("build", two_indexes / "docs", "--store", store, "-q").code == 0
    result = run_cli(*args, "--store", store, "--index", "nosuch")
    assert result.code == ExitCode.USAGE, result
    assert result.stdout == ""
    assert "give --store or --index, not both" in result.stderr


def test_an_empty_store_is_still_exit_5(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert run_cli("build", tmp_path / "empty", "--index", "blank").code == 0
    assert run_cli("ask", "anything?", "--index", "blank").code == ExitCode.NOTHING_TO_ANSWER


def test_help_lists_every_exit_code_from_the_one_declaration() -> None:
    text = run_cli("--help").stdout
    for code in ExitCode:
        assert code in EXIT_CODE_MEANINGS
        assert f"  {int(code):<5}" in text, code
