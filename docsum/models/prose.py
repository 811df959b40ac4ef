"""What makes an offline summary read as prose: an opening sentence that
names the document (its whole title) and says what kind of document it is,
and a measure of how informative a sentence is (names and figures) so the
summary quotes sentences a person would keep rather than headings, formula
debris or word lists.
"""

from __future__ import annotations

import re
from collections import Counter

from docsum.lazyre import LazyPattern
from docsum.lexical import CJK_CHARACTER, FIRST_CJK_CHARACTER, MONTH_PATTERN, registrant, title_lines

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
_OPENING = LazyPattern(
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
    title = registrant(text) or re.sub(r"^#{1,6}\s+", "", title)
    title = title.rstrip(" :;,#")
    if title.isupper():  # a cover's capitals: "ACME CORPORATION" reads "Acme Corporation"
        title = " ".join(w[:1] + w[1:].lower() for w in title.split(" "))
    body = "\n".join(text.split("\n")[used:])
    period = covered_period(text) or (None if re.search(r"\b(?:1[5-9]|20)\d\d\b", title) else head_date(text))
    if period:
        title = f"{title}, {period}"
    # "Acme Inc." ends the sentence once, not twice.
    end = "" if title.endswith(".") else "."
    return f"{kind[0].upper()}{kind[1:]}: {title}{end}", body


# The period a report covers, as its cover says: "For the quarterly period
# ended December 31, 2022", "for the fiscal year ended June 30, 2023".
_PERIOD = LazyPattern(
    r"\bfor the (quarterly period|fiscal quarter|quarter|fiscal year|year|period)\s+ended\s+"
    rf"((?:{MONTH_PATTERN})\s+\d{{1,2}},?\s+\d{{4}})",
    re.IGNORECASE,
)


_MONTH = MONTH_PATTERN
_DATE = LazyPattern(
    rf"\b(\d{{1,2}}(?:[-–]\d{{1,2}})?\s+(?:{_MONTH})\s+\d{{4}}|(?:{_MONTH})\s+\d{{1,2}},\s+\d{{4}})\b", re.IGNORECASE
)
# A date this near the top is the document's own (when minutes were held, a
# report's event), not one it mentions.
HEAD_DATE_CHARS = 400


def head_date(text: str) -> str | None:
    """The first date in the head of `text` ("2 October 2019"), months in
    their usual capitals, else None."""
    found = _DATE.search(text[:HEAD_DATE_CHARS])
    if found is None:
        return None
    return " ".join(w.capitalize() if w.isalpha() else w for w in found.group(1).split())


def covered_period(text: str) -> str | None:
    """ "for the quarter ended December 31, 2022" when the head of `text`
    names the period it covers, else None."""
    found = _PERIOD.search(text[: KIND_CUE_CHARS * 4])
    if found is None:
        return None
    what = found.group(1).lower()
    what = "quarter" if "quarter" in what else "year" if "year" in what else "period"
    return f"for the {what} ended {' '.join(found.group(2).split())}"


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
    words = len(sentence.split())
    if max(sentence, default="") >= FIRST_CJK_CHARACTER:
        words += len(CJK_CHARACTER.findall(sentence))
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


# Figures and tables in extracted PDF text: a caption ("Figure 7. Control
# flow graph …", "Table 2: Articles and …") and, above it, the figure's labels
# or the table's cells, one short line each ("i2", "Source articles 28,009").
# Read as sentences they run into the prose around them and pass for
# informative ("i2 i3 i4 … Figure 7."), so summaries leave them out.
_CAPTION = LazyPattern(
    r"^\s*(?:figure|fig\.|table|tab\.|chart|exhibit|abbildung|abb\.|tabelle|figura|tabla|tableau)\s*[\dIVX]+[a-z]?\s*[.:|—–-]",
    re.IGNORECASE,
)
# A caption runs to the end of its sentence, a few lines at most.
MAX_CAPTION_LINES = 6
# A line of a figure or table: a few words at most, or mostly figures.
MAX_LABEL_WORDS = 6
MIN_ROW_FIGURE_SHARE = 0.4
# Label lines in a run this long are a figure or table even without a caption.
MIN_LABEL_RUN = 3
MAX_RUN_LABEL_WORDS = 3
MAX_RUNNING_WORDS = 12
MIN_RUNNING_REPEATS = 3
_DIGITS = re.compile(r"\d+")
_SENTENCE_DONE = re.compile(r"[.!?]['\")\]]?\s*$")
_NUMBERED_HEADING = re.compile(r"^\s*\d+(?:\.\d+)*\.?\s+\S")
# A bibliography entry: no summary quotes one.
_REFERENCE = LazyPattern(r"\bIn Proceedings of\b|\bpp?\.\s*\d+\s*[–-]\s*\d+|\bpages\s+\d+\s*[–-]\s*\d+", re.IGNORECASE)
_REFERENCES_HEADING = LazyPattern(
    r"^\s*(?:\d+\.?\s*)?(?:references|bibliography|literatur(?:verzeichnis)?|works cited)\s*$", re.IGNORECASE
)


def _is_label_line(line: str, most_words: int = MAX_LABEL_WORDS) -> bool:
    """A line that reads as a figure's label or a table's row, not prose."""
    words = line.split()
    if not words or _SENTENCE_DONE.search(line) and len(words) > 2:
        return False
    figures = sum(1 for w in words if any(c.isdigit() for c in w))
    return len(words) <= most_words or (figures >= 2 and figures / len(words) >= MIN_ROW_FIGURE_SHARE)


def without_figures_and_tables(text: str) -> str:
    """`text` without its figure and table runs, captions, running headers,
    numbered section headings and bibliography, for summary sentence
    selection: each caption to the end of its sentence with the label lines
    just above and below it, any run of MIN_LABEL_RUN very short or
    figure-heavy lines, a short line repeated on MIN_RUNNING_REPEATS pages,
    and everything after a "References" heading. Prose lines are kept as they were, so a sentence
    a table interrupted joins up again."""
    lines = text.split("\n")
    # A running header or footer: the same short line on page after page
    # (page numbers aside).
    seen = Counter(
        _DIGITS.sub("#", " ".join(line.split())) for line in lines if 0 < len(line.split()) <= MAX_RUNNING_WORDS
    )
    drop = [seen.get(_DIGITS.sub("#", " ".join(line.split())), 0) >= MIN_RUNNING_REPEATS for line in lines]
    for i, line in enumerate(lines):
        if _REFERENCES_HEADING.match(line):
            drop[i:] = [True] * (len(lines) - i)
            break
        if _NUMBERED_HEADING.match(line) and len(line.split()) <= MAX_LABEL_WORDS and not _SENTENCE_DONE.search(line):
            drop[i] = True
        if _CAPTION.match(line):
            start, end = _caption_span(lines, i)
            drop[start : end + 1] = [True] * (end + 1 - start)
    for j in _label_runs(lines):
        drop[j] = True
    return "\n".join(line for line, dropped in zip(lines, drop) if not dropped)


def _caption_span(lines: list[str], at: int) -> tuple[int, int]:
    """The first and last line of the caption at `lines[at]`: to the end of
    its sentence, with the figure's labels above it and a table's rows above
    or below it."""
    end = at
    while end < min(len(lines), at + MAX_CAPTION_LINES) - 1 and not _SENTENCE_DONE.search(lines[end]):
        end += 1
    start = at
    while start > 0 and lines[start - 1].strip() and _is_label_line(lines[start - 1]):
        start -= 1
    while end + 1 < len(lines) and lines[end + 1].strip() and _is_label_line(lines[end + 1]):
        end += 1
    return start, end


def _label_runs(lines: list[str]) -> list[int]:
    """The lines in runs of MIN_LABEL_RUN or more very short or figure-heavy
    lines: a figure's labels or a table's cells."""
    found: list[int] = []
    run: list[int] = []
    for i, line in enumerate(lines + [""]):
        if i < len(lines) and line.strip() and _is_label_line(line, MAX_RUN_LABEL_WORDS):
            run.append(i)
            continue
        if len(run) >= MIN_LABEL_RUN:
            found.extend(run)
        run = []
    return found


def is_reference(sentence: str) -> bool:
    """A bibliography entry ("In Proceedings of …, pages 146–160.")."""
    return bool(_REFERENCE.search(sentence))
