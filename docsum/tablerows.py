"""Table rows as readable quotes: "Research and development: $6,844 million,
three months ended December 31, 2022; $5,758 million, 2021".

A row of a table in extracted text is a line: a label, then its cells, apart
by two or more spaces or a tab (the layout docsum's text and table
extraction keeps) or, in PDF text, by single spaces when every cell is a
figure. Read as prose such a line means nothing ("Research and development
6,844 5,758 13,472 11,357"); what makes it readable is above it, in the
document's own words: the table's column headings (a line of cells, "(In
Millions)   Q3 2022   Q3 2021", or a line of years under headings such as
"Three Months Ended" / "December 31,") and its unit ("(In millions)").

Only the first group of columns is quoted when a table has several (the
quarter before the year to date): an answer is a few facts, not a table.
"""

from __future__ import annotations

import re

from docsum.lexical import MONTH_ABBREVIATIONS, MONTHS
from docsum.tablecells import (
    CELL_TOKEN,
    DASHES,
    DATE_LINE,
    ENDED,
    FOOTNOTE_MARK,
    GROUP,
    PERIOD_CODE,
    UNITS,
    YEAR,
    Row,
    is_prose,
    line_cells,
    parse_row,
)
from docsum.tableheadings import MAX_HEADING_DISTANCE, SKIPPED, column_headings

# A footnote mark in a cell of its own after the label: "Total net sales (4)   $ 82,959".
_FOOTNOTE = re.compile(r"^\(\d\)$")
# Footnote marks closing a label: "Total net sales (4)", "Other liabilities (b)".
_LABEL_FOOTNOTES = re.compile(rf"(?:\s*{FOOTNOTE_MARK})+$")
# A label cut before a year of its own text: it ends in a month and day or
# a word that cannot end one ("and", "of", "through").
_LABEL_GOES_ON = re.compile(r"(?:\b[A-Z][a-z]+ \d{1,2},|\b(?:and|or|of|to|through|from|the|in|for|as of))\s*$")


def _first_group(values: list[str], headings: list[str]) -> tuple[list[str], list[str]]:
    """Only the first group of columns ("three months ended …") when the
    headings say where the next group starts."""
    if all("," in h for h in headings):
        # Every column is dated ("July 1, 2023"): a group starts where its ("nine months ended …").
        # heading says so ("nine months ended …") or its first date comes again.
        starts = [i for i, h in enumerate(headings) if i > 0 and (ENDED.search(h) or h == headings[0])]
        if starts:
            return values[: starts[0]], headings[: starts[0]]
        return values, headings
    if ENDED.search(headings[0]):
        # "three months ended Q2 2023", "Q2 2022", "six months ended YTD 2023", …
        starts = [i for i, h in enumerate(headings) if i > 0 and ENDED.search(h)]
        if starts:
            return values[: starts[0]], headings[: starts[0]]
    if all(PERIOD_CODE.match(h) for h in headings):
        # "Q3 2023   Q3 2022   YTD 2023   YTD 2022": a group starts where the kind
        # of period does ("Q3 2023   Q2 2023   Q3 2022" is one group).
        kinds = [h.rstrip("0123456789 ") for h in headings]  # "Q", "YTD", "FY"
        starts = [i for i, kind in enumerate(kinds) if kind != kinds[0]]
        if starts:
            return values[: starts[0]], headings[: starts[0]]
    starts = [i for i, h in enumerate(headings) if "," in h and i > 0]
    if starts and "," in headings[0]:
        return values[: starts[0]], headings[: starts[0]]
    return values, headings


_PERCENT_GROUP = re.compile(r"\bpercent(?:age)?\b|%", re.IGNORECASE)


def _in_percent_table(lines: list[str], at: int, values: list[str]) -> bool:
    """The row's bare figures (none over 100) sit in a table whose first row
    writes "%" after each figure ("Revenue   100.0 %   100.0 % …", the items
    of an income statement "expressed as a percentage of revenue"): they are
    percentages too."""
    figures = [v.strip("$()") for v in values if v not in DASHES]
    if not figures or any(v.endswith("%") or "$" in v for v in values):
        return False  # a share already marked, or an amount ("$ 1.26" a share)
    try:
        if any(float(f.replace(",", "")) > 100 for f in figures):
            return False
    except ValueError:
        return False
    top: Row | None = None
    for back in range(at - 1, max(-1, at - MAX_HEADING_DISTANCE), -1):
        row = parse_row(lines[back])
        if row is not None:
            top = row
            continue
        line = " ".join(lines[back].split())
        if line and len(line_cells(lines[back])) == 1 and not is_prose(line) and not YEAR.match(line):
            continue  # a group's heading between rows ("Operating expenses")
        break
    return top is not None and all(v.endswith("%") for v in top.values)


