from __future__ import annotations

import random
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docsum.ingest.boundaries import sentence_cuts
from docsum.ingest.split import Chunk, split_document, split_tokens
from docsum.models.tokens import Tokenizer, tokenizer_for_model

GPT4 = tokenizer_for_model("gpt-4")  # cl100k, no margin
GPT4O = tokenizer_for_model("gpt-4o")  # o200k
LOCAL = tokenizer_for_model("llama3.1:8b")  # cl100k with margin
TOKENIZERS = [GPT4, GPT4O, LOCAL]

PROPERTY_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def sentences_of(text: str) -> list[str]:
    cuts = sentence_cuts(text, 0, len(text))
    bounds = [0, *cuts, len(text)]
    return [text[a:b].strip() for a, b in zip(bounds, bounds[1:])]


# --------------------------------------------------------------------------- invariants


def check_chunks(
    text: str,
    chunks: list[Chunk],
    tok: Tokenizer,
    chunk_size: int,
    chunk_overlap: int,
    page_starts: list[int] | None = None,
) -> None:
    covered = bytearray(len(text))
    for chunk in chunks:
        assert chunk.text == text[chunk.start_char : chunk.end_char]
        assert chunk.text.strip() == chunk.text and chunk.text
        assert chunk.token_count == tok.count(chunk.text)
        assert chunk.token_count <= chunk_size
        for k in range(chunk.start_char, chunk.end_char):
            covered[k] = 1
        if page_starts is None:
            assert chunk.pages == ()
        else:
            assert chunk.pages == expected_pages(page_starts, text, chunk.start_char, chunk.end_char)
    for k, ch in enumerate(text):
        if not ch.isspace():
            assert covered[k], f"character {k} ({ch!r}) is in no chunk"
    for prev, nxt in zip(chunks, chunks[1:]):
        assert nxt.start_char > prev.start_char  # always progresses
        assert nxt.end_char > prev.end_char
        if nxt.start_char < prev.end_char:
            assert tok.count(text[nxt.start_char : prev.end_char]) <= chunk_overlap


def expected_pages(page_starts: list[int], text: str, start: int, end: int) -> tuple[int, ...]:
    """Brute force: the pages owning a non-whitespace character of the span."""
    owner = []
    page = 0
    for k in range(len(text)):
        while page + 1 < len(page_starts) and page_starts[page + 1] <= k:
            page += 1
        owner.append(page + 1)
    return tuple(sorted({owner[k] for k in range(start, end) if not text[k].isspace()}))


# --------------------------------------------------------------------------- sentences


def test_sentence_splitter_respects_abbreviations_and_decimals() -> None:
    text = (
        "Mr. Smith moved to the U.S. in 2019. He paid 3.5 dollars, e.g. for coffee! "
        "Was it good? Dr. Jones said i.e. yes. Prices rose approx. five percent. "
        "See Fig. 3 for details. The end."
    )
    assert sentences_of(text) == [
        "Mr. Smith moved to the U.S. in 2019.",
        "He paid 3.5 dollars, e.g. for coffee!",
        "Was it good?",
        "Dr. Jones said i.e. yes.",
        "Prices rose approx. five percent.",
        "See Fig. 3 for details.",
        "The end.",
    ]


def test_sentence_splitter_cjk_and_quotes() -> None:
    assert sentences_of("今天很好。明天下雨！你去吗？好的") == ["今天很好。", "明天下雨！", "你去吗？", "好的"]
    assert sentences_of("他说：「走吧。」然后离开了。") == ["他说：「走吧。」", "然后离开了。"]
    assert sentences_of('She said "Stop." Then left.') == ['She said "Stop."', "Then left."]
    assert sentences_of("Version 2.0.1 is out... Really?! Yes.") == ["Version 2.0.1 is out...", "Really?!", "Yes."]
    assert sentences_of("Visit example.com/a.b today. Ok.") == ["Visit example.com/a.b today.", "Ok."]


# --------------------------------------------------------------------------- split_document


