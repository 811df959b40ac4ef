"""A document cannot act on the terminal (issue 15, class 4): text and file
names from documents are printed without control sequences, and a name with
a newline keeps one line per file."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import run_cli

NASTY_NAME = "evil\n\x1b[2Jname\x1b]0;title\x07.txt"
NASTY_TEXT = "Bees\x1b[31m report\x1b[0m: the hive\x9b2J is \u202efine\u202c and \x07 quiet.\r\nMore bees here.\n"


def _assert_inert(text: str) -> None:
    for bad in ("\x1b", "\x07", "\x9b", "\u202e", "\r"):
        assert bad not in text, (bad, text)


def test_file_names_and_text_from_documents_cannot_act_on_the_terminal(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / NASTY_NAME).write_text(NASTY_TEXT, encoding="utf-8")
    (docs / "plain.txt").write_text("Plain notes about the ferry timetable.\n", encoding="utf-8")
    store = tmp_path / "s.sqlite"

    built = run_cli("build", docs, "--store", store, "-v")
    assert built.code == 0, built
    _assert_inert(built.stdout + built.stderr)
    added = [line for line in built.stderr.splitlines() if line.startswith("added")]
    assert len(added) == 2 and any("evil\\n\\x1b[2Jname" in line for line in added), built.stderr

    listed = run_cli("summaries", "--store", store)
    assert listed.code == 0, listed
    _assert_inert(listed.stdout)
    assert len(listed.stdout.splitlines()) == 2  # one line per file, whatever the name holds

    for args in (
        ["show", "evil\n\x1b[2Jname\x1b]0;title\x07.txt"],
        ["ask", "What is the hive like?", "--no-stream"],
        ["ask", "What is the hive like?", "--stream"],
        ["ask", "hive", "--mode", "context_only"],
    ):
        result = run_cli(*args, "--store", store)
        assert result.code == 0, (args, result)
        _assert_inert(result.stdout + result.stderr)

    # JSON keeps every character, as escapes that do nothing on a terminal.
    as_json = run_cli("summaries", "--store", store, "--json")
    _assert_inert(as_json.stdout)
    assert NASTY_NAME in {d["path"] for d in json.loads(as_json.stdout)}