def _with_unit(value: str, unit: str) -> str:
    if not unit or value.endswith("%") or not any(c.isdigit() for c in value):
        return value
    if unit == "%":
        return f"{value}%"
    plain = value.strip("$() ").replace(",", "")
    if "." in plain and len(plain.split(".")[0]) <= 2:
        return value  # a per-share amount, not millions
    return f"{value} {unit}"


def _label_and_values(line: str, row: Row) -> tuple[str, list[str]]:
    """The row's label and figures, with the figures of its label's cells
    given back to the label when cells are spaced apart: "Commercial paper
    Level 2   $ 2,500 …" is labelled "Commercial paper Level 2", "Outstanding
    as of December 31, 2021   279.9" is "Outstanding as of December 31, 2021"."""
    cells = line_cells(line)
    for k in range(1, len(cells)):
        if all(CELL_TOKEN.fullmatch(t) for c in cells[k:] for t in c.split()):
            tail = parse_row(" ".join(["x", *cells[k:]]))
            if tail is not None and len(tail.values) < len(row.values):
                label = " ".join(" ".join(cells[:k]).split()).rstrip(" :.")
                return label, list(tail.values)
            break
    return row.label, list(row.values)


# A line heading a group of a table's rows: a few words, one cell, no
# figure ("Revenue", "North America", "International", "Cost of revenue:").
MAX_GROUP_WORDS = 6
# "Reported as", "Research and": a phrase cut before its end heads nothing.
_ENDS_MIDWAY = re.compile(r"\b(?:and|or|of|as|the|for|in|to|by|with|from|at|on)$", re.IGNORECASE)
_NOT_A_GROUP = re.compile(r"^(?:part|item|note|table of contents|page)\b|\d", re.IGNORECASE)


def _group_above(lines: list[str], at: int) -> str:
    """The heading of the group of rows `lines[at]` is in, when one sits
    above them with nothing but rows and blank lines between: "Revenue" and
    "Operating Income" over the same three segments, "North America" and
    "International" over "Net sales". "" when there is none (the rows run up to their
    column headings or to a sentence)."""
    below: Row | None = None
    for back in range(at - 1, max(-1, at - MAX_HEADING_DISTANCE), -1):
        line = " ".join(lines[back].split())
        if not line:
            continue
        row = parse_row(lines[back])
        if row is not None:
            if all(YEAR.match(v) for v in row.values):
                return ""  # the column headings: the rows have no group heading
            if row.label.lower().startswith("total"):
                return ""  # a group above ends at its total ("Cost of revenue:" … "Total cost of revenue")
            below = row
            continue
        if below is not None and below.label[:1].islower():
            return ""  # the first line of a label wrapped over two ("Research and / development expenses")
        name = line.rstrip(":")
        if (
            len(line_cells(lines[back])) == 1
            and len(name.split()) <= MAX_GROUP_WORDS
            and name[:1].isupper()
            and not name.endswith((".", ","))
            and not _NOT_A_GROUP.search(name)
            and not UNITS.search(name)
            and not GROUP.search(name)
            and not _ENDS_MIDWAY.search(name)
        ):
            return name
        return ""
    return ""


def _share_of(lines: list[str], at: int) -> str:
    """For a "% of net revenue" row, the label of the row above it, whose
    share it gives; "" when the line above is no row."""
    if at == 0 or (above := parse_row(lines[at - 1])) is None:
        return ""
    label, _ = _label_and_values(lines[at - 1], above)
    return _wrapped(lines, at - 1, label)


def _wrapped(lines: list[str], at: int, label: str) -> str:
    """A label that starts in lower case with its first line put back
    ("Research and" above "development expenses   $ 1,945 …")."""
    if not label[:1].islower() or at == 0:
        return label
    above = " ".join(lines[at - 1].split())
    if above and parse_row(lines[at - 1]) is None and len(line_cells(lines[at - 1])) == 1 and not is_prose(above):
        return f"{above} {label}"
    return label


# A row quoted without its headings names at most this many figures: past
# it, a reader cannot tell which is which.
MAX_BARE_FIGURES = 1


def _named_twice(values: list[str], headings: list[str]) -> bool:
    """One column's name (not a period: groups repeat their years) over two
    different figures: "$10,666 million, Total Estimated Fair Value; …;
    $10,968 million, Total Estimated Fair Value"."""
    seen: dict[str, str] = {}
    for value, heading in zip(values, headings):
        if heading and not any(c.isdigit() for c in heading) and seen.setdefault(heading, value) != value:
            return True
    return False


