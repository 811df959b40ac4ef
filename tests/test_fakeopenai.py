"""The fake server must speak OpenAI's protocol well enough for the real client.

These tests use the genuine `openai` client over real sockets, so a protocol
mistake in the fake (framing, SSE shape, error JSON) fails here rather than
showing up later as a confusing docsum test failure.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import urllib.error
import urllib.request

import httpx2
import openai
import pytest
from fakeopenai import FakeOpenAI, Reply, default_embedding


def _client(fake: FakeOpenAI, **kw: object) -> openai.OpenAI:
    opts: dict[str, object] = {"base_url": fake.base_url, "api_key": "test", "max_retries": 0}
    opts.update(kw)
    return openai.OpenAI(**opts)  # type: ignore[arg-type]


def _aclient(fake: FakeOpenAI, **kw: object) -> openai.AsyncOpenAI:
    opts: dict[str, object] = {"base_url": fake.base_url, "api_key": "test", "max_retries": 0}
    opts.update(kw)
    return openai.AsyncOpenAI(**opts)  # type: ignore[arg-type]


def test_chat_default_answer_usage_and_recording(fake_llm: FakeOpenAI) -> None:
    with _client(fake_llm) as client:
        resp = client.chat.completions.create(
            model="m",
            messages=[
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "one two three four five six seven eight nine ten eleven twelve thirteen"},
            ],
            response_format={"type": "json_object"},
        )
    assert resp.choices[0].message.content == "ANSWER: one two three four five six seven eight nine ten eleven twelve"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage is not None
    assert resp.usage.prompt_tokens == 2 + 13
    assert resp.usage.completion_tokens == 13
    (rec,) = fake_llm.chat_requests()
    assert rec.body["response_format"] == {"type": "json_object"}
    assert rec.headers["authorization"] == "Bearer test"
    assert rec.prompt.startswith("be brief\none two")
    assert [m["role"] for m in rec.messages] == ["system", "user"]
    assert rec.finished >= rec.started > 0


def test_script_then_responder_and_keepalive(fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = lambda body: "from responder"
    fake_llm.script("first", Reply(text="second", omit_usage=True))
    with _client(fake_llm) as client:
        texts = []
        for _ in range(3):
            r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
            texts.append(r.choices[0].message.content)
        assert r.usage is not None
        assert client.models.list().data[0].id
    assert texts == ["first", "second", "from responder"]
    assert len(fake_llm.requests) == 4


def test_chat_streaming_with_usage_chunk(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("  Hello   streaming world\n")
    with _client(fake_llm) as client:
        chunks = list(
            client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "a b c"}],
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "  Hello   streaming world\n"  # every space survives the split
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == 3
    assert all(c.usage is None for c in chunks[:-1])


def test_completions_plain_and_streaming(fake_llm: FakeOpenAI) -> None:
    with _client(fake_llm) as client:
        r = client.completions.create(model="m", prompt="alpha beta gamma")
        assert r.choices[0].text == "ANSWER: alpha beta gamma"
        assert r.usage is not None and r.usage.prompt_tokens == 3
        fake_llm.script("x y z")
        stream = client.completions.create(model="m", prompt="p", stream=True, stream_options={"include_usage": True})
        chunks = list(stream)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == "x y z"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 3


def test_embeddings_base64_default_and_float(fake_llm: FakeOpenAI) -> None:
    with _client(fake_llm) as client:
        r = client.embeddings.create(model="e", input=["red apples", "Red APPLES!", ""])
        f = client.embeddings.create(model="e", input="red apples", encoding_format="float")
        fake_llm.script_embeddings(Reply(embedding_dim=7))
        wrong = client.embeddings.create(model="e", input="x", encoding_format="float")
    base64_req, float_req, _ = fake_llm.embedding_requests()
    assert base64_req.body["encoding_format"] == "base64"  # the client's own default
    assert float_req.body["encoding_format"] == "float"
    vecs = [d.embedding for d in r.data]
    assert all(len(v) == 64 for v in vecs)
    assert vecs[0] == pytest.approx(vecs[1])  # case and punctuation do not matter
    assert vecs[0] == pytest.approx(f.data[0].embedding, abs=1e-6)  # float32 round trip
    assert math.isclose(math.fsum(x * x for x in f.data[0].embedding), 1.0, rel_tol=1e-9)
    assert f.data[0].embedding == default_embedding("red apples", 64)
    assert vecs[2][0] == pytest.approx(1.0)  # empty text: unit vector, not NaN
    assert r.usage.prompt_tokens == 4
    assert len(wrong.data[0].embedding) == 7


def test_rate_limit_then_success_with_client_retries(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Reply(status=429, error_message="slow down", headers={"Retry-After": "0"}), "ok now")
    with _client(fake_llm, max_retries=2) as client:
        r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    assert r.choices[0].message.content == "ok now"
    first, second = fake_llm.chat_requests()
    assert second.headers.get("x-stainless-retry-count") == "1"
    assert first.body == second.body


def test_error_json_shape(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Reply(status=400, error_message="too long", error_code="context_length_exceeded"))
    with _client(fake_llm) as client, pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    assert info.value.code == "context_length_exceeded"
    assert "too long" in str(info.value)


def test_malformed_json_body_and_raw_reply(fake_llm: FakeOpenAI) -> None:
    req = urllib.request.Request(
        fake_llm.base_url + "/chat/completions", data=b"{nope", headers={"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=5)
    assert info.value.code == 400
    assert "error" in json.loads(info.value.read())
    fake_llm.script(Reply(raw_body=b'{"choices": [oops'))
    with (
        _client(fake_llm) as client,
        pytest.raises((openai.APIResponseValidationError, json.JSONDecodeError, ValueError)),
    ):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])


def test_drop_mid_stream_breaks_the_connection(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Reply(text="one two three four five six", drop_mid_stream=True))
    got: list[str] = []
    with _client(fake_llm) as client:
        stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}], stream=True)
        with pytest.raises((openai.APIConnectionError, httpx2.HTTPError)):
            for chunk in stream:
                got.append(chunk.choices[0].delta.content or "")
        # The client must recover on a fresh connection afterwards.
        ok = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "again"}])
    assert got and "".join(got) != "one two three four five six"
    assert ok.choices[0].message.content == "ANSWER: again"


def test_concurrent_requests_overlap(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(*[Reply(delay=0.2) for _ in range(4)])

    async def run() -> list[str | None]:
        async with _aclient(fake_llm) as client:
            results = await asyncio.gather(
                *[
                    client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"q{i}"}])
                    for i in range(4)
                ]
            )
        return [r.choices[0].message.content for r in results]

    answers = asyncio.run(run())
    assert sorted(answers) == [f"ANSWER: q{i}" for i in range(4)]
    # The server's own count of requests in flight at once proves the overlap
    # (a wall-clock bound did too, but failed on a loaded machine).
    assert fake_llm.max_inflight > 1
    fake_llm.reset()
    assert fake_llm.max_inflight == 0 and fake_llm.requests == []


def test_delay_beyond_client_timeout_raises(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Reply(delay=3.0))
    # The reply would have come after 3 s: the timeout error is the proof the
    # client gave up first (no wall-clock bound: it fails on a loaded machine).
    with _client(fake_llm, timeout=0.3) as client, pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])


def test_responder_exception_becomes_500(fake_llm: FakeOpenAI) -> None:
    def boom(body: dict[str, object]) -> str:
        raise RuntimeError("bug in test responder")

    fake_llm.responder = boom
    with _client(fake_llm) as client, pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    assert len(fake_llm.errors) == 1


def test_stop_is_prompt_with_kept_alive_connections() -> None:
    fake = FakeOpenAI(latency=0.01).start()
    with _client(fake) as client:
        client.models.list()
        t0 = time.monotonic()
        fake.stop()
    assert time.monotonic() - t0 < 1.0
