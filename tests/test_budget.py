"""PromptBudget: every packed part, rendered as the chat messages that are
really sent, fits the window minus the output budget; nothing is lost but
overlaps; a template that leaves no room degrades with a warning."""

from __future__ import annotations

import logging

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from docsum.models.extractive import ExtractiveLLM
from docsum.models.llm import LLM
from docsum.models.prompts import REFINE_PROMPT, TEXT_QA_PROMPT, TREE_SUMMARIZE_PROMPT, PromptTemplate
from docsum.synthesizers.budget import MIN_CHUNK_TOKENS, PromptBudget

# Short words (never split into characters), newlines and paragraph breaks,
# punctuation that BPE likes to merge across boundaries, and braces.

_WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyzAÉé0123456789.,;:!?-'\"{}()", min_size=1, max_size=9)
_SEPS = st.sampled_from([" ", " ", " ", "  ", "\n", "\n\n", " \n ", "\t"])


@st.composite
def texts(draw: st.DrawFn, max_words: int = 400) -> str:
    words = draw(st.lists(_WORDS, min_size=0, max_size=max_words))
    out = []
    for w in words:
        out.append(w)
        out.append(draw(_SEPS))
    lead = draw(st.sampled_from(["", " ", "\n"]))
    return lead + "".join(out)


_TEMPLATES = st.sampled_from(
    [
        TEXT_QA_PROMPT.partial_format(query_str="What happened to the bees in the autumn of 2023?"),
        TREE_SUMMARIZE_PROMPT.partial_format(query_str="Summarise this."),
        PromptTemplate("{context_str}"),
        PromptTemplate("Read:\n{context_str}\n-----\nQ: {query_str}", system="Terse.").partial_format(query_str="q?"),
        REFINE_PROMPT.partial_format(query_str="Who?", existing_answer="Somebody, probably.").with_kind("refine"),
    ]
)


def _llm(window: int, output: int) -> LLM:
    return ExtractiveLLM(context_window=window, num_output=output)


def _context_key(template: PromptTemplate) -> str:
    return "context_msg" if "context_msg" in template.free_vars else "context_str"


def _sent_tokens(llm: LLM, template: PromptTemplate, text: str) -> int:
    return llm.count_messages(template.format_messages(**{_context_key(template): text}))


def _assert_covers_in_order(chunks: list[str], parts: list[str]) -> None:
    """Every word of the input appears in some part, in input order; parts may
    only repeat words at their start (the overlap with the previous part)."""
    words = "\n\n".join(c.strip() for c in chunks if c.strip()).split()
    cursor = 0
    for part in parts:
        pw = part.split()
        assert pw, "empty part"
        # the part is a contiguous run of input words starting inside the
        # already-covered region (overlap) or exactly where it ended
        starts = [i for i in range(max(0, cursor - len(pw)), cursor + 1) if words[i : i + len(pw)] == pw]
        assert starts, f"part is not a contiguous run continuing the text at word {cursor}: {part[:80]!r}"
        end = max(i + len(pw) for i in starts)
        assert end > cursor, "a part made no progress"
        cursor = end
    assert cursor == len(words), f"text lost after word {cursor} of {len(words)}"


