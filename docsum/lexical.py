"""Word-level text statistics shared by the offline engine and the lexical
stand-in for embeddings.

Offline, docsum has no embedding model. It embeds texts as hashed bags of
stemmed content words (sparse counts folded into a fixed number of buckets), so
the store, the retriever and the chunk baseline use one vector interface either
way. At query time the retriever weights buckets by inverse document frequency
over the stored vectors, which turns cosine similarity into a TF-IDF score.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections import Counter
from typing import TYPE_CHECKING

from docsum.lazyre import LazyPattern

if TYPE_CHECKING:  # numpy loads when vectors are made or scored: `config show` names the model only
    import numpy as np

LEXICAL_EMBED_MODEL = "docsum-lexical-v1"
LEXICAL_DIM = 4096

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
# Kana, CJK ideographs and Hangul: a class of 40,000 code points, whose
# compiling costs 3 ms, so it is compiled the first time a text has one.
CJK_CHARACTER = LazyPattern(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
FIRST_CJK_CHARACTER = "\u3040"  # a text whose max() is below it has none

STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each few
    for from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your yours
    yourself yourselves describe provided text questions question answer can many much one
    two does did get got us may might shall using used use""".split()
)


def stem(word: str) -> str:
    """A deliberately small suffix stripper: enough to match plurals and common
    verb forms, cheap, and language-neutral for words it does not recognise."""
    if len(word) <= 3 or not word.isascii():
        return word
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("edly", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith("ss"):
                return word
            return word[: len(word) - len(suffix)] + keep
    return word


def terms(text: str) -> list[str]:
    """Stemmed content words; CJK text contributes one term per character pair."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        out.extend(_word_terms(word))
    return out


# Words repeat: a store's summaries and nodes hold a few ten thousand distinct
# words among millions, so each is cut into terms once (at 100,000 documents,
# indexing spent most of its time stemming the same words again).
@functools.lru_cache(maxsize=1 << 16)
def _word_terms(word: str) -> tuple[str, ...]:
    """The terms of one lower-cased word (none for a stopword)."""
    if word.endswith(("'s", "’s")):
        word = word[:-2]  # possessive: "acme's" matches "acme"
    if max(word, default="") >= FIRST_CJK_CHARACTER and CJK_CHARACTER.search(word):
        chars = [c for c in word if not c.isspace()]
        pairs = [chars[i] + chars[i + 1] for i in range(len(chars) - 1)]
        return tuple(pairs) if len(chars) != 1 else (chars[0],)
    if word in STOPWORDS or (len(word) == 1 and not word.isdigit()):
        return ()
    return (stem(word),)


# The months as documents spell them, and a pattern matching any of them.
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
MONTH_PATTERN = "|".join(MONTHS)
# Capital and small letters of the Latin alphabets, for patterns that read a
# name by its capitals: "Józef Ważny" and "Łęczyca" are names as
# "John Smith" is, and `[A-Z][a-z]+` sees neither.
CAPITAL = "[" + "".join(chr(c) for c in range(0x250) if chr(c).isupper()) + "]"
SMALL = "[" + "".join(chr(c) for c in range(0x250) if chr(c).islower()) + "]"
# As tables and headings abbreviate them ("Sep 30, 2023", "Sept. 24, 2022").
MONTH_ABBREVIATIONS = ("Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Oct", "Nov", "Dec")

# Not after an initial: "Mara J. Quinn", "J. Arlen Voss" are one name.
# I, V and X are Roman numerals as often ("PART I. FINANCIAL INFORMATION"):
# filings read so summarize worse (SEC PDF recall@3 0.742 -> 0.725).
# Nor after a title before a name ("Hon. Tamas Orr", "Dr. Sol Baptiste").
_TITLES = ("Mr", "Mrs", "Ms", "Dr", "Hon", "Prof", "Rev", "Sen", "Gov", "Gen", "Col", "Capt", "Lt", "Sgt", "St", "Mt")
# Nor after "circa": "Tomas Vell (c. 1450 – c. 1500)".
_NOT_AFTER = r"(?<!\s[A-HJ-UWYZ]\.)(?<!^[A-HJ-UWYZ]\.)(?<!\bc\.)(?<!\bca\.)" + "".join(
    rf"(?<!\b{title}\.)" for title in _TITLES
)
_CLOSING = r"[\"'”’)\]]*\s+|\n\s*\n|(?<=[。！？])"
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])" + _NOT_AFTER + _CLOSING)
# For answers, nor after an initialism ("U.S. Treasury", "U.K. GAAP")
# unless a word that opens sentences follows ("… sold in the U.S. The
# company …"). Summaries keep the rule they were built with: SEC PDF
# recall@3 fell 0.742 -> 0.698 with this one.
_OPENS_SENTENCE = "The|We|Our|In|It|Its|This|These|Those|As|For|On|At|An?|They|He|She|There|During|However|After"
_ANSWER_SENTENCE_END = re.compile(
    r"(?<=[.!?。！？])" + _NOT_AFTER + r"(?<!\.[A-Z]\.)" + _CLOSING + rf"|(?<=\.[A-Z]\.)\s+(?=(?:{_OPENS_SENTENCE})\b)"
)


# A "sentence" longer than this with line breaks inside is a table or a list,
# not prose: its lines are the units worth choosing between.
LONG_SENTENCE_CHARS = 300


def sentences(text: str, initialisms: bool = False) -> list[str]:
    """Sentences and paragraph-level fragments, stripped, non-empty. Long
    fragments made of several lines (table rows, list items) are split into
    their lines. `initialisms`: an initialism ends no sentence unless a word
    that opens one follows (for answers)."""
    parts: list[str] = []
    for block in (_ANSWER_SENTENCE_END if initialisms else _SENTENCE_END).split(text):
        pieces = block.splitlines() if len(block) > LONG_SENTENCE_CHARS and "\n" in block.strip() else [block]
        for piece in pieces:
            piece = " ".join(piece.split())
            if piece:
                parts.append(piece)
    return parts


def _bucket(term: str) -> int:
    # Counts stay non-negative (no sign hashing) so bucket document frequencies
    # are meaningful for the IDF weights.
    digest = hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % LEXICAL_DIM


def lexical_vectors(texts: list[str]) -> np.ndarray:
    """Hashed log-count vectors, L2-normalised, one row per text."""
    import numpy as np

    matrix = np.zeros((len(texts), LEXICAL_DIM), dtype=np.float32)
    for row, text in enumerate(texts):
        for term, count in Counter(terms(text)).items():
            matrix[row, _bucket(term)] += 1.0 + math.log(count)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def idf_weights(matrix: np.ndarray) -> np.ndarray:
    """Smoothed inverse document frequency per bucket over the rows of `matrix`."""
    import numpy as np

    n = max(1, matrix.shape[0])
    df = np.count_nonzero(matrix > 0, axis=0).astype(np.float32)
    return np.log((n + 1.0) / (df + 1.0)).astype(np.float32) + 1.0


def lexical_scores(query_vec: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Cosine similarity after IDF weighting, one score per row, in [0, 1]."""
    import numpy as np

    if matrix.size == 0:
        return np.zeros(0, dtype=np.float32)
    weights = idf_weights(matrix)
    docs = matrix * weights
    q = query_vec.reshape(-1) * weights
    dn = np.linalg.norm(docs, axis=1)
    qn = float(np.linalg.norm(q)) or 1.0
    dn[dn == 0] = 1.0
    return (docs @ q) / (dn * qn)


# A title line ending in one of these goes on in the next line ("... for
# Dynamic" does not; "... Specialization for" does).
_TITLE_CONNECTORS = frozenset(
    "a an and as at by for from in of on or the to with via vs und der die das für von".split()
)
_TITLE_MAX_LINES = 3
_TITLE_MAX_CHARS = 200


# A filing's cover names its registrant on the line above this note; that
# name, not "UNITED STATES" (the cover's first line), is what the filing is.
_REGISTRANT = LazyPattern(
    r"^[ \t]*([^\n]*\w[^\n]*?)[ \t]*\n[ \t\n]*\(Exact name of registrant", re.IGNORECASE | re.MULTILINE
)
_REGISTRANT_CHARS = 5000


# ... or on the first line after the commission file number.
_AFTER_FILE_NUMBER = LazyPattern(
    r"^[ \t]*Commission File Number[^\n]*\n[ \t\n]*([^\n]*\w[^\n]*?)[ \t]*$", re.IGNORECASE | re.MULTILINE
)


# The words each pattern needs, looked for first: on a long line without
# them the patterns above backtrack for milliseconds (a quadratic scan of the
# line), and almost no text is a filing's cover.
_REGISTRANT_NOTE = re.compile(r"\(Exact name of registrant", re.IGNORECASE)
_FILE_NUMBER_NOTE = re.compile(r"Commission File Number", re.IGNORECASE)


def registrant(text: str) -> str | None:
    """The registrant named on an SEC filing's cover, if the text is one."""
    head = text[:_REGISTRANT_CHARS]
    found = (_REGISTRANT_NOTE.search(head) and _REGISTRANT.search(head)) or (
        _FILE_NUMBER_NOTE.search(head) and _AFTER_FILE_NUMBER.search(head)
    )
    return " ".join(found.group(1).split()) if found else None


def title_lines(text: str) -> tuple[str, int] | None:
    """A document's title from its first lines, whole: the first line with a
    letter or digit, and the lines that continue it (a title set over two
    lines: "Trace-based Just-in-Time Type Specialization for Dynamic" /
    "Languages"). A line continues the title when the title so far ends in a
    connecting word, a hyphen or a colon, or when it is a single word; an
    author line ("Yusuke Shinyama Satoshi Sekine") or a sentence does not.
    Returns the title and how many lines (blank ones included) it took, or
    None when no line has a letter or digit."""
    lines = text.split("\n", 500)[:500]
    start = next((i for i, line in enumerate(lines) if any(ch.isalnum() for ch in line)), None)
    if start is None:
        return None
    title = " ".join(lines[start].split())
    used = start + 1
    while used < len(lines) and used - start < _TITLE_MAX_LINES and len(title) < _TITLE_MAX_CHARS:
        following = " ".join(lines[used].split())
        words = following.split(" ")
        if not following or title[-1] in ".!?;," or not any(ch.isalpha() for ch in following):
            break
        open_ended = title[-1] in "-:–" or title.rsplit(" ", 1)[-1].lower() in _TITLE_CONNECTORS
        # A lone word carries on a title set in title case ("... for Dynamic"
        # / "Languages"); after an ordinary line ("First line here" /
        # "second") it is text.
        single_word = (
            len(words) == 1 and following.replace("-", "").isalpha() and following[0].isupper() and _title_case(title)
        )
        if not (open_ended or single_word) or any(ch.isdigit() or ch in "@,*∗†" for ch in following):
            break
        title = f"{title} {following}"
        used += 1
    return title, used


def _title_case(line: str) -> bool:
    """Every word but the connecting ones starts with a capital (or a digit)."""
    words = [w for w in line.split() if w.lower() not in _TITLE_CONNECTORS]
    return bool(words) and all(w[0].isupper() or w[0].isdigit() for w in words)
