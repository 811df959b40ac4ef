"""What each line of a passage is, so the offline engine quotes sentences and
table rows, never page furniture: prose (joined across the line breaks of a
wrapped paragraph, so a sentence is whole), a table row (quoted with its
headings, docsum.tablerows), a heading, or noise: a cover page's and
a form's boilerplate ("20549 FORM 10-Q (Mark One) ☒ …"), a table of
contents line ("Item 1A. Risk Factors 50"), a running header or a page
number. Headings and noise are never answer sentences, and no unit spans
two of them, so nothing is glued from two places of the page.
"""

from __future__ import annotations

import re

from docsum.lazyre import LazyPattern
from docsum.lexical import sentences
from docsum.tablecells import FOOTNOTE_MARK, cell_token, is_row
from docsum.tablerows import row_quote

# Form and cover-page boilerplate: a line holding any of these (in lower
# case) is noise. Plain substrings: a pattern of this many alternatives cost
# a millisecond a line.
_BOILERPLATE = (
    "(mark one)",
    "☒",
    "☐",
    "washington, d.c. 20549",
    "securities and exchange commission",
    "indicate by check mark",
    "commission file number",
    "i.r.s. employer",
    "pursuant to section 13 or 15(d)",
    "accelerated filer",
    "certifying officer",
    "pursuant to the requirements of the securities exchange act",
    "sarbanes-oxley",
    "state or other jurisdiction",
    "trading symbol",
    "emerging growth company",
    "shell company",
    "table of contents",
    "exact name of registrant",
    "principal executive offices",
    "telephone number",
    "securities registered pursuant",
    "filing requirements for the past",
    "submit such files",
    "interactive data file",
    "of incorporation or organization",
    "for the transition period",
)
_CONNECTORS = frozenset({"and", "of", "the", "for", "on", "in", "to", "&"})
MAX_TITLE_WORDS = 14


def _title_and_page(text: str) -> bool:
    """A short title-like line ending in a page number: a contents line or a
    running header ("MD&A 37", "Legal Proceedings 50")."""
    words = text.split()
    if len(words) < 2 or len(words) > MAX_TITLE_WORDS + 1 or not (words[-1].isdigit() and len(words[-1]) <= 3):
        return False
    return all(w in _CONNECTORS or w[:1].isupper() or w[:1] == "&" for w in words[:-1])


# Lines a table sets above its rows: column group headings, a line of years,
# its unit.
_TABLE_HEADING = re.compile(
    r"^(?:(?:three|six|nine|twelve) months ended|(?:fiscal )?(?:year|quarter)s? ended|[A-Z][a-z]+ \d{1,2},?"
    r"|(?:(?:19|20)\d\d\s*)+|\(in (?:millions|billions|thousands)[^)]*\)(?:\s*\(unaudited\))?|\(unaudited\))"
    r"(?:\s+[A-Z][a-z]+ \d{1,2},?)?$",
    re.IGNORECASE,
)
# A table of contents line: an item or part and a page number at its end.
_CONTENTS = LazyPattern(r"^(?:(?:part|item)\s+[\dIVX]+[A-Z]?\.?\b.*|.{3,90}?\.{3,}\s*)\s\d{1,3}$", re.IGNORECASE)
_PAGE_FURNITURE = LazyPattern(
    r"^(?:page\s+)?\d{1,4}$|^(?:part|item)\s+[\dIVX]+[A-Z]?\.?$|^[^\w]*$|\|\s*Q[1-4] \d{4} Form 10-[QK]\s*\|",
    re.IGNORECASE,
)
_SENTENCE_DONE = re.compile(r"[.!?:;][\"'”’)\]]*$")
MAX_HEADING_WORDS = 10
# A heading is short and set apart; a wrapped prose line runs to the margin.
MAX_HEADING_CHARS = 80
MAX_TITLE_CHARS = 110


def is_noise(line: str) -> bool:
    """Boilerplate, a contents line, a page number or header: never quoted."""
    text = " ".join(line.split())
    return bool(
        any(cue in text.lower() for cue in _BOILERPLATE)
        or text.startswith("/s/")
        or _CONTENTS.match(text)
        or _PAGE_FURNITURE.search(text)
        or _title_and_page(text)
        or _TABLE_HEADING.match(text)
    )


