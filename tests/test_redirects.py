"""A redirect never sends the documents elsewhere: a server answering 301,
302, 303, 307 or 308 with a Location on another origin (scheme, host, port)
gets no second request sent anywhere; the command fails with one line naming
both origins, and the other server sees nothing. A redirect within the same
origin is followed. Both servers are real ones on 127.0.0.1 (tests/fakeopenai.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakeopenai import FakeOpenAI, Reply
from helpers import llm_args, run_cli

SAMPLE_DOCS = Path(__file__).resolve().parents[1] / "sample_data" / "docs"


@pytest.fixture
def other() -> FakeOpenAI:
    with FakeOpenAI() as server:
        yield server


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_origin_is_refused_naming_both(
    status: int, fake_llm: FakeOpenAI, other: FakeOpenAI, offline_sample_store: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store.sqlite"
    store.write_bytes(offline_sample_store.read_bytes())
    elsewhere = other.base_url.replace("127.0.0.1", "localhost") + "/chat/completions"
    fake_llm.script(*[Reply(status=status, headers={"Location": elsewhere}) for _ in range(6)])
    result = run_cli("ask", "How long do the loaves bake?", "--store", store, *llm_args(fake_llm), "--json")
    assert result.code == 1, result
    assert other.requests == []  # nothing re-sent, body or not
    assert len([r for r in fake_llm.requests if r.path.endswith("/chat/completions")]) == 1  # and no retry
    message = result.json()["error"]["message"]
    here = fake_llm.base_url.removesuffix("/v1")
    there = other.base_url.removesuffix("/v1").replace("127.0.0.1", "localhost")
    assert here in message and there in message and "redirect" in message
    lines = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(lines) == 1 and here in lines[0] and there in lines[0]


def test_a_build_whose_server_redirects_elsewhere_sends_no_document(
    fake_llm: FakeOpenAI, other: FakeOpenAI, tmp_path: Path
) -> None:
    elsewhere = other.base_url + "/chat/completions"  # another port on the same host: another origin
    fake_llm.responder = lambda body: Reply(status=307, headers={"Location": elsewhere})
    result = run_cli("build", SAMPLE_DOCS, "--store", tmp_path / "s.sqlite", *llm_args(fake_llm))
    assert result.code in (1, 3), result
    assert other.requests == []
    assert "redirect" in result.stderr and other.base_url.removesuffix("/v1") in result.stderr
    # Whole, with what to do (it was cut at 200 characters, before the advice).
    assert "set --base-url to the server that should answer" in result.stderr, result.stderr


def test_a_redirect_within_the_same_origin_is_followed(
    fake_llm: FakeOpenAI, offline_sample_store: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store.sqlite"
    store.write_bytes(offline_sample_store.read_bytes())
    same = fake_llm.base_url + "/chat/completions"
    fake_llm.script(Reply(status=307, headers={"Location": same}), "They bake for forty minutes.")
    result = run_cli("ask", "How long do the loaves bake?", "--store", store, *llm_args(fake_llm), "--mode", "compact")
    assert result.code == 0, result
    assert "forty minutes" in result.stdout
    chats = [r for r in fake_llm.requests if r.path.endswith("/chat/completions")]
    assert len(chats) == 2 and chats[0].body == chats[1].body  # the same request, followed once
