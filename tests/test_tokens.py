from __future__ import annotations

import gzip
import math
from importlib import resources
from pathlib import Path

import pytest
import tiktoken
import tiktoken.load
import tiktoken_ext.openai_public as openai_public

from docsum.models import tokens
from docsum.models.tokens import Tokenizer, get_encoding, tokenizer_for_model

SAMPLE = (
    "The quick brown fox jumps over the lazy dog. It's 3.14159 o'clock!\n\n"
    "    def main() -> None:\n        print('hi')  # indented code\r\n"
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.\n"
    "Emoji: 😀🎉👍🏽 👨‍👩‍👧‍👦 — naïve café résumé, Ελληνικά, русский, العربية.\n"
    "Special-looking text: <|endoftext|> <|fim_prefix|> <|endofprompt|>\n"
    "Numbers 1234567890 and     runs of spaces\t\ttabs\n\n\n"
)

EXPECTED_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}


@pytest.fixture()
def offline(no_network: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """No network, and tiktoken's downloading loaders are off limits too."""

    def no_download(*args: object, **kwargs: object) -> None:
        raise AssertionError("tiktoken's downloading loader must not be used")

    monkeypatch.setattr(tiktoken, "get_encoding", no_download)
    monkeypatch.setattr(tiktoken, "encoding_for_model", no_download)


def _reference_encoding(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tiktoken.Encoding:
    """Build the encoding the way tiktoken itself would, from tiktoken's own
    definition (pattern, special tokens, hash check), but reading the table from
    a local file instead of downloading it."""
    local = tmp_path / f"{name}.tiktoken"
    blob = resources.files("docsum").joinpath("data", f"{name}.tiktoken.gz").read_bytes()
    local.write_bytes(gzip.decompress(blob))
    real_loader = tiktoken.load.load_tiktoken_bpe

    def local_loader(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        assert url.endswith(f"/{name}.tiktoken")
        return real_loader(str(local), expected_hash=expected_hash)

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # empty string disables tiktoken's cache
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", local_loader)
    definition = openai_public.ENCODING_CONSTRUCTORS[name]()
    return tiktoken.Encoding(**definition)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_counts_match_reference_tiktoken(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offline: None
) -> None:
    reference = _reference_encoding(name, tmp_path, monkeypatch)
    ours = get_encoding(name)
    assert ours._pat_str == reference._pat_str
    assert ours._special_tokens == reference._special_tokens
    tok = Tokenizer(ours)
    pieces = [SAMPLE, *SAMPLE.split("\n"), SAMPLE * 20]
    for text in pieces:
        expected = reference.encode_ordinary(text)
        assert tok.encode(text) == expected
        assert tok.count(text) == len(expected)
        assert tok.decode(expected) == text
    assert tok.count_many(pieces) == [len(reference.encode_ordinary(t)) for t in pieces]


def test_known_token_ids() -> None:
    assert get_encoding("cl100k_base").encode_ordinary("hello world") == [15339, 1917]
    assert get_encoding("o200k_base").encode_ordinary("hello world") == [24912, 2375]
    assert get_encoding("cl100k_base").encode("<|endoftext|>", allowed_special="all") == [100257]


def test_both_encodings_load_offline(offline: None) -> None:
    get_encoding.cache_clear()
    tokenizer_for_model.cache_clear()
    try:
        for name in ("cl100k_base", "o200k_base"):
            enc = get_encoding(name)
            assert enc.name == name
            assert enc.decode(enc.encode_ordinary(SAMPLE)) == SAMPLE
    finally:
        get_encoding.cache_clear()
        tokenizer_for_model.cache_clear()


def test_bundled_tables_match_notice_hashes() -> None:
    notice = (Path(__file__).resolve().parents[1] / "NOTICE").read_text(encoding="utf-8")
    assert "bpe-openai" in notice and "MIT" in notice
    for name, digest in EXPECTED_SHA256.items():
        assert tokens._SPECS[name].sha256 == digest
        assert digest in notice
        assert f"{name}.tiktoken.gz" in notice


def test_get_encoding_is_cached_and_limited() -> None:
    assert get_encoding("cl100k_base") is get_encoding("cl100k_base")
    with pytest.raises(ValueError, match="unknown encoding"):
        get_encoding("p50k_base")
    with pytest.raises(ValueError):
        get_encoding("o200k_harmony")


def test_special_token_text_is_ordinary_text() -> None:
    tok = tokenizer_for_model("gpt-4")
    ids = tok.encode("before <|endoftext|> after <|endofprompt|>")
    assert 100257 not in ids and 100276 not in ids
    assert tok.decode(ids) == "before <|endoftext|> after <|endofprompt|>"
    assert tok.count("<|endoftext|>") > 1


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("chatgpt-4o-latest", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-4.5-preview", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-5-mini", "o200k_base"),
        ("o1-preview", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("ft:gpt-4o-mini:acme::abc123", "o200k_base"),
        ("GPT-4O", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-4-0613", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("text-embedding-ada-002", "cl100k_base"),
    ],
)
def test_known_models(model: str, encoding: str) -> None:
    tok = tokenizer_for_model(model)
    assert tok.name == encoding
    assert tok.margin == 0.0
    assert tok.count("hello world") == 2


@pytest.mark.parametrize(
    "model", [None, "", "llama3.1:8b", "mistral-7b-instruct", "qwen2.5:14b", "gemma2", "phi3", "olmo-2"]
)
def test_unknown_models_get_cl100k_with_margin(model: str | None) -> None:
    tok = tokenizer_for_model(model)
    assert tok.name == "cl100k_base"
    assert tok.margin == pytest.approx(0.1)
    raw = len(get_encoding("cl100k_base").encode_ordinary(SAMPLE))
    assert tok.count(SAMPLE) == math.ceil(raw * 1.1 - 1e-9)
    assert tok.count(SAMPLE) > raw
    # 10 raw tokens must give 11, not 12 from float noise (10 * 1.1 = 11.000000000000002).
    ten = "hello world " * 5
    assert len(tok.encode(ten.strip())) == 10
    assert tok.count(ten.strip()) == 11
    assert tok.encode(SAMPLE) == get_encoding("cl100k_base").encode_ordinary(SAMPLE)  # ids unaffected


def test_tokenizer_for_model_is_cached() -> None:
    assert tokenizer_for_model("gpt-4o") is tokenizer_for_model("gpt-4o")
    assert tokenizer_for_model(None) is tokenizer_for_model(None)


def test_count_empty_and_many() -> None:
    for tok in (tokenizer_for_model("gpt-4o"), tokenizer_for_model(None)):
        assert tok.count("") == 0
        assert tok.count_many([]) == []
        short = ["", "a", "hello world", "東京", SAMPLE]
        assert tok.count_many(short) == [tok.count(t) for t in short]
        # Large texts take the thread-pool batch path.
        big = [SAMPLE * 200, SAMPLE * 150 + "x"]
        assert tok.count_many(big) == [tok.count(t) for t in big]


def test_negative_margin_rejected() -> None:
    with pytest.raises(ValueError):
        Tokenizer(get_encoding("cl100k_base"), -0.1)
