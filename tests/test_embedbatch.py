"""SummaryEmbedder on its own, against a loopback OpenAI-protocol server: when
a shared embedding request goes out, and whose usage it is."""

from __future__ import annotations

import asyncio

import numpy as np
from fakeopenai import FakeOpenAI, default_embedding

from docsum.builder.embedbatch import SummaryEmbedder
from docsum.models.llm import track_calls
from docsum.models.openaillm import OpenAILLM


def make_llm(fake: FakeOpenAI) -> OpenAILLM:
    return OpenAILLM(
        model="fake-chat", embed_model="fake-embed", base_url=fake.base_url, api_key="test", max_retries=0, timeout=10
    )


def test_a_batch_sent_when_a_document_leaves_is_charged_to_a_waiting_document(fake_llm: FakeOpenAI) -> None:
    """Three documents: two wait for vectors, the third finishes without one.
    Its leaving sends the batch; the request's usage must land in a waiting
    document's scope (committed with it), not in the leaver's closed one."""
    llm = make_llm(fake_llm)
    scopes: dict[str, list] = {}

    async def run() -> dict[str, np.ndarray]:
        embedder = SummaryEmbedder(llm, capacity=16, window=30)  # the timer must not be what sends
        vectors: dict[str, np.ndarray] = {}

        async def waiting_document(name: str) -> None:
            try:
                with track_calls() as calls:
                    scopes[name] = calls
                    vectors[name] = await embedder.embed(f"summary of {name}")
            finally:
                embedder.leave()

        async def document_without_vector() -> None:
            with track_calls() as calls:
                scopes["leaver"] = calls
                await asyncio.sleep(0.05)  # e.g. its summary failed
            embedder.leave()

        for _ in range(3):  # all three are being worked on before any waits
            embedder.enter()
        await asyncio.gather(waiting_document("a"), waiting_document("b"), document_without_vector())
        return vectors

    vectors = asyncio.run(run())
    (request,) = fake_llm.embedding_requests()
    assert request.body["input"] == ["summary of a", "summary of b"]
    for name in ("a", "b"):
        expected = np.asarray(default_embedding(f"summary of {name}", vectors[name].shape[0]), dtype=np.float32)
        assert np.allclose(vectors[name], expected / np.linalg.norm(expected), atol=1e-5)
    assert [c.kind for c in scopes["a"]] == ["embed"]  # the first waiting document carries the request
    assert scopes["b"] == [] and scopes["leaver"] == []


def test_the_window_sends_a_lone_summary_while_others_are_still_busy(fake_llm: FakeOpenAI) -> None:
    llm = make_llm(fake_llm)

    async def run() -> float:
        embedder = SummaryEmbedder(llm, capacity=16, window=0.2)
        embedder.enter()
        embedder.enter()  # a second document, still summarizing for the whole test
        loop = asyncio.get_running_loop()
        started = loop.time()
        await embedder.embed("the only summary so far")
        return loop.time() - started

    waited = asyncio.run(run())
    assert len(fake_llm.embedding_requests()) == 1
    assert 0.15 < waited < 5  # sent by the window, not by the busy neighbour


def test_a_summary_goes_at_once_when_every_other_document_waits_in_a_request(fake_llm: FakeOpenAI) -> None:
    """Documents whose vectors are already on the way cannot join a batch: the
    last summaries of a build are sent as they come, beside the request in
    flight, not after it (which made the build's tail one request per batch)."""
    from fakeopenai import Reply

    fake_llm.script_embeddings(Reply(delay=0.5))  # the first request is still out when the third summary comes
    llm = make_llm(fake_llm)

    async def run() -> None:
        embedder = SummaryEmbedder(llm, capacity=16, window=60)  # the timer must not be what sends

        async def document(name: str, after: float) -> None:
            if after:
                await asyncio.sleep(after)
                embedder.enter()
            try:
                await embedder.embed(f"summary of {name}")
            finally:
                embedder.leave()

        embedder.enter()
        embedder.enter()  # a and b are worked on from the start, c starts later
        await asyncio.gather(document("a", 0), document("b", 0), document("c", 0.2))

    asyncio.run(run())
    inputs = sorted(r.body["input"] for r in fake_llm.embedding_requests())
    assert inputs == [["summary of a", "summary of b"], ["summary of c"]]
    assert fake_llm.max_inflight == 2
