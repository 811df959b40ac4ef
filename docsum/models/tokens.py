"""Token counting that works offline.

tiktoken normally fetches its BPE tables from the internet the first time an
encoding is used.  docsum must work on air-gapped machines and inside sandboxes,
so the two tables we need ship gzipped in ``docsum/data`` (origin and hashes are
recorded in NOTICE) and we build ``tiktoken.Encoding`` objects from them
ourselves.  Nothing in this module ever calls ``tiktoken.get_encoding``.

Local models (llama, mistral, qwen, ...) use tokenizers we do not have.  For
those we count with cl100k_base and add a safety margin, because budgets derived
from an underestimate would overflow the server's context window.

Counting and splitting both use tiktoken's encoder, built through its public
constructor (``tiktoken.Encoding``) from the bundled table. Decoding the table's
100,000 base64 lines is half of building it, so the decoded ranks are kept in
the cache directory (checksummed; a damaged copy is decoded again).
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import marshal
import math
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # loaded with the first table: a command that counts nothing never imports it
    import tiktoken

_ENDOFTEXT = "<|endoftext|>"
_FIM_PREFIX = "<|fim_prefix|>"
_FIM_MIDDLE = "<|fim_middle|>"
_FIM_SUFFIX = "<|fim_suffix|>"
_ENDOFPROMPT = "<|endofprompt|>"

# The pre-tokenisation patterns and special tokens must match tiktoken's own
# definitions (tiktoken_ext/openai_public.py) exactly, or our counts would drift
# from what the OpenAI API bills and enforces.
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


class _Spec:
    __slots__ = ("filename", "sha256", "pat_str", "special_tokens")

    def __init__(self, filename: str, sha256: str, pat_str: str, special_tokens: dict[str, int]) -> None:
        self.filename = filename
        self.sha256 = sha256  # of the decompressed table; the same hash tiktoken checks downloads against
        self.pat_str = pat_str
        self.special_tokens = special_tokens


_SPECS: dict[str, _Spec] = {
    "cl100k_base": _Spec(
        "cl100k_base.tiktoken.gz",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        _CL100K_PAT,
        {
            _ENDOFTEXT: 100257,
            _FIM_PREFIX: 100258,
            _FIM_MIDDLE: 100259,
            _FIM_SUFFIX: 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
    "o200k_base": _Spec(
        "o200k_base.tiktoken.gz",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        _O200K_PAT,
        {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    ),
}

ENCODING_NAMES: tuple[str, ...] = tuple(_SPECS)

# Extra fraction added to counts for models whose real tokenizer we lack.  Llama 3,
# Mistral, Qwen and Gemma tokenizers produce up to roughly 10% more tokens than
# cl100k on ordinary prose, so this keeps budgets on the safe side.
UNKNOWN_MODEL_MARGIN = 0.1

# Checked in order, so the o200k families must come before the plain "gpt-4" prefix.
_MODEL_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt-4o", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("text-embedding-", "cl100k_base"),
)

# Below this average text length, tiktoken's thread-pool batch costs far more in
# per-item future overhead than it saves (measured ~40x slower on 200k short
# words), so short texts are encoded in a plain loop.
_BATCH_MIN_AVG_CHARS = 16_000


def _read_ranks(spec: _Spec) -> dict[bytes, int]:
    """The table's ranks, from the decoded copy in the cache directory when
    there is one: decoding 100,000 base64 lines is most of a start-up's time,
    loading the copy a quarter of it."""
    cached = _cached_ranks(spec)
    if cached is not None:
        return cached
    ranks = _decode_ranks(spec)
    _cache_ranks(spec, ranks)
    return ranks


def _cache_file(spec: _Spec) -> Path:
    from docsum.paths import cache_dir

    # Named by the table's checksum: another table (or docsum version) never reads it.
    return cache_dir() / f"{spec.filename}.{spec.sha256[:16]}.marshal"


def _write_cache(path: Path, data: bytes) -> None:
    """Best effort (a read-only home just makes it again next time); written
    aside and renamed, so a reader never sees half a file."""
    from docsum.paths import replaced_atomically

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with replaced_atomically(path) as out:
            out.write(data)
    except OSError:
        pass


def _cached_ranks(spec: _Spec) -> dict[bytes, int] | None:
    try:
        data = _cache_file(spec).read_bytes()
        digest, body = data[:32], data[32:]
        if hashlib.sha256(body).digest() != digest:
            return None  # damaged: decoded again and rewritten
        ranks = marshal.loads(body)
    except (OSError, ValueError, EOFError, TypeError):
        return None
    return ranks if isinstance(ranks, dict) else None


def _cache_ranks(spec: _Spec, ranks: dict[bytes, int]) -> None:
    body = marshal.dumps(ranks)
    _write_cache(_cache_file(spec), hashlib.sha256(body).digest() + body)


def _decode_ranks(spec: _Spec) -> dict[bytes, int]:
    blob = resources.files("docsum").joinpath("data", spec.filename).read_bytes()
    raw = gzip.decompress(blob)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != spec.sha256:
        # A damaged install would otherwise produce silently wrong counts.
        raise RuntimeError(f"bundled tokenizer table {spec.filename} is corrupt (sha256 {digest}); reinstall docsum")
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if not line:
            continue
        token_b64, rank = line.split()
        ranks[base64.b64decode(token_b64)] = int(rank)
    return ranks


@functools.cache
def get_encoding(name: str) -> tiktoken.Encoding:
    """Return the bundled encoding ``name`` ("cl100k_base" or "o200k_base").

    Loading takes ~0.1 s for cl100k and ~0.3 s for o200k, hence the cache.
    """
    import tiktoken

    spec = _SPECS.get(name)
    if spec is None:
        raise ValueError(f"unknown encoding {name!r}; available: {', '.join(ENCODING_NAMES)}")
    return tiktoken.Encoding(
        name,
        pat_str=spec.pat_str,
        mergeable_ranks=_read_ranks(spec),
        special_tokens=dict(spec.special_tokens),
    )


class Tokenizer:
    """Counts tokens for one model family.

    ``margin`` inflates counts (never ids) for models whose tokenizer we only
    approximate. Given an encoding's name, the table is loaded when the first
    text is counted (0.05-0.3 s): an engine is made by every command that
    could call a model, and many never count a token (an unchanged rebuild,
    a question with no store to answer from).
    """

    __slots__ = ("_encoding", "_name", "margin")

    def __init__(self, encoding: tiktoken.Encoding | str, margin: float = 0.0) -> None:
        if margin < 0:
            raise ValueError("margin must be >= 0")
        if isinstance(encoding, str):
            if encoding not in _SPECS:
                raise ValueError(f"unknown encoding {encoding!r}; available: {', '.join(ENCODING_NAMES)}")
            self._encoding: tiktoken.Encoding | None = None
            self._name = encoding
        else:
            self._encoding, self._name = encoding, encoding.name
        self.margin = margin

    @property
    def encoding(self) -> tiktoken.Encoding:
        if self._encoding is None:
            self._encoding = get_encoding(self._name)
        return self._encoding

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"Tokenizer(name={self.name!r}, margin={self.margin})"

    def encode(self, text: str) -> list[int]:
        # Documents routinely contain strings like "<|endoftext|>" (e.g. papers
        # about tokenizers); treating them as plain text keeps encode total.
        return self.encoding.encode_ordinary(text)

    def decode(self, ids: list[int]) -> str:
        return self.encoding.decode(ids)

    def inflate(self, n: int) -> int:
        """The count reported for ``n`` raw encoder tokens (margin applied)."""
        if not self.margin:
            return n
        # round() first so float noise (10 * 1.1 == 11.000000000000002) does not
        # push ceil() one token too high.
        return math.ceil(round(n * (1.0 + self.margin), 6))

    def raw_budget(self, limit: int) -> int:
        """The most raw encoder tokens whose inflated count is still <= ``limit``.

        Lets callers sum raw per-piece counts and inflate once: inflating every
        small piece separately would round each one up (a one-token word would
        count as two) and waste a large part of every budget.
        """
        n = math.floor(limit / (1.0 + self.margin))
        while self.inflate(n + 1) <= limit:
            n += 1
        while n > 0 and self.inflate(n) > limit:
            n -= 1
        return max(0, n)

    def count(self, text: str) -> int:
        if not text:
            return 0
        return self.inflate(len(self.encoding.encode_ordinary(text)))

    def count_many(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        total_chars = sum(len(t) for t in texts)
        if len(texts) > 1 and total_chars >= _BATCH_MIN_AVG_CHARS * len(texts):
            encoded = self.encoding.encode_ordinary_batch(list(texts))
            return [self.inflate(len(ids)) for ids in encoded]
        encode = self.encoding.encode_ordinary
        return [self.inflate(len(encode(t))) if t else 0 for t in texts]


def _normalise_model(model: str) -> str:
    name = model.strip().lower()
    # "openai/gpt-4o" (router style) and "ft:gpt-4o-mini:org::id" (fine-tunes)
    # name the same base model and tokenizer.
    name = name.rsplit("/", 1)[-1]
    if name.startswith("ft:"):
        name = name[3:]
    return name


def encoding_name_for_model(model: str | None) -> str | None:
    """The encoding a known OpenAI model uses, or None when we can only approximate."""
    if not model:
        return None
    name = _normalise_model(model)
    for prefix, encoding_name in _MODEL_PREFIXES:
        if name.startswith(prefix):
            return encoding_name
    return None


@functools.lru_cache(maxsize=64)
def tokenizer_for_model(model: str | None) -> Tokenizer:
    """Tokenizer for ``model``; unknown or missing models get cl100k plus a margin."""
    encoding_name = encoding_name_for_model(model)
    if encoding_name is None:
        return Tokenizer("cl100k_base", UNKNOWN_MODEL_MARGIN)
    return Tokenizer(encoding_name, 0.0)