def test_validation() -> None:
    with pytest.raises(ValueError):
        split_document("text", GPT4, chunk_size=0, chunk_overlap=0)
    with pytest.raises(ValueError):
        split_document("text", GPT4, chunk_size=100, chunk_overlap=100)
    with pytest.raises(ValueError):
        split_document("text", GPT4, chunk_size=100, chunk_overlap=-1)
    with pytest.raises(ValueError):
        split_tokens("text", 10, 10, GPT4)
    with pytest.raises(ValueError):
        split_tokens("text", 0, 0, GPT4)


def test_empty_and_whitespace() -> None:
    assert split_document("", GPT4) == []
    assert split_document(" \n\n\t  ", GPT4) == []
    assert split_tokens("", 10, 2, GPT4) == []
    assert split_tokens("   \n ", 10, 2, GPT4) == []


def test_small_document_is_one_stripped_chunk() -> None:
    text = "\n\n  Hello world. This is short.  \n"
    [chunk] = split_document(text, GPT4, page_starts=[0])
    assert chunk.text == "Hello world. This is short."
    assert (chunk.start_char, chunk.end_char) == (4, 31)
    assert chunk.pages == (1,)


def test_paragraphs_kept_whole_when_they_fit() -> None:
    para = "Sentence number {} talks about something. Another remark follows here."
    paragraphs = [para.format(i) for i in range(12)]
    text = "\n\n".join(paragraphs)
    per_para = GPT4.count(paragraphs[0])
    chunks = split_document(text, GPT4, chunk_size=per_para * 3 + 5, chunk_overlap=0)
    check_chunks(text, chunks, GPT4, per_para * 3 + 5, 0)
    for chunk in chunks:
        assert chunk.text.startswith("Sentence number")  # starts on a paragraph
        assert chunk.text.endswith("follows here.")  # ends on a paragraph


def test_overlap_is_whole_trailing_sentences() -> None:
    sentences = [f"This is sentence {i} of the test." for i in range(60)]
    text = " ".join(sentences)
    chunks = split_document(text, GPT4, chunk_size=60, chunk_overlap=20)
    check_chunks(text, chunks, GPT4, 60, 20)
    assert len(chunks) > 3
    for prev, nxt in zip(chunks, chunks[1:]):
        assert nxt.text.startswith("This is sentence")
        assert nxt.start_char < prev.end_char  # there is an overlap
        overlap = text[nxt.start_char : prev.end_char]
        assert overlap in sentences_joined(sentences)


def sentences_joined(sentences: list[str]) -> str:
    return " ".join(sentences)


def test_no_overlap_when_zero() -> None:
    text = " ".join(f"Item {i} is listed here." for i in range(200))
    chunks = split_document(text, GPT4, chunk_size=50, chunk_overlap=0)
    check_chunks(text, chunks, GPT4, 50, 0)
    for prev, nxt in zip(chunks, chunks[1:]):
        assert nxt.start_char >= prev.end_char


def test_long_sentence_falls_back_to_phrases_words_and_characters() -> None:
    phrase_heavy = ", ".join(f"clause {i} goes on" for i in range(200)) + "."
    words_only = " ".join(f"word{i}" for i in range(500))
    one_word = "x" * 5000 + "y" * 3000
    for text in (phrase_heavy, words_only, one_word):
        for tok in TOKENIZERS:
            chunks = split_document(text, tok, chunk_size=40, chunk_overlap=10)
            check_chunks(text, chunks, tok, 40, 10)
    chunks = split_document(phrase_heavy, GPT4, chunk_size=40, chunk_overlap=0)
    assert all(c.text.endswith(",") for c in chunks[:-1])  # cut after commas


