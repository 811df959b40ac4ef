"""Exact token counts without building tiktoken's encoder.

Building a `tiktoken.Encoding` for cl100k (its 100,000-entry rank map and
regex, in Rust) costs about 0.15 s of CPU, a fifth of an offline `docsum ask`
that counts only some 15,000 characters (the question, the templates, the
passages). This module counts those few texts exactly, as tiktoken's
`encode_ordinary` would, from a hash table of the ranks kept as one flat file
in the cache directory: the file is read in a millisecond, and a count costs
one lookup per pre-tokenised piece (most words are one token) plus the byte
pair merges of the rare pieces that are not a token themselves.

The algorithm is tiktoken's: split the text with the encoding's pattern, and
for a piece that is not itself a token, merge adjacent parts, always the pair
whose joined bytes have the lowest rank (the leftmost among equals), until no
joined pair is a token; the piece's count is the number of parts left.
The pattern runs on the standard `re` (tiktoken's Python side imports the
`regex` package, 10 ms of a start-up) with its Unicode classes spelled out.
`Tokenizer` uses it until a process has counted a lot of text (then the Rust
encoder is faster) or needs token ids; tests compare both on real documents.

The table file: a header (magic, slot count, body checksum), then `slots`
8-byte slots (little-endian u32 `offset << 8 | length` into the byte blob,
0 for an empty slot, and u32 rank), then the blob of every token's bytes.
Slots are found by `zlib.crc32` of the bytes with linear probing, at most half
full. It is named by the ranks' checksum, written aside and renamed, and
rebuilt when damaged.
"""

from __future__ import annotations

import functools
import re
import struct
import unicodedata
import zlib
from collections.abc import Callable
from pathlib import Path

_MAGIC = b"docsum-bpe-ranks-1\n"
_HEADER = struct.Struct("<19sII")  # magic, slot count, crc32 of everything after the header
_SLOT = struct.Struct("<II")
_MAX_TOKEN_BYTES = 255  # the length field's size; the longest cl100k or o200k token is 128 bytes

# The characters this module counts. tiktoken's pattern is run by Rust's regex
# with the character classes of its Unicode version; ours by the standard `re`
# with classes spelled out from `unicodedata`, whose version is Python's. A
# character one of them knows as a letter and the other does not yet (U+058C,
# unassigned in Unicode 14, is a letter in Unicode 16) would split a text
# differently, so text with any character outside these blocks, whose classes
# no Unicode version since 4.1 has changed, goes to tiktoken: Latin, IPA,
# Greek, Cyrillic, general punctuation, currency signs to U+20BF, letterlike
# symbols, arrows, mathematical and technical signs, box drawing, shapes and
# miscellaneous symbols (bullets, check boxes). A test compares every one of
# them with tiktoken in many contexts.
COUNTED_BLOCKS: tuple[tuple[int, int], ...] = (
    (0x0000, 0x04FF),
    (0x2000, 0x206F),
    (0x20A0, 0x20BF),
    (0x2100, 0x23FF),
    (0x2460, 0x26FF),
)
_OTHER_CHARACTER = re.compile(
    "[^" + "".join(f"{re.escape(chr(lo))}-{re.escape(chr(hi))}" for lo, hi in COUNTED_BLOCKS) + "]"
).search


def table_bytes(ranks: dict[bytes, int]) -> bytes:
    """The table file for `ranks`."""
    slots = 1 << max(4, (2 * len(ranks) - 1).bit_length())  # at most half full: short probe runs
    mask = slots - 1
    table = bytearray(slots * _SLOT.size)
    blob = bytearray()
    for token, rank in ranks.items():
        if not token or len(token) > _MAX_TOKEN_BYTES:
            raise ValueError(f"a token of {len(token)} bytes cannot be stored")
        slot = zlib.crc32(token) & mask
        while _SLOT.unpack_from(table, slot * _SLOT.size)[0]:
            slot = (slot + 1) & mask
        _SLOT.pack_into(table, slot * _SLOT.size, (len(blob) << 8) | len(token), rank)
        blob += token
    if len(blob) >= 1 << 24:
        raise ValueError("the tokens' bytes do not fit the table's 24-bit offsets")
    body = bytes(table) + bytes(blob)
    return _HEADER.pack(_MAGIC, slots, zlib.crc32(body)) + body


class RankTable:
    """The ranks of one encoding, looked up in a table file's bytes."""

    __slots__ = ("_data", "_mask", "_blob")

    def __init__(self, data: bytes) -> None:
        """ValueError when `data` is not a whole, undamaged table file."""
        if len(data) < _HEADER.size:
            raise ValueError("truncated")
        magic, slots, checksum = _HEADER.unpack_from(data, 0)
        if magic != _MAGIC or slots & (slots - 1) or len(data) < _HEADER.size + slots * _SLOT.size:
            raise ValueError("not a rank table")
        if zlib.crc32(memoryview(data)[_HEADER.size :]) != checksum:
            raise ValueError("damaged")
        self._data = data
        self._mask = slots - 1
        self._blob = _HEADER.size + slots * _SLOT.size

    @classmethod
    def read(cls, path: Path) -> RankTable | None:
        """The table in `path`, or None when it is missing or damaged."""
        try:
            return cls(path.read_bytes())
        except (OSError, ValueError):
            return None

    def rank(self, token: bytes) -> int | None:
        data, mask, blob, size = self._data, self._mask, self._blob, len(token)
        slot = zlib.crc32(token) & mask
        while True:
            packed, rank = _SLOT.unpack_from(data, _HEADER.size + slot * 8)
            if not packed:
                return None
            if packed & 0xFF == size:
                start = blob + (packed >> 8)
                if data[start : start + size] == token:
                    return rank
            slot = (slot + 1) & mask