def _is_heading(line: str, previous: str, following: str) -> bool:
    """A short line without closing punctuation that starts a block (after a
    blank line, a finished sentence or another heading) and is followed by a
    new one: "Contingencies", "Legal Proceedings"."""
    text = " ".join(line.split())
    if len(text) > MAX_HEADING_CHARS or len(text.split()) > MAX_HEADING_WORDS or _SENTENCE_DONE.search(text):
        return False
    return _starts_block(previous) and _new_block_follows(following)


def _starts_block(previous: str) -> bool:
    """After a blank line, a finished sentence or page furniture."""
    return not previous.strip() or bool(_SENTENCE_DONE.search(previous.strip())) or is_noise(previous)


def _new_block_follows(following: str) -> bool:
    nxt = following.strip()
    return not nxt or nxt[:1].isupper() or nxt[:1].isdigit() or is_row(nxt)


# Words a title leaves in lower case ("Compared with", "Results of Operations").
_TITLE_CONNECTORS = _CONNECTORS | {"a", "an", "at", "by", "from", "or", "with", "vs.", "versus"}
# Words no sentence ends on: a line ending in one goes on in the next
# ("pursuant to a" is no run-in heading), and a unit ending in one was cut
# (docsum.models.answerrank.is_fragment).
OPEN_ENDINGS = _TITLE_CONNECTORS | frozenset("as our its their his her this that which than is are was were".split())


def is_title(text: str) -> bool:
    """Every word capitalised, a number or a connector, and two or more
    capitalised words: "Six Months Ended December 31, 2022 Compared with Six
    Months Ended December 31, 2021", "Note 11 - Derivative Financial
    Instruments" (a dash or a bracket is no word)."""
    words = text.split()
    capitalised = sum(1 for w in words if w[:1].isupper())
    return capitalised >= 2 and all(
        w[:1].isupper() or w[:1].isdigit() or w.lower() in _TITLE_CONNECTORS or not w[:1].isalnum() for w in words
    )


def _is_run_in_heading(line: str, previous: str, following: str) -> bool:
    """A title-cased line inside a PDF's running text, which has no blank line
    to set a heading apart: set between two sentences, or after a line the
    filing left without its full stop ("… pursuant to a Rule 10b5-1 trading
    plan" / "Restricted Stock Unit Share Withholding" / "We also withhold …").
    Longer than a heading ever is on its own, a title can be: MD&A heads each
    comparison with its two periods. Glued into the sentence below, it read as
    "… December 31, 2021 Research and development expenses increased …"."""
    text = " ".join(line.split())
    words = text.split()
    if len(words) > MAX_TITLE_WORDS or len(text) > MAX_TITLE_CHARS or _SENTENCE_DONE.search(text):
        return False
    if not is_title(text) or not _new_block_follows(following):
        return False
    if _starts_block(previous):
        return True
    before = previous.split()
    # Without a finished sentence above, only a title of three words or more
    # that the line above cannot run into.
    return len(words) >= 3 and bool(before) and before[-1].lower() not in OPEN_ENDINGS


def _figures_only(line: str) -> bool:
    tokens = line.split()
    return len(tokens) >= 2 and all(cell_token(t) for t in tokens)


def _heading_under_row(line: str, previous: str, following: str) -> bool:
    return is_row(previous.strip()) and _is_heading(line, "", following)


_FOOTNOTE_MARK = re.compile(rf"^{FOOTNOTE_MARK}\s+(?=[A-Z])")
# A list item's marker: "•   Acme Cloud revenue increased 24% to $25.7
# billion." (a filing's text, the marker set off by spaces as a cell is) or
# "• Acme Devices revenue increased 17%." (its PDF), or Markdown's "- " and "* "
# before a word.
_BULLET = re.compile(r"^(?:[•▪■●◦‣∙]|[-*](?=\s+[^\W\d]))\s+")


