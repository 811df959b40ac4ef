"""OpenAILLM against a real HTTP server speaking the OpenAI protocol.

Nothing is patched: requests go through openai -> httpx2 -> sockets to
FakeOpenAI, so retries, timeouts, SSE parsing and error bodies are the real
thing.
"""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np
import pytest
from fakeopenai import FakeOpenAI, Reply, word_count

from docsum.errors import ContextLengthError, LLMError
from docsum.models.llm import PER_MESSAGE_TOKENS, REPLY_PRIMER_TOKENS, context_window_for, estimated_cost, track_calls
from docsum.models.openaillm import OpenAILLM
from docsum.models.prompts import TEXT_QA_PROMPT, PromptTemplate
from docsum.schema import Usage
from docsum.settings import Limits

KEY = "sk-test-SECRET-0123456789abcdef"
FAST_RETRY = {"retry-after-ms": "1"}  # the client honours this; "Retry-After: 0" would mean its 0.5 s backoff
Q = {"context_str": "Bees make honey in hives.", "query_str": "What do bees make?"}


def make_llm(fake: FakeOpenAI, **kw: object) -> OpenAILLM:
    opts: dict[object, object] = {
        "model": "fake-chat",
        "base_url": fake.base_url,
        "api_key": KEY,
        "max_retries": 0,
        "timeout": 10,
    }
    opts.update(kw)
    return OpenAILLM(**opts)  # type: ignore[arg-type]


async def _collect(llm: OpenAILLM, template: PromptTemplate = TEXT_QA_PROMPT, **values: str) -> list[str]:
    return [piece async for piece in llm.astream(template, **(values or Q))]


# -- completions ---------------------------------------------------------------


def test_chat_completion_text_messages_and_server_usage(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Reply(text="Honey.", usage={"prompt_tokens": 77, "completion_tokens": 5, "total_tokens": 82}))
    llm = make_llm(fake_llm, num_output=123, temperature=0.3)
    assert llm.predict(TEXT_QA_PROMPT, **Q) == "Honey."
    (req,) = fake_llm.chat_requests()
    assert req.messages == TEXT_QA_PROMPT.format_messages(**Q)
    assert req.body["model"] == "fake-chat"
    assert req.body["max_tokens"] == 123
    assert req.body["temperature"] == 0.3
    assert "stream" not in req.body and "response_format" not in req.body
    assert req.headers["authorization"] == f"Bearer {KEY}"
    (call,) = llm.calls
    assert (call.kind, call.model, call.prompt_tokens, call.completion_tokens) == ("text_qa", "fake-chat", 77, 5)
    assert call.ok and not call.counted_locally and call.seconds >= 0


def test_usage_counted_locally_when_server_omits_it(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Reply(text="Honey and wax.", omit_usage=True))
    llm = make_llm(fake_llm)
    llm.predict(TEXT_QA_PROMPT, **Q)
    (call,) = llm.calls
    assert call.counted_locally
    messages = TEXT_QA_PROMPT.format_messages(**Q)
    tok = llm.metadata.tokenizer
    expected = sum(tok.count(m["content"]) + PER_MESSAGE_TOKENS for m in messages) + REPLY_PRIMER_TOKENS
    assert call.prompt_tokens == expected == llm.count_messages(messages)
    assert call.completion_tokens == tok.count("Honey and wax.")


def test_no_key_server_gets_placeholder_key_and_repr_hides_key(fake_llm: FakeOpenAI) -> None:
    keyless = make_llm(fake_llm, api_key=None)
    keyless.predict(TEXT_QA_PROMPT, **Q)
    assert fake_llm.chat_requests()[0].headers["authorization"] == "Bearer no-key-needed"
    llm = make_llm(fake_llm)
    assert KEY not in repr(llm) and KEY not in str(llm)
    assert "fake-chat" in repr(llm) and fake_llm.base_url in repr(llm)


# -- streaming -----------------------------------------------------------------


