"""What makes an offline summary read as prose: an opening sentence that
names the document (its whole title) and says what kind of document it is,
and a measure of how informative a sentence is (names and figures) so the
summary quotes sentences a person would keep rather than headings, formula
debris or word lists.
"""

from __future__ import annotations

import re

from docsum.lexical import registrant, title_lines

# Kinds of document, by a cue in the document's first lines (its cover, title
# block or abstract), first match wins. The label is how the summary names
# the kind.
DOCUMENT_KINDS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(cue, re.IGNORECASE | re.MULTILINE), label)
    for cue, label in (
        (r"\bform\s+10-Q\b", "a quarterly report filed on SEC Form 10-Q"),
        (r"\bform\s+10-K\b", "an annual report filed on SEC Form 10-K"),
        (r"^\s*abstract\b|\babstract[.:—-]", "a research paper"),
        (r"\bminutes of\b|^\s*minutes\b", "meeting minutes"),
        (r"\bnewsletter\b", "a newsletter"),
        (r"\bfact sheet\b", "a fact sheet"),
        (r"\bannual report\b", "an annual report"),
        (r"\b(?:incident|post-event) report\b", "an incident report"),
        (r"\bbulletin\b", "a bulletin"),
        (r"\bwalking guide\b|\bguide\b", "a guide"),
        (r"\bact of (?:1[89]|20)\d\d\b", "a text on legislation"),
        (r"\bvorlesung|\blecture notes\b|\bskript\b", "lecture notes"),
        (r"\b(?:a|an) (?:short )?history\b", "a history"),
        (r"^\s*dear\b", "a letter"),
    )
)
# Only the head of a text says what it is: a cue deep inside ("see the
# minutes of 3 May") says nothing.
KIND_CUE_CHARS = 1500
# An opening this engine wrote one level down (tree summaries summarize
# summaries): "A research paper: Title." is kept as it is.
_OPENING = re.compile(
    r"^(?:" + "|".join(re.escape(label[0].upper() + label[1:]) for _, label in DOCUMENT_KINDS) + r"): .+\.$"
)


def document_kind(text: str) -> str | None:
    head = text[:KIND_CUE_CHARS]
    return next((label for cue, label in DOCUMENT_KINDS if cue.search(head)), None)


def is_opening(line: str) -> bool:
    return bool(_OPENING.match(line.strip()))


def opening(text: str) -> tuple[str | None, str]:
    """The summary's opening sentence, `Kind: Whole title.`, when the text's
    head says what kind of document it is, and the text after the title; else
    None and the whole text. An opening already written (by a level below)
    is kept as it is."""
    stripped = text.lstrip()
    first, _, rest = stripped.partition("\n")
    if is_opening(first):
        return first.strip(), rest
    kind = document_kind(text)
    found = title_lines(text)
    if kind is None or found is None:
        return None, text
    title, used = found
    # A Markdown heading's marks are not part of its title; a filing is its
    # registrant's.
    title = registrant(text) or re.sub(r"^#{1,6}\s+", "", title).rstrip(" .:;,#")
    body = "\n".join(text.split("\n")[used:])
    return f"{kind[0].upper()}{kind[1:]}: {title}.", body


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
# A figure: an amount, a year, a count ("$1,850", "1954", "23.6").
_FIGURE = re.compile(r"\d[\d,.]*")
# A capitalised word inside a sentence (not its first word): a name.
_INNER_NAME = re.compile(r"(?<=[\w,;)] )[A-Z][\w&.-]*[A-Za-z0-9]")
# Prose has mostly letters; formula debris ("−2 −1.5 −1 −0.5"), rows of
# figures and glyph soup do not.
MIN_PROSE_LETTER_SHARE = 0.75
MIN_PROSE_WORDS = 5
NAME_BONUS = 0.05
MAX_NAME_BONUS = 0.15
FIGURE_BONUS = 0.05
MAX_FIGURE_BONUS = 0.15


def informative_bonus(sentence: str) -> float | None:
    """How much a sentence's names and figures add to its worth in a summary,
    or None when it is not prose (too short, or mostly not letters) and should
    not be quoted in one."""
    visible = [c for c in sentence if not c.isspace()]
    # Chinese and Japanese write words without spaces: each ideograph or kana
    # counts as a word here.
    words = len(sentence.split()) + len(_CJK.findall(sentence))
    if words < MIN_PROSE_WORDS or not visible:
        return None
    letters = [c for c in visible if c.isalpha()]
    if len(letters) / len(visible) < MIN_PROSE_LETTER_SHARE:
        return None
    if not any(c.islower() for c in letters) and any(c.isupper() for c in letters):
        return None  # an all-capitals heading ("REPORT ON THE SURPLUS AUCTION")
    names = len(_INNER_NAME.findall(sentence))
    figures = len(_FIGURE.findall(sentence))
    return min(MAX_NAME_BONUS, NAME_BONUS * names) + min(MAX_FIGURE_BONUS, FIGURE_BONUS * figures)
