"""Input files are checked by type and bounded in size, and a pattern docsum
cannot honour is refused by name rather than warned about by a library
(issue 26: `"answer": 123` graded as a gold answer; `[[:alpha:]]*` printed
Python's FutureWarning with an installation path; a 500,000-line
.docsumignore still being applied after 100 s to six files)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from helpers import make_docs, run_cli, run_cli_subprocess, subprocess_env


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("answer", 123, "'answer' must be a string, not a number"),
        ("answer", True, "'answer' must be a string, not a boolean"),
        ("answer", ["x"], "'answer' must be a string, not a list"),
        ("gold_docs", 7, "'gold_docs' must be a list of strings, not a number"),
        # Issue 42: a string had been read as a list of one and graded.
        ("gold_docs", "doc000.txt", "'gold_docs' must be a list of strings, not a string"),
        ("gold_docs", ["doc000.txt", 3], "'gold_docs' must be a list of strings, not a list holding a number"),
        ("question", {"q": 1}, "'question' must be a non-empty string, not an object"),
        ("question", "  ", "'question' is empty"),
        ("answer_aliases", "fine", "'answer_aliases' must be a list of strings, not a string"),
        ("answer_aliases", [None], "'answer_aliases' must be a list of strings, not a list holding null"),
        ("kind", 2, "'kind' must be a string, not a number"),
        ("id", [1], "'id' must be a string or a number, not a list"),
        ("gold_docs", None, "no 'gold_docs' field"),  # None: the field left out
    ],
)
def test_an_eval_line_of_the_wrong_type_is_exit_2_naming_the_line(
    tmp_path: Path, field: str, value: object, reason: str
) -> None:
    make_docs(tmp_path / "docs", 2)
    store = tmp_path / "s.sqlite"
    assert run_cli("build", tmp_path / "docs", "--store", store).code == 0
    good = {"id": "1", "question": "What about bees?", "answer": "fine", "gold_docs": ["doc000.txt"]}
    bad = {**good, "id": "2", field: value}
    if value is None:
        del bad[field]
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    done = run_cli("eval", questions, "--answers", "--store", store)
    assert done.code == 2, done
    assert done.stderr.strip().splitlines()[-1] == f"docsum: error: {questions}:2: not a question line ({reason})"


def test_a_posix_class_in_an_exclude_pattern_is_exit_2_naming_it(tmp_path: Path) -> None:
    make_docs(tmp_path / "docs", 2)
    done = run_cli_subprocess("build", tmp_path / "docs", "--store", tmp_path / "s.db", "--exclude", "[[:alpha:]]*")
    assert done.code == 2, done
    assert "Warning" not in done.stderr and "site-packages" not in done.stderr
    assert "bad exclude pattern '[[:alpha:]]*'" in done.stderr


def test_the_same_pattern_in_a_docsumignore_fails_that_root_by_name(tmp_path: Path) -> None:
    make_docs(tmp_path / "docs", 2)
    (tmp_path / "docs" / ".docsumignore").write_text("*.log\n[[:digit:]]*.txt\n")
    done = run_cli_subprocess("build", tmp_path / "docs", "--store", tmp_path / "s.db")
    assert done.code == 3, done
    assert "Warning" not in done.stderr
    assert f"{tmp_path / 'docs' / '.docsumignore'}: bad exclude pattern '[[:digit:]]*.txt'" in done.stderr


def test_a_huge_docsumignore_is_refused_at_once(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    make_docs(folder, 6)
    (folder / ".docsumignore").write_text("".join(f"pattern{i}*\n" for i in range(500_000)))
    started = time.monotonic()
    done = run_cli("build", folder, "--store", tmp_path / "s.db")
    assert time.monotonic() - started < 60  # was still matching after 100 s
    assert done.code == 3, done
    assert f"{folder / '.docsumignore'}: cannot read exclusions: is " in done.stderr
    assert "more than the 256 KB docsum reads of an ignore file" in done.stderr


def test_too_many_patterns_are_refused_by_count(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    make_docs(folder, 2)
    (folder / ".docsumignore").write_text("".join(f"p{i}\n" for i in range(1_001)))
    done = run_cli("build", folder, "--store", tmp_path / "s.db")
    assert done.code == 3 and "1,001 exclude patterns, more than the 1,000 docsum applies" in done.stderr, done
    many = [arg for i in range(1_001) for arg in ("--exclude", f"p{i}")]
    given = run_cli("build", folder, "--store", tmp_path / "s.db", *many)
    assert given.code == 2 and "--exclude: 1,001 exclude patterns" in given.stderr, given


@pytest.mark.parametrize("command", ["build", "ask", "eval"])
def test_an_answer_budget_that_leaves_no_prompt_room_is_refused_alike(tmp_path: Path, command: str) -> None:
    """`build` planned 233 calls for a 3,900-token window it could not fit;
    `ask` refused with "at most -550 fit". Now one check, one message."""
    make_docs(tmp_path / "docs", 1)
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "bees?", "gold_docs": ["doc000.txt"]}) + "\n")
    target = {"build": [tmp_path / "docs"], "ask": ["What about bees?"], "eval": [questions]}[command]
    limits = ["--max-output-tokens", "5000", "--context-window", "3900"]
    done = run_cli(command, *target, "--store", tmp_path / "s.db", *limits)
    assert done.code == 2, done
    assert done.stderr.strip().splitlines() == [
        "docsum: error: --max-output-tokens 5000 leaves no room for the prompt in a 3900-token context window "
        "(docsum needs at least 64); lower --max-output-tokens or raise --context-window"
    ]
    assert "-" + "550" not in done.stderr


def test_a_page_that_looks_like_a_url_draws_no_library_advice(tmp_path: Path) -> None:
    """bs4 printed twenty lines of MarkupResemblesLocatorWarning, with
    docsum's source path, for an HTML file whose text is a URL."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "link.html").write_text("https://example.com/page.html")
    (folder / "name.html").write_text("notes.txt")
    done = run_cli_subprocess("build", folder, "--store", tmp_path / "s.db")
    assert done.code == 0, done
    assert "Warning" not in done.stderr and ".py:" not in done.stderr and "BeautifulSoup" not in done.stderr
    assert all(line.startswith(("docsum", "added")) for line in done.stderr.splitlines()), done.stderr


WARNING_PLUGIN = """
import warnings

from docsum import BaseSynthesizer


class Warns(BaseSynthesizer):
    def plan(self, query_str, text_chunks, **kw):
        return 0

    def get_response(self, query_str, text_chunks, **kw):
        warnings.warn("this setting is going away\\nsee the docs", FutureWarning)
        return "ok"
"""


def test_a_python_warning_raised_in_a_command_is_one_docsum_line(tmp_path: Path) -> None:
    """Whatever library warns while a command runs (here: a custom
    synthesizer's own code), the user sees one line without a source path."""
    make_docs(tmp_path / "docs", 2)
    store = tmp_path / "s.db"
    assert run_cli_subprocess("build", tmp_path / "docs", "--store", store).code == 0
    (tmp_path / "warnplugin.py").write_text(WARNING_PLUGIN)
    env = subprocess_env()
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{env['PYTHONPATH']}"
    done = run_cli_subprocess("ask", "bees?", "--store", store, "--mode", "warnplugin:Warns", env=env)
    assert done.code == 0, done
    assert "docsum: warning: this setting is going away see the docs" in done.stderr.splitlines()
    assert "warnplugin.py" not in done.stderr and "FutureWarning" not in done.stderr