def test_cjk_only_text() -> None:
    rng = random.Random(7)
    no_punct = "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(6000))
    with_punct = "".join(
        "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(rng.randint(5, 40))) + rng.choice("。！？，、")
        for _ in range(300)
    )
    for text in (no_punct, with_punct):
        for tok in TOKENIZERS:
            chunks = split_document(text, tok, chunk_size=100, chunk_overlap=20)
            assert len(chunks) > 5
            check_chunks(text, chunks, tok, 100, 20)
    chunks = split_document(with_punct, GPT4, chunk_size=100, chunk_overlap=0)
    assert all(c.text[-1] in "。！？，、" for c in chunks[:-1])


def test_pages_across_boundaries() -> None:
    pages = [" ".join(f"Page {p} sentence {i} is here." for i in range(25)) for p in range(1, 6)]
    pages.insert(3, "")  # an empty page (e.g. a failed or blank page)
    text = "\n\n".join(pages)
    page_starts: list[int] = []
    offset = 0
    for idx, page in enumerate(pages):
        offset += 2 if idx else 0
        page_starts.append(offset)
        offset += len(page)
    chunks = split_document(text, GPT4, chunk_size=120, chunk_overlap=30, page_starts=page_starts)
    check_chunks(text, chunks, GPT4, 120, 30, page_starts)
    assert any(len(c.pages) > 1 for c in chunks)
    assert all(4 not in c.pages for c in chunks)  # the empty page is never cited
    assert chunks[0].pages[0] == 1 and chunks[-1].pages[-1] == 6


def test_special_token_text_and_mixed_scripts() -> None:
    text = "Tokens like <|endoftext|> are text. 東京は首都です。 Emoji 😀🎉 stay intact! " * 40
    for tok in TOKENIZERS:
        check_chunks(text, split_document(text, tok, 50, 10), tok, 50, 10)


def test_large_document_runs() -> None:
    rng = random.Random(3)
    vocab = "the a of model data results we show that table figure method 数据 模型 😀".split()
    paragraphs = []
    size = 0
    while size < 1_000_000:
        para = " ".join(
            " ".join(rng.choice(vocab) for _ in range(rng.randint(4, 30))).capitalize() + rng.choice(".!?")
            for _ in range(rng.randint(1, 8))
        )
        paragraphs.append(para)
        size += len(para) + 2
    text = "\n\n".join(paragraphs)
    started = time.perf_counter()
    chunks = split_document(text, GPT4, chunk_size=512, chunk_overlap=64)
    elapsed = time.perf_counter() - started
    print(f"split_document: {len(text)} chars -> {len(chunks)} chunks in {elapsed:.2f}s")
    assert chunks and all(c.token_count <= 512 for c in chunks)
    assert chunks[-1].end_char == len(text.rstrip())
    pieces = split_tokens(text, 512, 64, GPT4)
    assert pieces and all(GPT4.count(p) <= 512 for p in pieces)


# --------------------------------------------------------------------------- property tests

WORDS = st.sampled_from(
    ["alpha", "beta", "Gamma", "delta", "e.g.", "Mr.", "U.S.", "3.5", "1,000", "数据", "模型", "😀", "naïve",
     "<|endoftext|>", "x" * 30, "well-known", "(note)", "“quoted”"]
)  # fmt: skip
PUNCT = st.sampled_from([".", "!", "?", "。", "！", ",", ";", "，", ":", "", "", ""])
SEPARATORS = st.sampled_from([" ", " ", " ", "  ", "\n", "\n\n", "\n \n", "\t", "\r\n", ""])


@st.composite
def documents(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.tuples(WORDS, PUNCT, SEPARATORS), min_size=0, max_size=250))
    return draw(SEPARATORS) + "".join(word + punct + sep for word, punct, sep in parts)


@st.composite
def size_and_overlap(draw: st.DrawFn) -> tuple[int, int]:
    size = draw(st.integers(min_value=12, max_value=160))
    overlap = draw(st.integers(min_value=0, max_value=size - 1))
    return size, overlap


@PROPERTY_SETTINGS
@given(text=documents(), sizes=size_and_overlap(), tok=st.sampled_from(TOKENIZERS))
def test_property_split_document(text: str, sizes: tuple[int, int], tok: Tokenizer) -> None:
    size, overlap = sizes
    chunks = split_document(text, tok, size, overlap)
    check_chunks(text, chunks, tok, size, overlap)