# A line that ends in a word's hyphen: the word goes on at the next line's start.
_HYPHEN_END = re.compile(r"[^\W_][-–]$")


def _joined(lines: list[str]) -> str:
    """A paragraph's lines as one text; a compound broken at its hyphen
    ("write-" / "off", "Form 10-" / "K", "term debt–" / "related") is
    joined whole, not quoted as "write- off"."""
    out = lines[0] if lines else ""
    for line in lines[1:]:
        out = f"{out}{line}" if _HYPHEN_END.search(out) else f"{out} {line}"
    return out


def answer_units(text: str, rows: bool = True) -> list[str]:
    """The quotable units of a passage in order: whole sentences of its prose
    and (with `rows`) its table rows as quotes; headings and noise left out."""
    lines = text.split("\n")
    units: list[str] = []
    paragraph: list[str] = []

    def close() -> None:
        units.extend(_paragraph_sentences(paragraph, rows))
        paragraph.clear()

    under_heading = False
    for i, raw in enumerate(lines):
        line = raw.strip()
        # A line under a heading starts a block, as one under a blank line
        # does: "Note 7 : Investments" / "Short-term Investments" / "Short-term
        # investments include …" read as "Short-term Investments Short-term
        # investments include …". (Answers only: summaries keep the rule they
        # were built with.)
        previous = "" if under_heading else lines[i - 1] if i else ""
        under_heading = False
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if not line:
            close()
            continue
        bullet = _BULLET.match(line) if rows else None
        if bullet:
            # A list item is a unit of its own, without its marker: glued to
            # the lead-in above, "… included: • Acme Cloud revenue
            # increased 24% …" read as one sentence, and a text file's
            # "•   Acme Cloud …" was dropped as a line of cells.
            close()
            line = line[bullet.end() :]
        if is_noise(line):
            close()
            continue
        quote = row_quote(lines, i)
        if quote is not None or is_row(line):
            close()
            if rows and quote is not None:
                units.append(quote)
            continue
        if not paragraph and not bullet and _is_heading(line, previous, following):
            under_heading = rows
            continue
        if _is_no_prose(line, previous, following, rows):
            close()
            continue
        paragraph.append(line)
    close()
    return units


def _paragraph_sentences(paragraph: list[str], rows: bool) -> list[str]:
    """A paragraph's lines as whole sentences."""
    if not paragraph:
        return []
    found: list[str] = []
    for sentence in sentences(_joined(paragraph) if rows else " ".join(paragraph), initialisms=rows):
        if found and sentence[:1].islower():
            found[-1] = f"{found[-1]} {sentence}"  # split after an abbreviation ("non-U.S. subsidiaries")
        else:
            found.append(sentence)
    if rows:  # a footnote's mark opens no answer ("(1) On April 28, 2022, the Board …")
        found = [_FOOTNOTE_MARK.sub("", f) for f in found]
    return found


def _is_no_prose(line: str, previous: str, following: str, rows: bool) -> bool:
    """A line that ends the paragraph above and joins none."""
    # A run-in heading, or one right under a table's last row ("Total $
    # 14,726" / "Contingencies" / "The Company is subject to …"), or a
    # row of figures alone ("2026 6,554": a maturity table in PDF text,
    # which had read "… as follows (in millions): 2026 6,554 2027 348").
    # Summaries keep these in their prose: their words find the
    # document (SEC recall@3 0.765 -> 0.712 without the headings).
    if rows and (
        _is_run_in_heading(line, previous, following)
        or _heading_under_row(line, previous, following)
        or _figures_only(line)
    ):
        return True
    if line.endswith(":") and len(line.split()) <= MAX_HEADING_WORDS and is_row(following):
        return True  # a group of rows' heading ("Cost of revenue:")
    # A line of cells without figures (column headings) is no sentence.
    # For answers a line of two cells is one too ("Total Number of
    # Approximate Dollar" ran into the sentence above); summaries keep
    # the rule they were built with, so stores need no re-summarizing.
    return len(re.split(r"\t|\s{3,}", line)) > (1 if rows else 2)
