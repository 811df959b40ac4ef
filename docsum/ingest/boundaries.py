"""Where text may be cut: paragraph breaks, sentence ends, phrase separators
and word starts, in that order of preference (docsum.ingest.split packs the
pieces into token-bounded chunks).

A cutter returns the interior cut positions of text[start:end], ascending.
Whitespace before a cut position belongs to the piece that follows it, so the
pieces together are always exactly the text.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Span = tuple[int, int]
Cutter = Callable[[str, int, int], list[int]]

# A whitespace run holding two newlines always contains a blank line.  The
# look-behind makes the match start at the beginning of the run (so the whole
# run goes to the next paragraph) and stops the engine from retrying at every
# position inside long whitespace runs; possessive quantifiers prevent
# backtracking.
_PARA_BREAK = re.compile(r"(?<!\s)[^\S\n]*+\n[^\S\n]*+\n")

# Latin terminators count only before whitespace or the end, so "3.5", "e.g.x"
# and URLs never split.  CJK text has no spaces between sentences, so 。！？ end
# a sentence wherever they occur.  Closing quotes/brackets stay with the sentence.
_SENTENCE_END = re.compile(r"""[.!?…]+['"”’»)\]]*(?=\s|\Z)|[。！？]+[」』”’）》】"']*""")
_LAST_WORD = re.compile(r"\S+\Z")
_NEXT_CHAR = re.compile(r"\s*(\S)")
_INITIALS = re.compile(r"(?:[^\W\d_]\.)+")  # "U.S.", "e.g.", "J."
_LEADING_OPENERS = "([{\"'“‘«"

# Lower-case, with their final period.  "etc." is deliberately absent: it ends
# sentences too often, and the "next word is lower-case" rule already keeps
# "etc. and so on" together.
_ABBREVIATIONS = frozenset(
    {
        "mr.", "mrs.", "ms.", "dr.", "prof.", "sr.", "jr.", "st.", "mt.", "ft.",
        "vs.", "cf.", "al.", "fig.", "figs.", "eq.", "eqs.", "no.", "nos.", "vol.",
        "vols.", "p.", "pp.", "ch.", "sec.", "approx.", "inc.", "ltd.", "co.",
        "corp.", "dept.", "gen.", "gov.", "rev.", "jan.", "feb.", "mar.", "apr.",
        "jun.", "jul.", "aug.", "sep.", "sept.", "oct.", "nov.", "dec.", "ph.d.",
    }
)  # fmt: skip

# Latin separators need following whitespace ("1,000", "http://" stay whole).
_PHRASE_END = re.compile(r"[,;:](?=\s)|[，；：、]")
_WORD_START = re.compile(r"(?<!\s)\s")


def paragraph_cuts(text: str, start: int, end: int) -> list[int]:
    return [m.start() for m in _PARA_BREAK.finditer(text, start, end) if start < m.start() < end]


def _is_abbreviation(text: str, start: int, match: re.Match[str]) -> bool:
    word_match = _LAST_WORD.search(text, max(start, match.start() - 40), match.end())
    if word_match is None:
        return False
    word = word_match.group().lstrip(_LEADING_OPENERS).lower()
    return word in _ABBREVIATIONS or _INITIALS.fullmatch(word) is not None


def sentence_cuts(text: str, start: int, end: int) -> list[int]:
    cuts: list[int] = []
    for m in _SENTENCE_END.finditer(text, start, end):
        pos = m.end()
        if pos >= end or pos <= start:
            continue
        if m.group()[0] in "。！？":
            cuts.append(pos)
            continue
        nxt = _NEXT_CHAR.match(text, pos, end)
        # A lower-case continuation means the period was not a sentence end
        # ("etc. and", "approx. five").
        if nxt is not None and nxt.group(1).islower():
            continue
        if "." in m.group() and _is_abbreviation(text, start, m):
            continue
        cuts.append(pos)
    return cuts


def phrase_cuts(text: str, start: int, end: int) -> list[int]:
    return [m.end() for m in _PHRASE_END.finditer(text, start, end) if start < m.end() < end]


def word_cuts(text: str, start: int, end: int) -> list[int]:
    return [m.start() for m in _WORD_START.finditer(text, start, end) if start < m.start() < end]


def cut_spans(start: int, end: int, cuts: list[int]) -> list[Span]:
    """text[start:end] as the pieces between `cuts` (interior positions, ascending)."""
    bounds = [start, *cuts, end]
    return [(bounds[k], bounds[k + 1]) for k in range(len(bounds) - 1)]
