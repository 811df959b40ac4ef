"""docs/guarantees.md names the tests behind each promise; a promise whose test
was renamed or deleted would be held to account by nothing, so this fails then."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUARANTEES = ROOT / "docs" / "guarantees.md"
NAMED = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    }


def named_tests(text: str) -> list[tuple[str, str]]:
    return NAMED.findall(text)


def test_every_promise_names_tests() -> None:
    text = GUARANTEES.read_text(encoding="utf-8")
    promises = re.split(r"(?m)^\d+\. ", text)[1:]
    assert len(promises) >= 10
    for promise in promises:
        assert named_tests(promise), f"a promise names no test: {promise[:80]!r}"


def test_every_named_test_exists() -> None:
    missing = []
    cache: dict[str, set[str]] = {}
    for file, name in named_tests(GUARANTEES.read_text(encoding="utf-8")):
        path = ROOT / file
        if file not in cache:
            cache[file] = _test_names(path) if path.is_file() else set()
        if name not in cache[file]:
            missing.append(f"{file}::{name}")
    assert not missing, "docs/guarantees.md names tests that do not exist: " + ", ".join(missing)


def test_the_check_finds_a_missing_test(tmp_path: Path) -> None:
    # The check above must be able to fail: a made-up name is not found.
    assert named_tests("`tests/test_cli.py::test_no_such_test_anywhere`") == [
        ("tests/test_cli.py", "test_no_such_test_anywhere")
    ]
    assert "test_no_such_test_anywhere" not in _test_names(ROOT / "tests" / "test_cli.py")
