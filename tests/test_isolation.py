"""The tests' environment clean-up is built from the settings table, so a
developer's shell (DOCSUM_LLM=openai, a DOCSUM_BASE_URL, a key) never reaches
a test, and every variable docsum's code reads is declared in that table."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, isolate_docsum_env

from docsum.settings import SETTINGS, environment_variables

HOSTILE = {
    "DOCSUM_LLM": "openai",
    "DOCSUM_BASE_URL": "http://127.0.0.1:9/v1",
    "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    "OPENAI_API_KEY": "sk-from-the-outer-shell",
    "DOCSUM_TOP_K": "7",
    "DOCSUM_SOMETHING_NEW": "x",
}


def test_every_variable_the_code_reads_is_declared() -> None:
    read = set()
    for folder in ("docsum", "cli"):
        for path in (REPO / folder).rglob("*.py"):
            read |= set(re.findall(r"\b(?:DOCSUM|OPENAI)_[A-Z_]+[A-Z]\b", path.read_text(encoding="utf-8")))
    assert read - set(environment_variables()) == set()


def test_isolation_unsets_every_declared_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [*environment_variables(), *HOSTILE]:
        monkeypatch.setenv(name, HOSTILE.get(name, "1"))
    isolate_docsum_env(monkeypatch, tmp_path / "home")
    left = {name for name in os.environ if name in environment_variables() or name.startswith("DOCSUM_")}
    assert left == {"DOCSUM_HOME"}
    assert {var for s in SETTINGS for var in s.env} <= set(environment_variables())


def test_suite_holds_with_a_hostile_outer_environment(tmp_path: Path) -> None:
    # Tests that rely on the offline default, run in a shell that points docsum at a server.
    env = {**os.environ, **HOSTILE}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            f"--basetemp={tmp_path / 'inner'}",
            "tests/test_ask.py::test_missing_store_is_a_usage_error_not_exit_5",
            "tests/test_exit_codes.py",
            "tests/test_ask.py::test_exit_5_empty_store",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout
