"""Response synthesizers against a real OpenAI-protocol server (FakeOpenAI) and
the offline engine: exact call counts, what every prompt carried, packing in
a small window, streaming only the final call, structured filtering, the
meta-answer guard, and the Python API for custom synthesizers."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from fakeopenai import FakeOpenAI, RecordedRequest, Reply, word_count

from docsum.errors import ConfigError, TemplateVariableError
from docsum.models.extractive import ExtractiveLLM
from docsum.models.llm import LLM
from docsum.models.openaillm import OpenAILLM
from docsum.models.prompts import (
    REFINE_PROMPT,
    RULE,
    STRUCTURED_SUFFIX,
    TEXT_QA_PROMPT,
    TREE_SUMMARIZE_PROMPT,
    PromptTemplate,
    structured,
)
from docsum.schema import Node, NodeWithScore, Response, ResponseMode, ResponseStatus
from docsum.synthesizers import (
    ACCUMULATE_SEPARATOR,
    BaseSynthesizer,
    get_response_synthesizer,
    is_meta_answer,
    iter_tokens,
    parse_structured,
)
from docsum.synthesizers.budget import PromptBudget

WINDOW = 600
OUTPUT = 64
Q = "What do the records say?"


# -- helpers -------------------------------------------------------------------


def make_llm(fake: FakeOpenAI, **kw: Any) -> OpenAILLM:
    opts: dict[str, Any] = {
        "model": "fake-chat",
        "base_url": fake.base_url,
        "api_key": "test-key",
        "context_window": WINDOW,
        "num_output": OUTPUT,
        "max_retries": 0,
        "timeout": 10,
    }
    opts.update(kw)
    return OpenAILLM(**opts)


def para(tag: str, sentences: int) -> str:
    """~11 tokens per sentence, every word tagged so a part's origin is visible."""
    return " ".join(f"{tag}{i} is a recorded fact about the {tag} topic." for i in range(sentences))


def nodes(*texts: str) -> list[NodeWithScore]:
    return [NodeWithScore(Node(t, doc_id="doc", seq=i), score=1.0) for i, t in enumerate(texts)]


def context_of(req: RecordedRequest) -> str:
    """The text between the two rule lines of the user message."""
    user = req.messages[-1]["content"]
    pieces = user.split(RULE)
    assert len(pieces) >= 3, user
    return pieces[1][1:-1]


def user_of(req: RecordedRequest) -> str:
    return req.messages[-1]["content"]


def long_answer(llm: LLM, tag: str) -> str:
    """An answer as long as the output budget allows."""
    words = [f"{tag}"] + ["honey"] * (OUTPUT * 2)
    text = " ".join(words)
    while llm.metadata.tokenizer.count(text) > OUTPUT:
        text = text.rsplit(" ", 1)[0]
    return text


def fits(llm: LLM, req: RecordedRequest) -> bool:
    return llm.count_messages(req.messages) <= WINDOW - OUTPUT


class Counter:
    """A responder answering 'answer 1', 'answer 2', ... in arrival order."""

    def __init__(self, delay: float = 0.0) -> None:
        self.n = 0
        self.delay = delay
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            self.n += 1
            return Reply(text=f"answer {self.n}", delay=self.delay)


def by_first_word(
    answer: Callable[[str], str], delay: Callable[[str], float] = lambda w: 0.0
) -> Callable[[dict[str, Any]], Reply]:
    """A responder whose reply depends only on the first word of the context,
    so concurrent calls get predictable answers in any arrival order."""

    def respond(body: dict[str, Any]) -> Reply:
        user = body["messages"][-1]["content"]
        ctx = user.split(RULE)[1].strip()
        first = ctx.split()[0] if ctx.split() else ""
        return Reply(text=answer(first), delay=delay(first))

    return respond


async def collect(stream: AsyncIterator[str] | None) -> list[str]:
    assert stream is not None
    return [piece async for piece in stream]


def stream_flags(fake: FakeOpenAI) -> list[bool]:
    return [bool(r.body.get("stream")) for r in fake.chat_requests()]


def qa(query: str = Q) -> PromptTemplate:
    return TEXT_QA_PROMPT.partial_format(query_str=query)


def refine_t(query: str = Q) -> PromptTemplate:
    return REFINE_PROMPT.partial_format(query_str=query)


def tree_t(query: str = Q) -> PromptTemplate:
    return TREE_SUMMARIZE_PROMPT.partial_format(query_str=query)


# -- refine ----------------------------------------------------------------------


def test_refine_one_call_per_chunk_with_exact_prompts(fake_llm: FakeOpenAI) -> None:
    a, b, c = para("alpha", 3), para("beta", 3), para("gamma", 3)
    fake_llm.script("first answer", "second answer", "third answer")
    llm = make_llm(fake_llm)
    resp = get_response_synthesizer("refine", llm=llm).synthesize(Q, nodes(a, b, c))
    assert resp.response == "third answer" and resp.status == ResponseStatus.OK
    r1, r2, r3 = fake_llm.chat_requests()
    assert r1.messages == TEXT_QA_PROMPT.format_messages(context_str=a, query_str=Q)
    assert r2.messages == REFINE_PROMPT.format_messages(query_str=Q, existing_answer="first answer", context_msg=b)
    assert r3.messages == REFINE_PROMPT.format_messages(query_str=Q, existing_answer="second answer", context_msg=c)
    assert resp.usage.llm_calls == 3
    assert [c.kind for c in resp.calls] == ["text_qa", "refine", "refine"]


def test_refine_splits_an_oversize_chunk_and_refines_against_the_newest_answer(fake_llm: FakeOpenAI) -> None:
    small, big = para("alpha", 3), para("beta", 70)
    counter = Counter()
    fake_llm.responder = counter
    llm = make_llm(fake_llm)
    budget = PromptBudget(llm.metadata)
    assert llm.metadata.tokenizer.count(big) > WINDOW
    parts = budget.repack(refine_t(), [big], extra_tokens=OUTPUT)
    assert len(parts) >= 3
    resp = get_response_synthesizer("refine", llm=llm).synthesize(Q, nodes(small, big))
    reqs = fake_llm.chat_requests()
    assert len(reqs) == 1 + len(parts)
    assert resp.response == f"answer {len(reqs)}"
    assert context_of(reqs[0]) == small
    for i, (req, part) in enumerate(zip(reqs[1:], parts), start=1):
        # each piece refines the answer the previous call gave (not a stale one)
        assert req.messages == REFINE_PROMPT.format_messages(
            query_str=Q, existing_answer=f"answer {i}", context_msg=part
        )
        assert fits(llm, req)


def test_refine_oversize_first_chunk_leaves_room_for_a_full_answer(fake_llm: FakeOpenAI) -> None:
    """The first chunk's later pieces go to the refine prompt with an answer:
    they must be sized for that, not for the QA prompt."""
    llm = make_llm(fake_llm)
    fake_llm.responder = lambda body: long_answer(llm, "ans")
    big = para("alpha", 60)
    synth = get_response_synthesizer("refine", llm=llm)
    resp = synth.synthesize(Q, nodes(big))
    reqs = fake_llm.chat_requests()
    assert len(reqs) == synth.plan(Q, [big]) and len(reqs) > 1
    assert "Current answer:" not in user_of(reqs[0])
    assert all("Current answer: ans honey" in user_of(r) for r in reqs[1:])
    assert all(fits(llm, r) for r in reqs), [llm.count_messages(r.messages) for r in reqs]
    assert resp.response.startswith("ans honey")
    _assert_parts_cover([big], [context_of(r) for r in reqs])


def _assert_parts_cover(chunks: list[str], parts: list[str]) -> None:
    words = " ".join(chunks).split()
    seen = set(" ".join(parts).split())
    assert set(words) <= seen


# -- compact -----------------------------------------------------------------------


def _compact_parts(llm: LLM, chunks: list[str], query: str = Q) -> list[str]:
    budget = PromptBudget(llm.metadata)
    if budget.available(refine_t(query), extra_tokens=OUTPUT) < budget.available(qa(query)):
        return budget.repack(refine_t(query), chunks, extra_tokens=OUTPUT)
    return budget.repack(qa(query), chunks)


