"""Against a real OpenAI-compatible server: llama.cpp's, with a tiny model.

`.ci/integration` starts the server and sets DOCSUM_IT_BASE_URL; without it
these tests are skipped (and the default suite deselects them anyway). The model
is far too small to answer well, so we assert structure, never wording.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.process]  # a real server, and docsum as a subprocess

BASE_URL = os.environ.get("DOCSUM_IT_BASE_URL")
REPO = Path(__file__).resolve().parents[2]
MODES = [
    "refine",
    "compact",
    "tree_summarize",
    "simple_summarize",
    "no_text",
    "context_only",
    "accumulate",
    "compact_accumulate",
]

if not BASE_URL:
    pytest.skip("DOCSUM_IT_BASE_URL is not set (see .ci/integration)", allow_module_level=True)


# The model is slow on 2 cores: short answers keep the suite to a few minutes.
SERVER = ("--model", "gemma", "--context-window", "4096", "--max-output-tokens", "48")


def docsum(
    *args: str, env_extra: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    os.environ["DOCSUM_HOME"] = str(home)
    docs = tmp_path_factory.mktemp("docs")
    for name in (
        "railway_trust_minutes_2019-10.txt",
        "brindle_and_daughter_bakery.md",
        "library_renovation_fact_sheet.pdf",
    ):
        shutil.copy(REPO / "sample_data" / "docs" / name, docs / name)
    path = home / "it.sqlite"
    done = docsum("build", str(docs), "--store", str(path), "--base-url", BASE_URL, *SERVER, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["documents"]["added"] == 3
    assert report["usage"]["llm_calls"] >= 3
    assert report["usage"]["prompt_tokens"] > 0 and report["usage"]["completion_tokens"] > 0
    return path


def test_rebuild_is_free(store: Path, tmp_path: Path) -> None:
    docs_root = json.loads(docsum("summaries", "--store", str(store), "--json").stdout)
    assert len(docs_root) == 3 and all(d["summary"].strip() for d in docs_root)


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_answers(store: Path, mode: str) -> None:
    done = docsum(
        "ask",
        "When was the surplus auction held?",
        "--store",
        str(store),
        "--base-url",
        BASE_URL,
        *SERVER,
        "--mode",
        mode,
        "--json",
    )
    assert done.returncode in (0, 5), done.stderr
    result = json.loads(done.stdout)
    assert result["mode"] == mode
    if done.returncode == 0:
        assert result["sources"], "an answer lists its sources"
        if mode not in ("no_text", "context_only"):
            assert result["usage"]["llm_calls"] >= 1
            assert result["answer"].strip()


def test_streaming_prints_the_answer(store: Path) -> None:
    done = docsum(
        "ask",
        "What did the bakery buy?",
        "--store",
        str(store),
        "--base-url",
        BASE_URL,
        *SERVER,
        "--stream",
    )
    assert done.returncode == 0, done.stderr
    answer = done.stdout.split("\nSources:")[0]
    assert answer.strip()
    assert "Sources:" in done.stdout


def test_llm_retriever_parses_or_falls_back(store: Path) -> None:
    done = docsum(
        "ask",
        "Who designed the library renovation?",
        "--store",
        str(store),
        "--base-url",
        BASE_URL,
        *SERVER,
        "--retriever",
        "llm",
        "--json",
    )
    assert done.returncode in (0, 5), done.stderr
    json.loads(done.stdout)


def test_over_long_prompt_is_reported_in_one_line(tmp_path: Path) -> None:
    # A long document indexed offline, then asked through the server while
    # claiming a window far larger than its real 4096 tokens: the prompt
    # overflows and the server refuses it. docsum must say so in one line.
    docs = tmp_path / "docs"
    docs.mkdir()
    text = (REPO / "sample_data" / "docs" / "storm_wren_incident_report.txt").read_text(encoding="utf-8")
    (docs / "long.txt").write_text("\n\n".join([text] * 8), encoding="utf-8")
    store = tmp_path / "long.sqlite"
    built = docsum("build", str(docs), "--store", str(store), "--llm", "extractive")
    assert built.returncode == 0, built.stderr
    done = docsum(
        "ask",
        "Summarize the storm.",
        "--store",
        str(store),
        "--base-url",
        BASE_URL,
        "--model",
        "gemma",
        "--context-window",
        "60000",
        "--max-output-tokens",
        "64",
        "--mode",
        "simple_summarize",
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    errors = [line for line in done.stderr.splitlines() if line.startswith("docsum: error")]
    assert len(errors) == 1 and "Traceback" not in done.stderr
