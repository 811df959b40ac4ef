"""`--max-calls` is a hard limit (issue 26): the plan counts every call a
mode can make, and while the answer or the build runs, the call that would
exceed the limit is never sent (exit 2, with what was spent). A FakeOpenAI
server on 127.0.0.1 counts what actually arrived."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fakeopenai import FakeOpenAI
from helpers import kind_of, llm_args, make_docs, run_cli

from docsum.synthesizers import BUILTIN_MODES

# A window so small that every mode that can split its work does.
SMALL = ["--context-window", "600", "--max-output-tokens", "200"]
QUESTION = "What do the reports say about bees and bridges?"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("costguard")
    make_docs(root / "docs", 6, words=400)
    store = root / "s.sqlite"
    assert run_cli("build", root / "docs", "--store", store).code == 0  # offline: no server needed
    return store


def _chat(fake: FakeOpenAI) -> int:
    return len(fake.chat_requests())


@pytest.mark.parametrize("mode", sorted(BUILTIN_MODES))
def test_max_calls_holds_in_every_mode(built: Path, mode: str) -> None:
    args = ["ask", QUESTION, "--store", built, "--mode", mode, "--retriever", "hybrid", *SMALL]
    with FakeOpenAI() as fake:
        free = run_cli(*args, *llm_args(fake), "--max-calls", "1000", "--explain")
        assert free.code == 0, free.stderr
        needed = _chat(fake)
        # The explained plan is the answer's (retrieval's choice calls are planned apart).
        answering = sum(1 for r in fake.chat_requests() if kind_of(r.body) != "choice")
        planned = re.search(r"(\d+) LLM call\(s\) in", free.stderr)
        assert planned is not None, free.stderr
        assert answering <= int(planned.group(1)), (mode, answering, free.stderr)  # the plan is an upper bound
        if needed < 2:
            return  # nothing to cut
        for limit in sorted({1, needed - 1}):
            fake.reset()
            held = run_cli(*args, *llm_args(fake), "--max-calls", str(limit))
            assert held.code == 2, (mode, limit, held)
            assert _chat(fake) <= limit, (mode, limit, _chat(fake))
            assert "--max-calls" in held.stderr and "LLM calls" in held.stderr


def test_tree_summarize_reproduction_sends_no_more_than_the_limit(built: Path) -> None:
    """The issue's case: planned 10, sent 13."""
    with FakeOpenAI() as fake:
        done = run_cli(
            "ask", QUESTION, "--store", built, "--mode", "tree_summarize", *SMALL, "--max-calls", "10", *llm_args(fake)
        )
        assert _chat(fake) <= 10, (_chat(fake), done.stderr)
        assert done.code in (0, 2), done
        if done.code == 2:
            assert "nothing more was sent" in done.stderr or "was not sent" in done.stderr


def test_build_max_calls_is_held_while_the_build_runs(tmp_path: Path) -> None:
    """The build's plan counts one summary call per small document; a
    server that makes each summary cost more (a reply that is refused and
    asked again is one call each) cannot push it past the limit."""
    make_docs(tmp_path / "docs", 5)
    store = tmp_path / "s.sqlite"
    with FakeOpenAI() as fake:
        done = run_cli("build", tmp_path / "docs", "--store", store, *llm_args(fake), "--max-calls", "5")
        assert done.code == 0, done.stderr
        assert _chat(fake) <= 5