def test_compact_packs_then_refines_over_the_parts(fake_llm: FakeOpenAI) -> None:
    chunks = [para("alpha", 8), para("beta", 8), para("gamma", 8), para("delta", 30), "  ", para("eps", 2)]
    llm = make_llm(fake_llm)
    fake_llm.responder = lambda body: long_answer(llm, "ans")
    parts = _compact_parts(llm, chunks)
    assert 1 < len(parts) < len([c for c in chunks if c.strip()])  # packing saved calls
    synth = get_response_synthesizer("compact", llm=llm)
    assert synth.plan(Q, chunks) == len(parts)
    resp = synth.synthesize(Q, nodes(*chunks))
    reqs = fake_llm.chat_requests()
    assert len(reqs) == len(parts) == resp.usage.llm_calls
    assert reqs[0].messages == TEXT_QA_PROMPT.format_messages(context_str=parts[0], query_str=Q)
    for req, part in zip(reqs[1:], parts[1:]):
        assert context_of(req) == part and "Current answer: ans honey" in user_of(req)
    assert all(fits(llm, r) for r in reqs)
    # small chunks are joined with a blank line into one part
    assert "alpha7 is a recorded fact about the alpha topic.\n\nbeta0" in parts[0]


def test_compact_small_input_is_one_call(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("only answer")
    llm = make_llm(fake_llm)
    resp = get_response_synthesizer("compact", llm=llm).synthesize(Q, nodes("A short note.", "Another note."))
    (req,) = fake_llm.chat_requests()
    assert context_of(req) == "A short note.\n\nAnother note."
    assert resp.response == "only answer"


def test_default_mode_is_compact() -> None:
    synth = get_response_synthesizer(llm=ExtractiveLLM())
    assert type(synth).__name__ == "CompactAndRefine"


# -- tree_summarize ------------------------------------------------------------------


def test_tree_summarize_level_runs_concurrently_then_one_final_call(fake_llm: FakeOpenAI) -> None:
    chunks = [para(t, 25) for t in ("alpha", "beta", "gamma", "delta")]
    llm = make_llm(fake_llm)
    parts = PromptBudget(llm.metadata).repack(tree_t(), chunks)
    assert len(parts) >= 3
    fake_llm.responder = by_first_word(lambda w: f"summary of {w}", delay=lambda w: 0.15)
    synth = get_response_synthesizer("tree_summarize", llm=llm)
    assert synth.plan(Q, chunks) == len(parts) + 1
    resp = synth.synthesize(Q, nodes(*chunks))
    reqs = fake_llm.chat_requests()
    assert len(reqs) == len(parts) + 1
    assert fake_llm.max_inflight > 1
    assert sorted(context_of(r) for r in reqs[:-1]) == sorted(parts)
    level_answers = [f"summary of {p.split()[0]}" for p in parts]
    assert reqs[-1].messages == TREE_SUMMARIZE_PROMPT.format_messages(
        context_str="\n\n".join(level_answers), query_str=Q
    )
    assert resp.response == "summary of summary"  # the final context starts with the first part's summary
    assert all(fits(llm, r) for r in reqs)


def test_tree_summarize_recurses_until_one_answer(fake_llm: FakeOpenAI) -> None:
    llm = make_llm(fake_llm)
    chunks = [para(f"t{i}x", 40) for i in range(4)]
    budget = PromptBudget(llm.metadata)

    def answer(first_word: str) -> str:
        return long_answer(llm, f"S-{first_word}")

    level1 = budget.repack(tree_t(), chunks)
    level2 = budget.repack(tree_t(), [answer(p.split()[0]) for p in level1])
    assert len(level1) > len(level2) > 1  # three levels in all
    final_ctx = "\n\n".join(answer(p.split()[0]) for p in level2)
    fake_llm.responder = by_first_word(answer)
    resp = get_response_synthesizer("tree_summarize", llm=llm).synthesize(Q, nodes(*chunks))
    reqs = fake_llm.chat_requests()
    assert len(reqs) == len(level1) + len(level2) + 1
    assert context_of(reqs[-1]) == final_ctx
    assert resp.response == answer(final_ctx.split()[0])
    assert all(fits(llm, r) for r in reqs)


def test_tree_summarize_that_cannot_shrink_stops_with_a_warning(
    fake_llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    # A big output budget and answers that use all of it: two answers never fit one part.
    output = 200
    llm = make_llm(fake_llm, num_output=output)

    def fat(body: dict[str, Any]) -> str:
        text = " ".join(["verbose"] * (output * 2))
        while llm.metadata.tokenizer.count(text) > output:
            text = text.rsplit(" ", 1)[0]
        return text

    fake_llm.responder = fat
    with caplog.at_level(logging.WARNING, logger="docsum"):
        resp = get_response_synthesizer("tree_summarize", llm=llm).synthesize(Q, nodes(para("alpha", 70)))
    reqs = fake_llm.chat_requests()
    assert resp.response.startswith("verbose")
    assert len(reqs) < 15
    assert any("did not shrink" in r.getMessage() or "depth cap" in r.getMessage() for r in caplog.records)
    assert llm.count_messages(reqs[-1].messages) <= WINDOW - output


# -- simple_summarize -----------------------------------------------------------------


def test_simple_summarize_one_call_and_truncation_warns(fake_llm: FakeOpenAI, caplog: pytest.LogCaptureFixture) -> None:
    llm = make_llm(fake_llm)
    synth = get_response_synthesizer("simple_summarize", llm=llm)
    fake_llm.script("small")
    with caplog.at_level(logging.WARNING, logger="docsum"):
        assert synth.synthesize(Q, nodes("one.", "two.")).response == "small"
    assert context_of(fake_llm.chat_requests()[0]) == "one.\ntwo."  # joined by a newline
    assert not caplog.records
    fake_llm.reset()
    chunks = [para("alpha", 60), para("beta", 30)]
    with caplog.at_level(logging.WARNING, logger="docsum"):
        resp = synth.synthesize(Q, nodes(*chunks))
    (req,) = fake_llm.chat_requests()
    assert resp.usage.llm_calls == 1 and synth.plan(Q, chunks) == 1
    assert fits(llm, req)
    ctx = context_of(req)
    assert "\n".join(chunks).startswith(ctx) and "beta" not in ctx
    assert any("truncated" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


# -- accumulate -------------------------------------------------------------------------


def test_accumulate_one_call_per_chunk_concurrent_in_input_order(fake_llm: FakeOpenAI) -> None:
    # The first chunk answers last: the output must still follow input order.
    fake_llm.responder = by_first_word(lambda w: w[0], delay=lambda w: 0.3 if w.startswith("a") else 0.05)
    llm = make_llm(fake_llm)
    synth = get_response_synthesizer("accumulate", llm=llm)
    resp = synth.synthesize(Q, nodes("apples are red.", "bananas are yellow."))
    assert resp.response == "Response 1: a\n---------------------\nResponse 2: b"
    assert ACCUMULATE_SEPARATOR == "\n" + "-" * 21 + "\n"
    reqs = fake_llm.chat_requests()
    assert len(reqs) == 2 and fake_llm.max_inflight == 2
    assert {context_of(r) for r in reqs} == {"apples are red.", "bananas are yellow."}
    assert all(r.messages[-1]["content"].startswith("Documents:") for r in reqs)


def test_accumulate_splits_oversize_chunks_and_numbers_the_pieces(fake_llm: FakeOpenAI) -> None:
    llm = make_llm(fake_llm)
    small, big = para("alpha", 2), para("beta", 70)
    pieces = PromptBudget(llm.metadata).repack(qa(), [big])
    fake_llm.responder = by_first_word(lambda w: f"on {w}")
    synth = get_response_synthesizer("accumulate", llm=llm)
    assert synth.plan(Q, [small, big]) == 1 + len(pieces)
    resp = synth.synthesize(Q, nodes(small, big))
    expected = [f"on {small.split()[0]}"] + [f"on {p.split()[0]}" for p in pieces]
    assert resp.response == ACCUMULATE_SEPARATOR.join(f"Response {i}: {a}" for i, a in enumerate(expected, start=1))
    assert len(fake_llm.chat_requests()) == 1 + len(pieces)


def test_compact_accumulate_packs_first(fake_llm: FakeOpenAI) -> None:
    llm = make_llm(fake_llm)
    fake_llm.responder = by_first_word(lambda w: f"on {w}")
    synth = get_response_synthesizer("compact_accumulate", llm=llm)
    resp = synth.synthesize(Q, nodes("apples are red.", "bananas are yellow."))
    assert resp.response == "Response 1: on apples"
    (req,) = fake_llm.chat_requests()
    assert context_of(req) == "apples are red.\n\nbananas are yellow."
    fake_llm.reset()
    chunks = [para(t, 12) for t in ("alpha", "beta", "gamma", "delta")]
    parts = PromptBudget(llm.metadata).repack(qa(), chunks)
    assert 1 < len(parts) < 4
    resp = synth.synthesize(Q, nodes(*chunks))
    assert len(fake_llm.chat_requests()) == len(parts)
    assert resp.response == ACCUMULATE_SEPARATOR.join(
        f"Response {i}: on {p.split()[0]}" for i, p in enumerate(parts, start=1)
    )


# -- no LLM at all -----------------------------------------------------------------------


def test_no_text_and_context_only_need_no_llm() -> None:
    ns = nodes("First passage.", "Second passage.")
    no_text = get_response_synthesizer("no_text", llm=None)
    resp = no_text.synthesize(Q, ns)
    assert resp.response == "" and resp.status == ResponseStatus.OK
    assert resp.source_nodes == ns and resp.usage.llm_calls == 0
    ctx = get_response_synthesizer("context_only")
    resp = ctx.synthesize(Q, ns)
    assert resp.response == "First passage.\n\nSecond passage."
    assert resp.usage.llm_calls == 0 and resp.calls == []
    assert no_text.plan(Q, ["x"]) == 0 and ctx.plan(Q, ["x"]) == 0


def test_no_text_and_context_only_make_no_request(fake_llm: FakeOpenAI) -> None:
    llm = make_llm(fake_llm)
    for mode in ("no_text", "context_only"):
        get_response_synthesizer(mode, llm=llm).synthesize(Q, nodes("x", "y"))
    assert fake_llm.requests == []


@pytest.mark.parametrize("mode", [m.value for m in ResponseMode])
def test_no_nodes_is_empty_with_a_reason_and_no_calls(fake_llm: FakeOpenAI, mode: str) -> None:
    synth = get_response_synthesizer(mode, llm=make_llm(fake_llm), streaming=mode not in ("no_text", "context_only"))
    resp = synth.synthesize(Q, [])
    assert resp.status == ResponseStatus.EMPTY and resp.reason
    assert resp.response == "" and resp.stream is None
    assert resp.usage.llm_calls == 0
    assert fake_llm.requests == []


def test_llm_modes_need_an_llm_and_modes_are_validated() -> None:
    with pytest.raises(ConfigError, match="needs an LLM"):
        get_response_synthesizer("refine", llm=None)
    with pytest.raises(ConfigError, match="unknown response mode"):
        get_response_synthesizer("map_reduce", llm=ExtractiveLLM())
    with pytest.raises(ConfigError, match="structured"):
        get_response_synthesizer("tree_summarize", llm=ExtractiveLLM(), structured_answer_filtering=True)
    assert [m.value for m in ResponseMode] == [
        "refine", "compact", "tree_summarize", "simple_summarize", "no_text", "context_only", "accumulate", "compact_accumulate",
    ]  # fmt: skip


# -- structured answer filtering ----------------------------------------------------------


def _js(answer: str, ok: bool) -> str:
    return json.dumps({"answer": answer, "query_satisfied": ok})


def test_structured_filtering_ignores_unsatisfied_chunks(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(_js("A1", True), _js("junk", False), _js("A3", True))
    llm = make_llm(fake_llm)
    synth = get_response_synthesizer("refine", llm=llm, structured_answer_filtering=True)
    a, b, c = "alpha text.", "beta text.", "gamma text."
    resp = synth.synthesize(Q, nodes(a, b, c))
    assert resp.response == "A3" and resp.status == ResponseStatus.OK
    r1, r2, r3 = fake_llm.chat_requests()
    assert all(r.body.get("response_format") == {"type": "json_object"} for r in (r1, r2, r3))
    assert r1.messages == structured(qa()).format_messages(context_str=a)
    assert r2.messages == structured(refine_t()).format_messages(context_msg=b, existing_answer="A1")
    # the unsatisfied reply did not become the answer
    assert r3.messages == structured(refine_t()).format_messages(context_msg=c, existing_answer="A1")
    assert STRUCTURED_SUFFIX.replace("{{", "{").replace("}}", "}") in user_of(r3)


def test_structured_filtering_first_unsatisfied_asks_qa_again(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(_js("nope", False), "```json\n" + _js("A2", True) + "\n```")
    synth = get_response_synthesizer("compact", llm=make_llm(fake_llm), structured_answer_filtering=True)
    # two parts: force compact to split by making the text big
    chunks = [para("alpha", 30), para("beta", 30)]
    llm = synth.llm
    qa_s = structured(qa())
    refine_s = structured(refine_t())
    budget = PromptBudget(llm.metadata)
    if budget.available(refine_s, extra_tokens=OUTPUT) < budget.available(qa_s):
        parts = budget.repack(refine_s, chunks, extra_tokens=OUTPUT)
    else:
        parts = budget.repack(qa_s, chunks)
    fake_llm.script(*[_js("later", False)] * (len(parts) - 2))
    resp = synth.synthesize(Q, nodes(*chunks))
    reqs = fake_llm.chat_requests()
    assert len(reqs) == len(parts)
    assert "Current answer" not in user_of(reqs[1])  # still no answer: QA template again
    assert resp.response == "A2"
    assert all(fits(llm, r) for r in reqs)


def test_structured_filtering_nothing_satisfied_says_why(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(_js("no idea", False), _js("still no", False))
    synth = get_response_synthesizer("refine", llm=make_llm(fake_llm), structured_answer_filtering=True)
    resp = synth.synthesize(Q, nodes("a.", "b."))
    assert resp.status == ResponseStatus.NOT_SATISFIED
    assert resp.response == "" and "2 passages" in resp.reason
    assert resp.usage.llm_calls == 2 and len(resp.source_nodes) == 2


def test_structured_filtering_offline_engine_really_filters() -> None:
    llm = ExtractiveLLM()
    synth = get_response_synthesizer("refine", llm=llm, structured_answer_filtering=True)
    resp = synth.synthesize(
        "When do bees swarm?", nodes("Trains run late on Sundays.", "Bees swarm in spring when hives are crowded.")
    )
    assert resp.status == ResponseStatus.OK and "spring" in resp.response and "Trains" not in resp.response
    none = synth.synthesize("When do bees swarm?", nodes("Trains run late on Sundays.", "The bakery opens at six."))
    assert none.status == ResponseStatus.NOT_SATISFIED


def test_parse_structured_tolerates_fences_prose_and_string_booleans() -> None:
    assert parse_structured('{"answer": "x", "query_satisfied": false}') == ("x", False)
    assert parse_structured('Sure!\n```json\n{"answer": "y", "query_satisfied": "true"}\n```') == ("y", True)
    assert parse_structured('{"answer": "z"}') == ("z", True)
    assert parse_structured("plain text answer") == ("plain text answer", True)
    assert parse_structured("   ") == ("", False)


# -- meta-answer guard ------------------------------------------------------------------


def test_meta_refine_reply_keeps_previous_answer(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("Bees make honey.", "The original answer remains accurate.", "")
    resp = get_response_synthesizer("refine", llm=make_llm(fake_llm)).synthesize(Q, nodes("a.", "b.", "c."))
    assert resp.response == "Bees make honey."
    r3 = fake_llm.chat_requests()[2]
    assert "Current answer: Bees make honey." in user_of(r3)


def test_meta_refine_stream_shows_previous_answer(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("Bees make honey.", "The new context is not helpful, so the existing answer stands.")
    synth = get_response_synthesizer("refine", llm=make_llm(fake_llm), streaming=True)

    async def run() -> Response:
        resp = await synth.asynthesize(Q, nodes("a.", "b."))
        await resp.drain()
        return resp

    assert asyncio.run(run()).response == "Bees make honey."


@pytest.mark.parametrize(
    ("text", "meta"),
    [
        ("The original answer remains accurate.", True),
        ("The original answer is already appropriate and does not need to be refined.", True),
        ("Return the original answer: Bees make honey.", True),
        ("The new context is not helpful.", True),
        ("The provided context does not change the answer.", True),
        ("The answer remains the same.", True),
        ("The bridge remains unchanged since 1901.", False),
        ("The new information desk opens in May.", False),
        ("Bees make honey and wax.", False),
    ],
)
def test_is_meta_answer(text: str, meta: bool) -> None:
    assert is_meta_answer(text) is meta


def test_ordinary_answer_mentioning_unchanged_things_is_accepted(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("The bridge opened in 1901.", "The bridge opened in 1901 and remains unchanged since.")
    resp = get_response_synthesizer("refine", llm=make_llm(fake_llm)).synthesize(Q, nodes("a.", "b."))
    assert resp.response == "The bridge opened in 1901 and remains unchanged since."


# -- streaming ----------------------------------------------------------------------------


STREAM_CASES = {
    "refine": [para("alpha", 3), para("beta", 3), para("gamma", 3)],
    "compact": [para(t, 15) for t in ("alpha", "beta", "gamma")],
    "tree_summarize": [para(t, 15) for t in ("alpha", "beta", "gamma")],
    "simple_summarize": [para("alpha", 3), para("beta", 3)],
    "accumulate": [para("alpha", 3), para("beta", 3), para("gamma", 3)],
    "compact_accumulate": [para(t, 15) for t in ("alpha", "beta", "gamma")],
}


@pytest.mark.parametrize("mode", list(STREAM_CASES))
def test_streaming_only_the_final_call_streams(fake_llm: FakeOpenAI, mode: str) -> None:
    fake_llm.responder = by_first_word(lambda w: f"the answer drawn from {w} in several words")
    llm = make_llm(fake_llm)
    synth = get_response_synthesizer(mode, llm=llm, streaming=True)
    chunks = STREAM_CASES[mode]
    expected_calls = synth.plan(Q, chunks)

    async def run() -> tuple[Response, list[str], int]:
        resp = await synth.asynthesize(Q, nodes(*chunks))
        before = len(resp.calls)
        pieces = await collect(resp.stream)
        return resp, pieces, before

    resp, pieces, before = asyncio.run(run())
    flags = stream_flags(fake_llm)
    if mode != "simple_summarize":
        assert len(flags) > 1, "the case should make several calls"
    assert flags == [False] * (len(flags) - 1) + [True]
    assert len(flags) == expected_calls
    last = fake_llm.chat_requests()[-1]
    assert last.body.get("stream_options") == {"include_usage": True}
    assert len(pieces) > 3  # token by token, not one blob
    text = "".join(pieces)
    assert text.endswith(f"the answer drawn from {context_of(last).split()[0]} in several words")
    # the final call's usage is counted once the stream is drained
    assert before == len(flags) - 1
    assert resp.usage.llm_calls == len(flags)
    assert resp.usage.prompt_tokens == sum(word_count(r.prompt) for r in fake_llm.chat_requests())


def test_streaming_sync_synthesize_iter_tokens(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("one", "two three four five")
    synth = get_response_synthesizer("refine", llm=make_llm(fake_llm), streaming=True)
    resp = synth.synthesize(Q, nodes("a.", "b."))
    pieces = list(iter_tokens(resp))
    assert pieces == ["two ", "three ", "four ", "five"]
    assert resp.response == "two three four five" and resp.stream is None
    assert stream_flags(fake_llm) == [False, True]
    assert resp.usage.llm_calls == 2


def test_non_streaming_response_iter_tokens_gives_the_text() -> None:
    resp = get_response_synthesizer("context_only").synthesize(Q, nodes("x"))
    assert list(iter_tokens(resp)) == ["x"]


# -- usage ----------------------------------------------------------------------------------


def test_response_usage_counts_the_calls(fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = Counter()
    llm = make_llm(fake_llm)
    resp = get_response_synthesizer("refine", llm=llm).synthesize(Q, nodes("a.", "b.", "c."))
    reqs = fake_llm.chat_requests()
    assert resp.usage.llm_calls == 3
    assert resp.usage.prompt_tokens == sum(word_count(r.prompt) for r in reqs)
    assert resp.usage.completion_tokens == 2 * 3
    # other work on the same LLM is not charged to this response
    llm.predict(TEXT_QA_PROMPT, context_str="x", query_str="y")
    assert resp.usage.llm_calls == 3 and len(llm.calls) == 4


def test_concurrent_synthesize_calls_are_accounted_separately(fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = Counter(delay=0.05)
    llm = make_llm(fake_llm)
    synth = get_response_synthesizer("accumulate", llm=llm)

    async def run() -> list[Response]:
        return await asyncio.gather(
            synth.asynthesize(Q, nodes("a.", "b.")), synth.asynthesize(Q, nodes("c.", "d.", "e."))
        )

    first, second = asyncio.run(run())
    assert (first.usage.llm_calls, second.usage.llm_calls) == (2, 3)


# -- every mode works offline ------------------------------------------------------------------


@pytest.mark.parametrize("mode", [m.value for m in ResponseMode])
def test_every_mode_works_with_the_offline_engine(mode: str) -> None:
    llm = ExtractiveLLM(context_window=WINDOW, num_output=OUTPUT)
    chunks = ["Bees swarm in spring when hives are crowded.", para("filler", 40), "The railway trust met in October."]
    synth = get_response_synthesizer(mode, llm=llm)
    resp = synth.synthesize("When do bees swarm?", nodes(*chunks))
    assert resp.status == ResponseStatus.OK
    if mode != "no_text":
        assert resp.response
    planned = synth.plan("When do bees swarm?", chunks)
    if mode != "tree_summarize":
        assert resp.usage.llm_calls == planned


# -- the Python API ---------------------------------------------------------------------------


class AsyncOnly(BaseSynthesizer):
    async def aget_response(self, query_str: str, text_chunks: list[str], **kw: Any) -> str:
        await asyncio.sleep(0)
        return f"{query_str} | {len(text_chunks)} | {kw.get('suffix', '')}"


class SyncOnly(BaseSynthesizer):
    def get_response(self, query_str: str, text_chunks: list[str], **kw: Any) -> str:
        return " + ".join(text_chunks)


class UsesLLM(BaseSynthesizer):
    async def aget_response(self, query_str: str, text_chunks: list[str], **kw: Any) -> str:
        assert self.llm is not None
        return await self.llm.apredict(TEXT_QA_PROMPT, context_str="\n".join(text_chunks), query_str=query_str)


def test_custom_synthesizer_with_only_aget_response() -> None:
    synth = AsyncOnly()
    resp = synth.synthesize("q", nodes("a", "b"), suffix="s")
    assert resp.response == "q | 2 | s" and resp.status == ResponseStatus.OK
    assert len(resp.source_nodes) == 2
    assert asyncio.run(synth.asynthesize("q", nodes("a"))).response == "q | 1 | "
    assert synth.get_response("q", ["x"]) == "q | 1 | "


def test_custom_synthesizer_with_only_get_response() -> None:
    synth = SyncOnly()
    assert synth.synthesize("q", nodes("a", "b")).response == "a + b"
    assert asyncio.run(synth.asynthesize("q", nodes("c"))).response == "c"
    assert asyncio.run(synth.aget_response("q", ["d", "e"])) == "d + e"


def test_custom_synthesizer_implementing_neither_is_a_type_error() -> None:
    class Neither(BaseSynthesizer):
        pass

    with pytest.raises(TypeError, match="Neither"):
        Neither()


def test_custom_synthesizer_calls_are_tracked(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("custom answer")
    resp = UsesLLM(make_llm(fake_llm)).synthesize("q", nodes("a", "b"))
    assert resp.response == "custom answer" and resp.usage.llm_calls == 1


def test_seed_example_extra_template_variable(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("Thus spake the summary.")
    template = PromptTemplate(
        "Context information from multiple sources is below.\n"
        "---------------------\n"
        "{context_str}\n"
        "---------------------\n"
        "Given the information from multiple sources and not prior knowledge, "
        "answer the query in the style of {tone_name}.\n"
        "Query: {query_str}\n"
        "Answer: "
    )
    synth = get_response_synthesizer(response_mode="tree_summarize", llm=make_llm(fake_llm), summary_template=template)
    out = synth.get_response("who is Paul Graham?", ["text1", "text2"], tone_name="a Shakespeare play")
    assert out == "Thus spake the summary."
    (req,) = fake_llm.chat_requests()
    prompt = req.prompt
    assert "a Shakespeare play" in prompt and "who is Paul Graham?" in prompt
    assert "text1\n\ntext2" in prompt


@pytest.mark.parametrize("mode", ["tree_summarize", "refine", "compact", "simple_summarize", "accumulate"])
def test_missing_template_variable_fails_before_any_llm_call(fake_llm: FakeOpenAI, mode: str) -> None:
    template = PromptTemplate("{context_str} in the style of {tone_name}: {query_str}")
    kw = {"summary_template": template} if mode == "tree_summarize" else {"text_qa_template": template}
    synth = get_response_synthesizer(response_mode=mode, llm=make_llm(fake_llm), **kw)
    with pytest.raises(TemplateVariableError, match="tone_name"):
        synth.get_response("who is Paul Graham?", ["text1", "text2"])
    with pytest.raises(TemplateVariableError, match="tone_name"):
        synth.synthesize("who is Paul Graham?", nodes("text1", "text2"))
    assert fake_llm.requests == []


def test_get_response_from_a_running_loop_is_refused() -> None:
    synth = AsyncOnly()

    async def inner() -> None:
        with pytest.raises(RuntimeError, match="aget_response"):
            synth.get_response("q", ["a"])

    asyncio.run(inner())


def test_metadata_is_not_a_sink_for_source_text() -> None:
    # node text (not metadata) is what reaches the synthesizer
    resp = get_response_synthesizer("context_only").synthesize(
        Q, [NodeWithScore(Node("body", doc_id="d", path="p.txt"))]
    )
    assert resp.response == "body"