def merged_parts(piece: bytes, rank: Callable[[bytes], int | None]) -> int:
    """How many tokens byte pair merging leaves of `piece` (tiktoken's
    `_byte_pair_merge`: the lowest-ranked joinable pair first, the leftmost
    among equals)."""
    if len(piece) < 2:
        return len(piece)
    never = 1 << 62
    # bounds[i] is where part i starts; pair_rank[i] is the rank of part i
    # joined with part i + 1 (never when that is not a token).
    bounds = list(range(len(piece) + 1))

    def joined(i: int) -> int:
        if i + 2 < len(bounds):
            found = rank(piece[bounds[i] : bounds[i + 2]])
            return never if found is None else found
        return never

    pair_rank = [joined(i) for i in range(len(bounds) - 1)]
    while True:
        best = min(pair_rank)
        if best == never:
            return len(bounds) - 1
        i = pair_rank.index(best)  # the leftmost of the lowest rank
        del bounds[i + 1]
        del pair_rank[i + 1]
        pair_rank[i] = joined(i)
        if i > 0:
            pair_rank[i - 1] = joined(i - 1)


# Unicode's White_Space, what `\s` means to Rust's regex (the standard `re`
# also takes the separators U+001C to U+001F).
_WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_PROPERTY = re.compile(r"\\p\{(\w+)\}")


@functools.cache
def _categories() -> list[tuple[int, str]]:
    return [(code, unicodedata.category(chr(code))) for lo, hi in COUNTED_BLOCKS for code in range(lo, hi + 1)]


@functools.cache
def _property_class(name: str) -> str:
    """The members of Unicode property `name` (L, N, Lu, M, ...) among the
    counted characters, as a character class's inside."""
    members = [code for code, category in _categories() if category.startswith(name)]
    ranges: list[str] = []
    start = previous = members[0]
    for code in [*members[1:], -1]:
        if code != previous + 1:
            ranges.append(re.escape(chr(start)) + ("" if start == previous else "-" + re.escape(chr(previous))))
            start = code
        previous = code
    return "".join(ranges)


def stdlib_pattern(pat_str: str) -> str:
    """tiktoken's pattern `pat_str` for the standard `re` (3.11 has possessive
    quantifiers, not `\\p{...}`): each property and `\\s` spelled out as a
    class, which is exact for countable text."""
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pat_str):
        char = pat_str[i]
        if char == "\\":
            escape = pat_str[i : i + 2]
            found = _PROPERTY.match(pat_str, i)
            if found:
                inside, i = _property_class(found.group(1)), found.end()
            elif escape in ("\\s", "\\S"):
                inside, i = ("" if escape == "\\s" else "^") + _WHITE_SPACE, i + 2
                if in_class and escape == "\\S":
                    raise ValueError("\\S inside a class cannot be spelled out")
            else:
                out.append(escape)
                i += 2
                continue
            out.append(inside if in_class else f"[{inside}]")
            continue
        if char == "[" and not in_class:
            in_class = True
        elif char == "]" and in_class:
            in_class = False
        out.append(char)
        i += 1
    return "".join(out)


def countable(text: str) -> bool:
    """Whether every character of `text` is one this module counts exactly."""
    return text.isascii() or _OTHER_CHARACTER(text) is None


class ExactCounter:
    """Counts as `tiktoken.Encoding(pat_str, ranks).encode_ordinary` would,
    for text that is `countable`."""

    __slots__ = ("_split", "_table", "_known", "_texts", "_texts_chars", "counted_chars")

    # Pieces counted so far, so a word costs one lookup per process; bounded
    # (cleared when full) so a long run does not grow without end.
    _KNOWN_LIMIT = 200_000
    # Whole texts counted so far: a question counts its prompt templates and
    # passages again for every plan and call (an offline one counts 55,000
    # characters, 13,000 of them distinct). Bounded by their characters.
    _TEXTS_LIMIT_CHARS = 2_000_000

    def __init__(self, pat_str: str, table: RankTable) -> None:
        self._split = re.compile(stdlib_pattern(pat_str)).findall
        self._table = table
        self._known: dict[str, int] = {}
        self._texts: dict[str, int] = {}
        self._texts_chars = 0
        self.counted_chars = 0  # so a caller can tell when the Rust encoder would pay for itself

    def count(self, text: str) -> int:
        n = self._texts.get(text)
        if n is not None:
            return n
        self.counted_chars += len(text)
        try:
            n = self._count(text)
        except UnicodeEncodeError:
            # A lone surrogate (a broken document): tiktoken counts the text
            # with each one replaced by U+FFFD, and so do we.
            n = self._count(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))
        if self._texts_chars + len(text) > self._TEXTS_LIMIT_CHARS:
            self._texts.clear()
            self._texts_chars = 0
        self._texts[text] = n
        self._texts_chars += len(text)
        return n

    def _count(self, text: str) -> int:
        known, total = self._known, 0
        for piece in self._split(text):
            n = known.get(piece)
            if n is None:
                raw = piece.encode("utf-8")
                n = 1 if self._table.rank(raw) is not None else merged_parts(raw, self._table.rank)
                if len(known) >= self._KNOWN_LIMIT:
                    known.clear()
                known[piece] = n
            total += n
        return total