def test_streaming_yields_pieces_and_records_usage_from_final_chunk(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(
        Reply(text="Bees make honey and wax.", usage={"prompt_tokens": 40, "completion_tokens": 6, "total_tokens": 46})
    )
    llm = make_llm(fake_llm)
    pieces = asyncio.run(_collect(llm))
    assert len(pieces) > 1
    assert "".join(pieces) == "Bees make honey and wax."
    (req,) = fake_llm.chat_requests()
    assert req.body["stream"] is True
    assert req.body["stream_options"] == {"include_usage": True}
    (call,) = llm.calls
    assert (call.prompt_tokens, call.completion_tokens, call.counted_locally) == (40, 6, False)


def test_streaming_without_usage_chunk_counts_locally(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Reply(text="one two three", omit_usage=True))
    llm = make_llm(fake_llm)
    assert "".join(asyncio.run(_collect(llm))) == "one two three"
    (call,) = llm.calls
    assert call.counted_locally and call.completion_tokens == llm.metadata.tokenizer.count("one two three")


def test_server_rejecting_stream_options_is_asked_again_without_them(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Reply(status=400, error_message="Unrecognized request argument: stream_options"), "fine then")
    llm = make_llm(fake_llm)
    assert "".join(asyncio.run(_collect(llm))) == "fine then"
    first, second = fake_llm.chat_requests()
    assert "stream_options" in first.body and "stream_options" not in second.body
    # remembered for later requests
    asyncio.run(_collect(llm))
    assert "stream_options" not in fake_llm.chat_requests()[-1].body


def test_drop_mid_stream_raises_llm_error_during_iteration(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Reply(text="one two three four five six seven", drop_mid_stream=True))
    llm = make_llm(fake_llm)
    got: list[str] = []

    async def run() -> None:
        async for piece in llm.astream(TEXT_QA_PROMPT, **Q):
            got.append(piece)

    with pytest.raises(LLMError) as info:
        asyncio.run(run())
    assert got and "".join(got) != "one two three four five six seven"
    message = str(info.value)
    assert "\n" not in message and KEY not in message
    assert "broke off" in message
    assert llm.calls[-1].ok is False


# -- embeddings ----------------------------------------------------------------


def test_embeddings_rows_are_l2_normalised_in_input_order(fake_llm: FakeOpenAI) -> None:
    llm = make_llm(fake_llm, embed_model="fake-embed")
    vecs = llm.embed(["red apples", "green pears", ""])
    assert vecs.shape == (3, 64) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    (req,) = fake_llm.embedding_requests()
    assert req.body["model"] == "fake-embed"
    assert req.body["input"][2] == " "  # empty texts are sent as a space, not rejected
    assert llm.calls[-1].kind == "embed" and llm.calls[-1].prompt_tokens == 4


def test_embeddings_unnormalised_server_vectors_are_normalised_and_reordered(fake_llm: FakeOpenAI) -> None:
    body = {
        "object": "list",
        "model": "fake-embed",
        "data": [
            {"object": "embedding", "index": 1, "embedding": [0.0, 5.0, 0.0]},
            {"object": "embedding", "index": 0, "embedding": [3.0, 0.0, 4.0]},
        ],
        "usage": {"prompt_tokens": 2, "total_tokens": 2},
    }
    fake_llm.script_embeddings(Reply(raw_body=json.dumps(body).encode()))
    llm = make_llm(fake_llm)
    vecs = llm.embed(["a", "b"])
    assert np.allclose(vecs, [[0.6, 0.0, 0.8], [0.0, 1.0, 0.0]])


def test_embeddings_batches_of_64(fake_llm: FakeOpenAI) -> None:
    llm = make_llm(fake_llm)
    vecs = llm.embed([f"text {i}" for i in range(130)])
    assert vecs.shape[0] == 130
    assert [len(r.body["input"]) for r in fake_llm.embedding_requests()] == [64, 64, 2]
    assert llm.embed([]).shape[0] == 0


# -- failures ------------------------------------------------------------------


def test_rate_limit_with_retry_after_then_success(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Reply(status=429, error_message="slow down", headers={"Retry-After": "0.01"}), "ok now")
    llm = make_llm(fake_llm, max_retries=2)
    assert llm.predict(TEXT_QA_PROMPT, **Q) == "ok now"
    first, second = fake_llm.chat_requests()
    assert second.headers.get("x-stainless-retry-count") == "1"
    assert first.body == second.body
    assert [c.ok for c in llm.calls] == [True]


def test_server_error_after_retries_raises_one_line_llm_error_without_key(fake_llm: FakeOpenAI) -> None:
    # The last reply echoes the key, as some proxies do with a bad Authorization header.
    fake_llm.script(
        Reply(status=500, error_message="upstream\nexploded", headers=FAST_RETRY),
        Reply(status=500, error_message="upstream\nexploded", headers=FAST_RETRY),
        Reply(status=500, error_message=f"upstream exploded\n  while using key {KEY}", headers=FAST_RETRY),
    )
    llm = make_llm(fake_llm, max_retries=2)
    with pytest.raises(LLMError) as info:
        llm.predict(TEXT_QA_PROMPT, **Q)
    assert not isinstance(info.value, ContextLengthError)
    message = str(info.value)
    assert len(fake_llm.chat_requests()) == 3
    assert "\n" not in message
    assert "500" in message and "upstream exploded" in message
    assert KEY not in message and KEY[:12] not in message
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert llm.calls[-1].ok is False


def test_long_error_message_is_cut_without_leaking_key_prefix(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Reply(status=401, error_message="x" * 190 + " key " + KEY))
    llm = make_llm(fake_llm)
    with pytest.raises(LLMError) as info:
        llm.predict(TEXT_QA_PROMPT, **Q)
    assert KEY[:8] not in str(info.value)
    assert "401" in str(info.value)


def test_timeout_raises_llm_error(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Reply(delay=2.0))
    llm = make_llm(fake_llm, timeout=0.2, max_retries=0)
    t0 = time.monotonic()
    with pytest.raises(LLMError, match="timed out"):
        llm.predict(TEXT_QA_PROMPT, **Q)
    assert time.monotonic() - t0 < 1.5


def test_connection_refused_raises_llm_error() -> None:
    with FakeOpenAI() as fake:
        url = fake.base_url
    llm = OpenAILLM(model="m", base_url=url, api_key=KEY, max_retries=0, timeout=2)
    with pytest.raises(LLMError, match="cannot reach") as info:
        llm.predict(TEXT_QA_PROMPT, **Q)
    assert KEY not in str(info.value)


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=400, error_message="too long", error_code="context_length_exceeded"),
        Reply(status=400, error_message="This model's maximum context length is 4096 tokens."),
    ],
)
def test_context_length_400_raises_context_length_error(fake_llm: FakeOpenAI, reply: Reply) -> None:
    fake_llm.script(reply)
    llm = make_llm(fake_llm, max_retries=2)
    with pytest.raises(ContextLengthError) as info:
        llm.predict(TEXT_QA_PROMPT, **Q)
    assert "fake-chat" in str(info.value)
    assert len(fake_llm.chat_requests()) == 1  # a 400 is not retried