def _room_is_real(budget: PromptBudget, template: PromptTemplate, llm: LLM, extra: int = 0) -> bool:
    """False when the template leaves less than MIN_CHUNK_TOKENS (the budget
    then degrades on purpose and parts may overflow)."""
    room = llm.metadata.context_window - budget.prompt_tokens(template) - llm.metadata.num_output - extra
    return room - budget.padding >= MIN_CHUNK_TOKENS


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    chunks=st.lists(texts(), min_size=0, max_size=6),
    window=st.integers(min_value=300, max_value=1400),
    output=st.integers(min_value=1, max_value=200),
    template=_TEMPLATES,
)
def test_repack_parts_fit_and_lose_nothing(
    chunks: list[str], window: int, output: int, template: PromptTemplate
) -> None:
    llm = _llm(window, output)
    budget = PromptBudget(llm.metadata)
    assume(_room_is_real(budget, template, llm))
    parts = budget.repack(template, chunks)
    if not any(c.strip() for c in chunks):
        assert parts == []
        return
    for part in parts:
        assert part == part.strip() and part
        assert _sent_tokens(llm, template, part) <= window - output
    _assert_covers_in_order(chunks, parts)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    chunks=st.lists(texts(), min_size=1, max_size=4),
    window=st.integers(min_value=400, max_value=1200),
    output=st.integers(min_value=16, max_value=128),
)
def test_repack_with_reserved_answer_room_fits_with_a_full_answer(chunks: list[str], window: int, output: int) -> None:
    llm = _llm(window, output)
    budget = PromptBudget(llm.metadata)
    refine = REFINE_PROMPT.partial_format(query_str="What is going on here?")
    assume(_room_is_real(budget, refine, llm, extra=output))
    # An existing answer as long as the output budget allows.
    answer = " ".join(["answer"] * output)
    while llm.metadata.tokenizer.count(answer) > output:
        answer = answer.rsplit(" ", 1)[0]
    for part in budget.repack(refine, chunks, extra_tokens=output):
        sent = llm.count_messages(refine.format_messages(context_msg=part, existing_answer=answer))
        assert sent <= window - output


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    chunks=st.lists(texts(max_words=300), min_size=1, max_size=5),
    window=st.integers(min_value=350, max_value=1200),
    output=st.integers(min_value=1, max_value=150),
    template=_TEMPLATES,
)
def test_truncate_yields_one_prompt_that_fits(
    chunks: list[str], window: int, output: int, template: PromptTemplate
) -> None:
    llm = _llm(window, output)
    budget = PromptBudget(llm.metadata)
    nonempty = [c.strip() for c in chunks if c.strip()]
    assume(nonempty)
    room = window - budget.prompt_tokens(template) - output
    assume(room // len(nonempty) - budget.padding >= MIN_CHUNK_TOKENS)
    fitted, cut = budget.truncate(template, chunks)
    assert len(fitted) == len(nonempty)
    joined = "\n\n".join(fitted)
    assert _sent_tokens(llm, template, joined) <= window - output
    for original, piece in zip(nonempty, fitted):
        assert original.startswith(piece)  # a head of each chunk, never a middle
    whole = "\n\n".join(nonempty)
    assert cut == (joined != whole)


def test_repack_small_input_is_one_part_joined_by_blank_lines() -> None:
    llm = _llm(3900, 256)
    budget = PromptBudget(llm.metadata)
    assert budget.repack(TEXT_QA_PROMPT, ["  first  ", "", "   ", "second\n"]) == ["first\n\nsecond"]
    assert budget.repack(TEXT_QA_PROMPT, []) == []
    assert budget.truncate(TEXT_QA_PROMPT, ["", " "]) == ([], False)


def test_repack_overlap_is_about_ten_percent() -> None:
    llm = _llm(600, 64)
    budget = PromptBudget(llm.metadata)
    text = " ".join(f"w{i}" for i in range(2000))
    parts = budget.repack(TEXT_QA_PROMPT, [text])
    size = budget.available(TEXT_QA_PROMPT)
    assert len(parts) > 3
    tok = llm.metadata.tokenizer
    assert all(tok.count(p) <= size for p in parts)
    for a, b in zip(parts, parts[1:]):
        a_words, b_words = a.split(), b.split()
        shared = next(k for k in range(len(b_words), -1, -1) if k == 0 or a_words[-k:] == b_words[:k])
        assert 0 < tok.count(" ".join(b_words[:shared])) <= int(size * 0.1)


def test_available_counts_fixed_values_and_chat_overhead() -> None:
    llm = _llm(1000, 100)
    budget = PromptBudget(llm.metadata)
    short = TEXT_QA_PROMPT.partial_format(query_str="q")
    long = TEXT_QA_PROMPT.partial_format(query_str="a much longer question " * 20)
    assert budget.available(long) < budget.available(short)
    # prompt_tokens is exactly what LLM.count_messages says for the empty render
    assert budget.prompt_tokens(short) == llm.count_messages(short.format_messages(context_str=""))
    assert budget.available(short) == 1000 - budget.prompt_tokens(short) - 100 - budget.padding
    assert budget.available(short, num_chunks=3) == (1000 - budget.prompt_tokens(short) - 100) // 3 - budget.padding
    assert budget.available(short, extra_tokens=50) == budget.available(short) - 50


def test_template_leaving_no_room_degrades_with_warning(caplog: pytest.LogCaptureFixture) -> None:
    llm = _llm(300, 64)
    budget = PromptBudget(llm.metadata)
    huge = TEXT_QA_PROMPT.partial_format(query_str="why " * 400)
    text = " ".join(f"word{i}" for i in range(300))
    with caplog.at_level(logging.WARNING, logger="docsum"):
        parts = budget.repack(huge, [text])
        fitted, cut = budget.truncate(huge, [text, text])
    assert parts and all(llm.metadata.tokenizer.count(p) <= MIN_CHUNK_TOKENS for p in parts)
    _assert_covers_in_order([text], parts)
    assert cut and len(fitted) == 2
    assert any("leaves only" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


def test_overlap_ratio_is_validated() -> None:
    with pytest.raises(ValueError):
        PromptBudget(_llm(1000, 10).metadata, overlap_ratio=1.0)
    with pytest.raises(ValueError):
        PromptBudget(_llm(1000, 10).metadata, overlap_ratio=-0.1)