def row_quote(lines: list[str], at: int) -> str | None:
    """The row at `lines[at]` as a sentence with its headings and unit, or
    None when the line is no table row."""
    labelled = _row_label(lines, at)
    if labelled is None:
        return None
    label, values = labelled
    headings, unit = column_headings(lines, at, len(values))
    values, headings = _placed_columns(values, headings)
    group = _share_of(lines, at) if label.startswith("%") else _group_above(lines, at)
    if group and group.lower() not in label.lower():
        label = f"{label} ({group})"
    if group and _PERCENT_GROUP.search(group) or _in_percent_table(lines, at, values):
        # Under "Percent of Net Sales:" or "Year-over-year Percentage Growth:",
        # or in a table of shares of revenue, only the first row writes its
        # "%": "12.7" is 12.7 %, not $12.7 million.
        unit = "%"
    if _named_twice(values, headings):
        headings = []  # the columns were misread
    if headings:
        values, headings = _first_group(values, headings)
    if all(v in DASHES for v in values):
        # "Preferred stock …: —, December 31, 2022; —, March 31, 2023": no figure to quote.
        return None
    if headings:
        parts = [f"{_with_unit(v, unit)}, {_lower_first(h)}" for v, h in zip(values, headings)]
    else:
        # Without headings an empty cell ("—") says nothing a reader can place.
        parts = [_with_unit(v, unit) for v in values if v not in DASHES]
        if len(parts) > MAX_BARE_FIGURES:
            # "Operating income: 3,317 million; (165) million; 3,152 million; …"
            # twelve times over: which figure is which period, no reader can tell.
            return None
    return f"{label}: {'; '.join(parts)}."


def _row_label(lines: list[str], at: int) -> tuple[str, list[str]] | None:
    """The row's label (wrapped lines joined, footnote marks gone) and its
    figures, or None when the line is a heading, a fragment or a contents line."""
    row = parse_row(lines[at])
    if row is None or all(YEAR.match(v) for v in row.values) and ENDED.search(row.label):
        # A heading ("Three Months Ended September 30,   2023   2022") is
        # read as a row (summaries leave it out so) but quoted as none.
        return None
    label, values = _label_and_values(lines[at], row)
    # A footnote mark ("Total net sales (4)", "Other liabilities (b)") is no part of it.
    label = _LABEL_FOOTNOTES.sub("", _wrapped(lines, at, label))
    if re.match(r"[a-z]+\b", label):
        return None  # "from Q2 2022 $0.15 or 54% from Q2", "to Acme": a fragment, no row's label
    if label.count("(") > label.count(")") and values[0].endswith(")") and "(" not in values[0]:
        return None  # "Contingencies (Note 13)": the figure closes the label
    while values and YEAR.match(values[0]) and _LABEL_GOES_ON.search(label):
        # "Outstanding as of December 31,   2021   279.9": the year ends the
        # label ("… September 30, 2022 and 2021   3" ends a contents line's).
        label = f"{label} {values.pop(0)}"
    if not values or len(values) == 1 and re.fullmatch(r"\d{1,3}", values[0]):
        return None  # a title and its page number: a table of contents line
    while len(values) > 1 and _FOOTNOTE.match(values[0]):
        values = values[1:]  # "Total net sales (4)   $ 82,959 …": the label's footnote, no figure
    return label, values


def _placed_columns(values: list[str], headings: list[str]) -> tuple[list[str], list[str]]:
    """A row's figures and their headings, without the columns that hold no
    period's figure."""
    if SKIPPED in headings and any(
        h == SKIPPED and not (v.endswith("%") or v in DASHES) for v, h in zip(values, headings)
    ):
        # Only a share of each period's figure ("% of Net Revenue") is left
        # out; columns of their own ("Level 1   Level 2   Total") under a
        # period cannot be told apart by the period alone.
        headings = []
    if SKIPPED in headings:
        kept = [i for i, h in enumerate(headings) if h != SKIPPED]
        values, headings = [values[i] for i in kept], [headings[i] for i in kept]
    if "" in headings:
        # The columns after a group's years ("% Change") end its first group.
        end = headings.index("")
        values, headings = values[:end], headings[:end]
    return values, headings


# Months, spelt out and abbreviated ("Sep 30, 2023" in one company's tables).
_MONTHS = frozenset(month.lower() for month in MONTHS + MONTH_ABBREVIATIONS)


def _lower_first(heading: str) -> str:
    """ "Three Months Ended December 31, 2022" reads "three months ended
    December 31, 2022" mid-sentence; a period code ("Q3 2022") keeps its capitals."""
    if not GROUP.search(heading) or DATE_LINE.match(heading.split(",")[0] + ","):
        return heading
    return " ".join(w if w.lower().strip(",") in _MONTHS or not w.isalpha() else w.lower() for w in heading.split(" "))
