"""The cells of a line of a table in extracted text, and the words of its
headings (years, dates, periods, units): what docsum.tableheadings and
docsum.tablerows read a table with.

A row of a table is a line: a label, then its cells, apart by two or more
spaces or a tab (the layout docsum's text and table extraction keeps) or, in
PDF text, by single spaces when every cell is a figure.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# One token of a figure cell: "$", "1,234", "(1,199)", "642.0", "%", "(1.3)%", "—", "—%".
CELL_TOKEN = re.compile(r"\$|%|\)%?|\(?-?\$?\d(?:[\d,]*\d)?(?:\.\d+)?\)?%?|[—–]%?")
DASHES = ("—", "–")
_CELL_SPLIT = re.compile(r"\t|\s{2,}")
YEAR = re.compile(r"^(?:19|20)\d\d$")
# "(In millions)", "(dollars in thousands)", "($ in millions, except per share data)".
UNITS = re.compile(
    r"\(\s*(?:dollars |amounts |(?:us)?[$€£]\s?)?in (?:[$€£]\s?)?(millions|billions|thousands)\b[^)]*(?:\)|$)",
    re.IGNORECASE,
)
# A footnote's mark: "(4)", "(b)".
FOOTNOTE_MARK = r"\((?:\d|[a-z])\)"
# A heading above a year line: "Three Months Ended", "Six Months Ended
# December 31,", "December 31,", "June 30," (a date heading).
GROUP = re.compile(r"(?:months|weeks|quarter|year)s? ended|^[A-Z][a-z]+ \d{1,2},?$", re.IGNORECASE)
ENDED = re.compile(r"(?:months|weeks|quarter|year)s? ended", re.IGNORECASE)
DATE_LINE = re.compile(r"^[A-Z][a-z]+ \d{1,2},?$")
# A date as a column heading writes it: "Jul 1, 2023", "Sept. 24, 2022".
_DATE = r"[A-Z][a-z]{2,8}\.? \d{1,2}, (?:19|20)\d\d"
# A column heading that names a period: "Q2 2023", "YTD 2022", "Jul 1, 2023", "2023".
PERIOD_CELL = re.compile(rf"^(?:(?:Q[1-4]|YTD|FY|H[12]|Fiscal)\s?(?:19|20)\d\d|(?:19|20)\d\d|{_DATE})$")
# Full dates in one cell, as a PDF's text joins them ("Apr 1, 2023 Dec 31, 2022").
FULL_DATE = re.compile(rf"\b{_DATE}\b")
# A period named by its code: "Q3 2023", "YTD 2022", "FY2024".
PERIOD_CODE = re.compile(r"^(?:Q[1-4]|YTD|FY|H[12]|Fiscal)\s?(?:19|20)\d\d$")


@dataclass(frozen=True)
class Row:
    label: str
    values: tuple[str, ...]


@functools.lru_cache(maxsize=1 << 14)
def parse_row(line: str) -> Row | None:
    """A table row: a label and at least one figure cell, or None. Read from
    the end, token by token (a pattern that backtracks over a long line of
    prose cost seconds per document)."""
    tokens = line.split()
    if not tokens or len(tokens) > 60:
        return None
    i = len(tokens)
    while i > 0 and CELL_TOKEN.fullmatch(tokens[i - 1]):
        i -= 1
    label = " ".join(tokens[:i]).rstrip(" :.")
    values: list[str] = []
    for token in tokens[i:]:
        bare = token.rstrip("%")
        token = bare if bare in DASHES else token  # "—%": an empty share
        if values and (token in ("%", ")", ")%") or values[-1] == "$"):
            values[-1] += token  # "$ 607" is one cell, "14.2 %" another
        else:
            values.append(token)
    # "$ —" is a cell too: kept so each value stays under its column, but
    # whether a line is a row is decided without it, as before (summaries
    # read rows through is_row; a line of dashes alone is none).
    cells = [v.lstrip("$") if v.lstrip("$") in DASHES else v for v in values]
    cells = [v for v in cells if any(c.isdigit() for c in v) or v in DASHES]
    values = [v for v in values if any(c.isdigit() for c in v) or v in DASHES]
    if not values or not label or not any(c.isalpha() for c in label) or len(label.split()) > 14:
        return None
    if label[0].isdigit() or label[0] in "$(—–":
        return None
    if len(values) == 1 and values[0].isdigit():
        return None  # one plain number: a page reference ("Item 2 … 31"), a zip code, a count in a heading
    # "in 2022 and 2021" is prose ending in years, not a row of them.
    if all(YEAR.match(v) for v in values) and len(values) <= 2 and label[-1:].islower():
        return None
    return Row(label, tuple(cells))


def cell_token(token: str) -> bool:
    """A token a table's cell is made of: a figure, "$", "%", a dash."""
    return bool(CELL_TOKEN.fullmatch(token))


def is_row(line: str) -> bool:
    return parse_row(line) is not None


# Column dates a PDF's text runs together with single spaces: "July 30,
# July 31,", one a column (a text file writes "July 30,   July 31,").
_DATES_RUN_TOGETHER = re.compile(r"^(?:[A-Z][a-z]+\.? \d{1,2}, ?){2,}$")
_ONE_DATE = re.compile(r"[A-Z][a-z]+\.? \d{1,2},")


def line_cells(line: str) -> list[str]:
    """The cells of a line: apart by a tab or two spaces, or dates one a column."""
    text = line.strip()
    if _DATES_RUN_TOGETHER.match(text):
        return _ONE_DATE.findall(text)
    return [c.strip() for c in _CELL_SPLIT.split(text) if c.strip()]


def is_prose(line: str) -> bool:
    """A line of a sentence, not a heading: it starts in lower case, ends a
    sentence or a lead-in, or runs long."""
    return line[:1].islower() or line.endswith((".", ":")) or len(line.split()) > 12
