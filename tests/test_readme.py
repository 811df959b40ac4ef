"""The README is what a new user reads first: short, standing alone in a clone,
its links alive, and its test command the one CI runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
USER_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_is_short() -> None:
    assert len(README.splitlines()) <= 250


def test_the_test_command_is_the_one_ci_runs() -> None:
    commands = re.findall(r"(?m)^python3 -m venv \.venv && .*pytest.*$", README)
    assert len(commands) == 1, commands
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[0] in ci.splitlines()


def test_every_relative_link_exists() -> None:
    for doc in USER_DOCS:
        text = doc.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            assert (doc.parent / target).exists(), f"{doc.name} links to missing {target}"


def test_user_docs_speak_of_no_issue_round_or_path_outside_the_repo() -> None:
    for doc in USER_DOCS:
        text = doc.read_text(encoding="utf-8")
        for pattern in (
            r"\bissues? \d+",
            r"\b(this|last|next|second|first) round\b|\bround \d",
            r"design card",
            r"/var/cache",
            r"\.\./shared",
        ):
            assert not re.search(pattern, text, re.IGNORECASE), f"{doc.name}: {pattern}"