@PROPERTY_SETTINGS
@given(
    text=st.text(min_size=0, max_size=600),
    sizes=size_and_overlap(),
    tok=st.sampled_from(TOKENIZERS),
    data=st.data(),
)
def test_property_split_document_any_unicode_with_pages(
    text: str, sizes: tuple[int, int], tok: Tokenizer, data: st.DataObject
) -> None:
    size, overlap = sizes
    inner = data.draw(st.lists(st.integers(min_value=0, max_value=len(text)), max_size=6))
    page_starts = [0, *sorted(inner)]
    chunks = split_document(text, tok, size, overlap, page_starts=page_starts)
    check_chunks(text, chunks, tok, size, overlap, page_starts)


def locate_pieces(text: str, pieces: list[str]) -> list[tuple[int, int]]:
    """Find each piece in ``text`` in order; a piece may start inside the previous one."""
    spans: list[tuple[int, int]] = []
    search_from = 0
    for piece in pieces:
        pos = text.find(piece, search_from)
        assert pos >= 0, f"piece {piece!r} not found in order"
        spans.append((pos, pos + len(piece)))
        search_from = pos + 1
    return spans


def words_in_order(words: list[str], pieces: list[str]) -> bool:
    """True if the pieces, minus some overlap with their predecessor, spell
    ``words`` exactly.  Repeated words make the overlap ambiguous, so every
    consistent alignment is tracked."""
    reachable = {0}  # number of words covered so far
    for piece in pieces:
        piece_words = piece.split()
        n = len(piece_words)
        nxt = set()
        for covered in reachable:
            for start in range(max(0, covered - n), covered + 1):
                if start + n > covered and words[start : start + n] == piece_words:
                    nxt.add(start + n)
        reachable = nxt
        if not reachable:
            return False
    return len(words) in reachable


@PROPERTY_SETTINGS
@given(text=documents(), sizes=size_and_overlap(), tok=st.sampled_from(TOKENIZERS))
def test_property_split_tokens(text: str, sizes: tuple[int, int], tok: Tokenizer) -> None:
    size, overlap = sizes
    pieces = split_tokens(text, size, overlap, tok)
    assert all(p and p == p.strip() for p in pieces)
    assert all(tok.count(p) <= size for p in pieces)
    words = text.split()
    if all(tok.count(w) <= size for w in words):
        assert words_in_order(words, pieces)
    else:
        # Over-long words are cut by characters; then at least nothing is lost.
        assert (
            "".join(words) in "".join("".join(p.split()) for p in pieces)
            or words_in_order(words, pieces)
            or (set("".join(words)) <= set("".join(pieces)))
        )


def test_split_tokens_cjk_without_spaces() -> None:
    rng = random.Random(11)
    text = "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(3000))
    for tok in TOKENIZERS:
        pieces = split_tokens(text, 64, 16, tok)
        assert len(pieces) > 10
        assert all(tok.count(p) <= 64 for p in pieces)
        spans = locate_pieces(text, pieces)
        assert spans[0][0] == 0 and spans[-1][1] == len(text)
        for (_, a_end), (b_start, _) in zip(spans, spans[1:]):
            assert b_start <= a_end  # no gap: nothing lost


def test_split_tokens_overlap_and_limits() -> None:
    text = " ".join(f"w{i}" for i in range(400))
    pieces = split_tokens(text, 30, 8, GPT4)
    assert all(GPT4.count(p) <= 30 for p in pieces)
    for prev, nxt in zip(pieces, pieces[1:]):
        prev_words, next_words = prev.split(), nxt.split()
        shared = next(k for k in range(len(next_words), -1, -1) if prev_words[len(prev_words) - k :] == next_words[:k])
        assert 0 < shared < len(next_words)
        assert GPT4.count(" ".join(next_words[:shared])) <= 8
