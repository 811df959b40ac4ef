"""Exact counts without tiktoken's encoder (docsum.models.bpecount): the same
number tiktoken's `encode_ordinary` gives, for every character the counter
takes, on real filings, and through `Tokenizer.count`, which falls back to the
encoder for any other text."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import EVAL_PDFS, REPO, subprocess_env

from docsum.models import bpecount, tokens
from docsum.models.bpecount import COUNTED_BLOCKS, ExactCounter, RankTable, countable, merged_parts, table_bytes
from docsum.models.tokens import Tokenizer, exact_counter, get_encoding

SEC_TEXT = EVAL_PDFS.parent / "corpora" / "sec-10-q"
ENCODINGS = ("cl100k_base", "o200k_base")

# Where a character's class (letter, digit, space, other; upper or lower case
# for o200k) decides how the pattern splits: beside letters, digits, an
# apostrophe, line ends, its own kind.
CONTEXTS = (
    "{c}_g",
    "g{c}_",
    "1{c}2",
    " {c} ",
    "a{c}b",
    "{c}{c}",
    "\n{c}\r\n",
    "'{c}'s",
    "A{c}a",
    "Ab{c}'LL x {c}{c} y",
)


@pytest.fixture(scope="module", params=ENCODINGS)
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[ExactCounter, object]:
    """A fresh counter (nothing remembered) and tiktoken's encoder for one encoding."""
    spec = tokens._SPECS[request.param]
    counter = ExactCounter(spec.pat_str, RankTable(table_bytes(tokens._read_ranks(spec))))
    return counter, get_encoding(request.param)


def test_every_counted_character_splits_and_merges_as_tiktoken_does(pair: tuple[ExactCounter, object]) -> None:
    counter, encoding = pair
    wrong = []
    for lo, hi in COUNTED_BLOCKS:
        text = "".join(ctx.format(c=chr(code)) for code in range(lo, hi + 1) for ctx in CONTEXTS)
        if counter.count(text) != len(encoding.encode_ordinary(text)):  # type: ignore[attr-defined]
            # Find the characters, for the message.
            wrong += [
                hex(code)
                for code in range(lo, hi + 1)
                if counter.count(t := "".join(ctx.format(c=chr(code)) for ctx in CONTEXTS))
                != len(encoding.encode_ordinary(t))
            ]  # type: ignore[attr-defined]
    assert wrong == []


def test_text_the_counter_does_not_take_goes_to_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    assert countable("plain ASCII") and countable("naïve “quotes” – € ™ → ≤ ☐ ☒ • Ελληνικά русский")
    # A newer `regex` knows U+058C as a letter, tiktoken's Rust regex not yet.
    for other in ("東京", "\u058c_g", "😀", "\u2070", "العربية", "\ufffd"):
        assert not countable(f"text {other} text")
    tok = Tokenizer("cl100k_base")
    counter = exact_counter("cl100k_base")
    monkeypatch.setattr(tokens, "_built", set())
    before = counter.counted_chars
    text = "\u058c_g 東京は日本の首都です。"
    assert tok.count(text) == len(get_encoding("cl100k_base").encode_ordinary(text))
    assert counter.counted_chars == before  # counted by the encoder, not the table


@pytest.mark.parametrize(
    "text",
    [
        "supercalifragilisticexpialidocious antidisestablishmentarianism 1234567890123",
        "https://example.com/a/b?c=d&e=f#g   \t\t  \n\n\n  x",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "ŁÓDŹ żółć DŽ ǅ ǆ Ǆ ǲ ΣΊΣΥΦΟΣ Ǳ ʼn 'S 'LL 's'll'VE",
        "a lone surrogate \udcd3\udcf4 and a pair \ud83d\ude00 in broken text",
        "",
    ],
)
def test_merges_of_pieces_that_are_not_tokens(pair: tuple[ExactCounter, object], text: str) -> None:
    counter, encoding = pair
    assert counter.count(text) == len(encoding.encode_ordinary(text))  # type: ignore[attr-defined]