def test_context_length_error_in_json_mode_is_not_retried_without_response_format(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(
        Reply(
            status=400,
            error_message="context length exceeded (response_format json)",
            error_code="context_length_exceeded",
        )
    )
    llm = make_llm(fake_llm)
    with pytest.raises(ContextLengthError):
        llm.predict(TEXT_QA_PROMPT, json_mode=True, **Q)
    assert len(fake_llm.chat_requests()) == 1


def test_json_mode_sends_response_format(fake_llm: FakeOpenAI) -> None:
    fake_llm.script('{"answer": "honey", "query_satisfied": true}')
    llm = make_llm(fake_llm)
    assert json.loads(llm.predict(TEXT_QA_PROMPT, json_mode=True, **Q))["answer"] == "honey"
    assert fake_llm.chat_requests()[0].body["response_format"] == {"type": "json_object"}


def test_json_mode_retries_without_response_format_when_rejected(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(
        Reply(status=400, error_message="response_format of type json_object is not supported by this model"),
        '{"answer": "honey", "query_satisfied": true}',
        '{"answer": "wax", "query_satisfied": true}',
    )
    llm = make_llm(fake_llm)
    assert json.loads(llm.predict(TEXT_QA_PROMPT, json_mode=True, **Q))["answer"] == "honey"
    assert json.loads(llm.predict(TEXT_QA_PROMPT, json_mode=True, **Q))["answer"] == "wax"
    bodies = [r.body for r in fake_llm.chat_requests()]
    assert ["response_format" in b for b in bodies] == [True, False, False]
    assert bodies[0]["messages"] == bodies[1]["messages"]
    assert len(llm.calls) == 2 and all(c.ok for c in llm.calls)


def test_unrelated_400_in_json_mode_surfaces_and_keeps_json_mode(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Reply(status=400, error_message="model 'nope' not found"), '{"answer": "a"}')
    llm = make_llm(fake_llm)
    with pytest.raises(LLMError, match="not found"):
        llm.predict(TEXT_QA_PROMPT, json_mode=True, **Q)
    assert len(fake_llm.chat_requests()) == 1
    llm.predict(TEXT_QA_PROMPT, json_mode=True, **Q)
    assert fake_llm.chat_requests()[-1].body["response_format"] == {"type": "json_object"}


# -- concurrency and accounting --------------------------------------------------


def test_concurrency_bound_holds(fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = lambda body: Reply(delay=0.15)
    llm = make_llm(fake_llm, limits=Limits.of(2))

    async def run() -> list[str]:
        return await asyncio.gather(
            *(llm.apredict(TEXT_QA_PROMPT, context_str=f"c{i}", query_str="q") for i in range(6))
        )

    answers = asyncio.run(run())
    assert len(answers) == 6 and len(fake_llm.chat_requests()) == 6
    assert fake_llm.max_inflight == 2
    assert len(llm.calls) == 6


def test_concurrency_bound_holds_for_streams_too(fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = lambda body: Reply(delay=0.1)
    llm = make_llm(fake_llm, limits=Limits.of(2))

    async def run() -> list[list[str]]:
        return await asyncio.gather(*(_collect(llm, context_str=f"c{i}", query_str="q") for i in range(5)))

    assert all(asyncio.run(run()))
    assert fake_llm.max_inflight <= 2


def test_track_calls_scopes(fake_llm: FakeOpenAI) -> None:
    llm = make_llm(fake_llm)

    async def run() -> tuple[list, list, list]:  # type: ignore[type-arg]
        await llm.apredict(TEXT_QA_PROMPT, **Q)  # outside every scope
        with track_calls() as outer:
            await llm.apredict(TEXT_QA_PROMPT, **Q)
            with track_calls() as inner:
                # tasks started inside the scope report to it
                await asyncio.gather(*(llm.apredict(TEXT_QA_PROMPT, **Q) for _ in range(2)))
            await llm.apredict(TEXT_QA_PROMPT, **Q)
        with track_calls() as other:
            await llm.aembed(["x"])
        return outer, inner, other

    outer, inner, other = asyncio.run(run())
    assert len(inner) == 2
    assert len(outer) == 4
    assert [c.kind for c in other] == ["embed"]
    assert len(llm.calls) == 6
    usage = Usage.of(outer)
    assert usage.llm_calls == 4 and usage.embedding_calls == 0
    assert usage.prompt_tokens == sum(word_count(r.prompt) for r in fake_llm.chat_requests()[1:5])


def test_failed_calls_are_recorded_not_ok(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Reply(status=503, headers=FAST_RETRY))
    llm = make_llm(fake_llm)
    with track_calls() as calls, pytest.raises(LLMError):
        llm.predict(TEXT_QA_PROMPT, **Q)
    assert [c.ok for c in calls] == [False]


def test_missing_template_variable_fails_before_any_request(fake_llm: FakeOpenAI) -> None:
    from docsum.errors import TemplateVariableError

    llm = make_llm(fake_llm)
    with pytest.raises(TemplateVariableError):
        llm.predict(PromptTemplate("{context_str} {tone}"), context_str="c")
    assert fake_llm.requests == []


def test_model_tables() -> None:
    assert context_window_for("gpt-4o-mini") == 128_000
    assert context_window_for("openai/gpt-4.1-nano") == 1_047_576
    assert context_window_for("llama3") == 3900
    assert context_window_for(None) == 3900
    assert estimated_cost("gpt-4o-mini", 1_000_000, 0) == pytest.approx(0.15)
    assert estimated_cost("llama3", 10, 10) is None


# -- replies read as plain JSON --------------------------------------------------


def test_a_page_that_is_not_json_is_named_so_whatever_its_content_type(fake_llm: FakeOpenAI) -> None:
    # The package's own parser handed a text/html body back as a string (which
    # then read as "a completion without choices"); docsum reads the JSON itself.
    fake_llm.script(Reply(raw_body=b"<html><body>502 Bad Gateway</body></html>", content_type="text/html"))
    llm = make_llm(fake_llm)
    with pytest.raises(LLMError, match=r"malformed response \(not JSON"):
        llm.predict(TEXT_QA_PROMPT, **Q)
    assert llm.calls[-1].ok is False


@pytest.mark.parametrize(
    "data,why",
    [
        ([], "returned 0 vectors for 2 texts"),
        ([{"index": 0, "embedding": "not base64!"}, {"index": 1, "embedding": "AAAAAA=="}], "malformed response"),
        ([{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": "AAAAAA=="}], "malformed response"),  # 3 bytes
        ([{"index": 0, "embedding": [True, False]}, {"index": 1, "embedding": [1.0, 0.0]}], "malformed response"),
        ([{"index": "0", "embedding": [1.0]}, {"index": 1, "embedding": [1.0]}], "malformed response"),
    ],
    ids=["no-vectors", "bad-base64", "partial-float", "booleans", "string-index"],
)
def test_an_embedding_reply_that_is_not_vectors_is_one_error(
    fake_llm: FakeOpenAI, data: list[object], why: str
) -> None:
    fake_llm.script_embeddings(Reply(raw_body=json.dumps({"object": "list", "data": data}).encode()))
    llm = make_llm(fake_llm)
    with pytest.raises(LLMError, match=why):
        llm.embed(["a", "b"])


def test_base64_and_list_vectors_read_alike(fake_llm: FakeOpenAI) -> None:
    import base64
    import struct

    vector = [3.0, 0.0, 4.0]
    packed = base64.b64encode(struct.pack("<3f", *vector)).decode()
    body = {"object": "list", "data": [{"index": 1, "embedding": vector}, {"index": 0, "embedding": packed}]}
    fake_llm.script_embeddings(Reply(raw_body=json.dumps(body).encode()))
    assert np.allclose(make_llm(fake_llm).embed(["a", "b"]), [[0.6, 0.0, 0.8], [0.6, 0.0, 0.8]])
