"""Is extracted text worth summarizing? A PDF with a broken font encoding
yields symbol soup (`:., dP . . i, . . . ?`) or mojibake (letters of a dozen
unrelated scripts in every word); summarizing it stores nonsense without a
word of warning. `garbage_reason` says what is wrong, in one line, or None.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter

# How every reason starts, so a person (and a test) can tell this failure.
UNREADABLE = "unreadable text, not summarized"
# How the warning for a PDF only some of whose pages read starts.
PARTLY_READ = "only part of the text could be read"
# Below this many visible characters there is too little to judge.
MIN_CHARS = 40
# Symbol soup: letters are less than this share of the visible characters
# (ordinary prose is about 80% letters, a table of figures about 45%, digits
# counting as letters here).
MIN_LETTER_SHARE = 0.35
# ... or words are mostly one or two letters long.
MIN_WORD_SHARE = 0.4
# Mojibake: more than this share of the words mix letters of scripts that
# never meet in one word (a CJK ideograph beside a Cherokee letter).
MAX_MIXED_WORD_SHARE = 0.25

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
# Scripts that share words in real text: Japanese mixes kanji and kana,
# Korean may mix hangul and hanja.
_SCRIPT_FAMILY = {
    "CJK": "CJK",
    "HIRAGANA": "CJK",
    "KATAKANA": "CJK",
    "HANGUL": "CJK",
    "IDEOGRAPHIC": "CJK",
    "HALFWIDTH": "CJK",
    "FULLWIDTH": "CJK",
}


@functools.cache  # a build asks for every letter of every document: a few thousand distinct ones
def _script(char: str) -> str:
    """The script of a letter, from its Unicode name ("LATIN SMALL LETTER A"
    → LATIN); marks and modifiers belong to no script of their own."""
    try:
        name = unicodedata.name(char)
    except ValueError:
        return "UNKNOWN"
    first = name.split(" ", 1)[0]
    return _SCRIPT_FAMILY.get(first, first)


def garbage_reason(text: str) -> str | None:
    visible = "".join(text.split())  # the characters that are not whitespace (str.isspace)
    if len(visible) < MIN_CHARS:
        return None
    letters = sum(map(str.isalnum, visible))
    share = letters / len(visible)
    if share < MIN_LETTER_SHARE:
        return f"{UNREADABLE}: mostly symbols, not words ({share:.0%} letters or digits): a broken font encoding or a scan without text"
    words = _WORD.findall(text)
    if not words:
        return f"{UNREADABLE}: no words at all: a broken font encoding or a scan without text"
    # ASCII words are Latin letters only: no CJK, no word mixing scripts. The
    # common case skips looking up each letter's script.
    ascii_only = text.isascii()
    if ascii_only:
        cjk = 0.0
    else:
        scripts = Counter(_script(c) for w in words for c in w)
        cjk = scripts.get("CJK", 0) / max(1, sum(scripts.values()))
    # One-letter "words" are normal in CJK (every ideograph stands alone).
    if cjk < 0.5:
        real = sum(1 for w in words if len(w) >= 2)
        if real / len(words) < MIN_WORD_SHARE:
            return f"{UNREADABLE}: mostly scattered letters or glyph codes ({real / len(words):.0%} of its words are longer than one letter): a broken font encoding or a scan without text"
    long_words = [w for w in words if len(w) >= 2]
    if long_words and not ascii_only:
        mixed = sum(
            1 for w in long_words if len({_script(c) for c in w if c.isalpha()} - {"MODIFIER", "COMBINING"}) > 1
        )
        if mixed / len(long_words) > MAX_MIXED_WORD_SHARE:
            return (
                f"{UNREADABLE}: mojibake ({mixed / len(long_words):.0%} of its words mix letters of unrelated scripts): "
                "the PDF's fonts map characters wrongly"
            )
    return None