def test_merging_takes_the_lowest_rank_then_the_leftmost() -> None:
    ranks = {b"ab": 5, b"bc": 5, b"abc": 9, b"cd": 1, b"bcd": 2}
    # "abcd": cd (1) first, then b+cd (2), then a+bcd is no token: 2 parts.
    assert merged_parts(b"abcd", ranks.get) == 2
    # "abc": ab and bc tie at 5, the leftmost (ab) wins, then ab+c (9): 1 part.
    assert merged_parts(b"abc", ranks.get) == 1
    assert merged_parts(b"x", ranks.get) == 1 and merged_parts(b"", ranks.get) == 0


@pytest.mark.skipif(not SEC_TEXT.is_dir(), reason="the evaluation corpora are not next to this checkout")
def test_real_filings_count_as_tiktoken_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "_built", set())
    tok = Tokenizer("cl100k_base")
    encoding = get_encoding("cl100k_base")
    files = sorted(SEC_TEXT.rglob("*.txt"))[:8]
    assert files
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")[:30_000]
        for part in (text, *text.split("\n\n")[:50]):
            if countable(part):
                assert exact_counter("cl100k_base").count(part) == len(encoding.encode_ordinary(part)), path
            assert tok.count(part) == len(encoding.encode_ordinary(part)), path


def test_the_table_file_is_made_once_and_a_damaged_one_is_made_again(tmp_path: Path) -> None:
    """In a fresh process (the counter is kept per process): the first count
    writes the table, the next process reads it, a damaged one is rebuilt."""
    probe = (
        "from docsum.models.tokens import tokenizer_for_model\n"
        "import sys\n"
        "print(tokenizer_for_model(None).count('hello world, again'), 'tiktoken' in sys.modules)\n"
    )

    def run() -> str:
        proc = subprocess.run(
            [sys.executable, "-c", probe],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            env=subprocess_env(DOCSUM_HOME=str(tmp_path)),
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    assert run() == "5 False"
    (table,) = (tmp_path / "cache").glob("cl100k_base*.ranktable")
    assert oct(table.stat().st_mode & 0o777) == "0o600"
    assert RankTable.read(table) is not None
    damaged = bytearray(table.read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    table.write_bytes(bytes(damaged))
    assert RankTable.read(table) is None  # the checksum catches it
    assert run() == "5 False"
    assert RankTable.read(table) is not None  # made again


def test_the_encoder_counts_once_it_is_built_or_the_text_is_long(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "_built", set())  # as in a process that has built no encoder yet
    # A counter of its own: the process's one remembers texts other tests in
    # this worker counted ("hello world" among them), which made this test
    # pass or fail by the order tests ran in.
    exact_counter.cache_clear()
    tok = Tokenizer("o200k_base")
    counter = exact_counter("o200k_base")
    monkeypatch.setattr(counter, "counted_chars", 0)
    assert tok.count("hello world") == 2 and counter.counted_chars == len("hello world")
    assert tok.count("hello world") == 2 and counter.counted_chars == len(
        "hello world"
    )  # remembered, not counted again
    assert tok.count_many(["a b", "c"]) == [2, 1] and counter.counted_chars == len("hello world") + 4
    monkeypatch.setattr(tokens, "EXACT_COUNTER_MAX_CHARS", len("hello world") + 5)
    # Over the budget: the encoder is built and counts from then on.
    assert tok.count("hello world") == 2 and counter.counted_chars == len("hello world") + 4
    monkeypatch.setattr(tokens, "EXACT_COUNTER_MAX_CHARS", 10**9)
    assert tok.count("hello") == 1 and counter.counted_chars == len("hello world") + 4


def test_a_table_that_is_not_one_is_refused() -> None:
    good = table_bytes({b"a": 0, b"b": 1, b"ab": 2})
    assert RankTable(good).rank(b"ab") == 2 and RankTable(good).rank(b"ba") is None
    for bad in (b"", good[:10], b"x" * len(good), good[:-1]):
        with pytest.raises(ValueError):
            RankTable(bad)
    with pytest.raises(ValueError):
        table_bytes({b"": 0})
    assert bpecount.RankTable.read(Path("/nonexistent/table")) is None
