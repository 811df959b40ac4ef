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

import functools
import re
from dataclasses import dataclass

from docsum.lexical import MONTH_ABBREVIATIONS, MONTHS

# One token of a figure cell: "$", "1,234", "(1,199)", "642.0", "%", "(1.3)%", "—", "—%".
_CELL_TOKEN = re.compile(r"\$|%|\)%?|\(?-?\$?\d(?:[\d,]*\d)?(?:\.\d+)?\)?%?|[—–]%?")
_DASHES = ("—", "–")
_CELL_SPLIT = re.compile(r"\t|\s{2,}")
_YEAR = re.compile(r"^(?:19|20)\d\d$")
# "(In millions)", "(dollars in thousands)", "($ in millions, except per share data)".
_UNITS = re.compile(
    r"\(\s*(?:dollars |amounts |(?:us)?[$€£]\s?)?in (?:[$€£]\s?)?(millions|billions|thousands)\b[^)]*(?:\)|$)",
    re.IGNORECASE,
)
_FOOTNOTE = re.compile(r"^\(\d\)$")
# A footnote's mark: "(4)", "(b)".
FOOTNOTE_MARK = r"\((?:\d|[a-z])\)"
# Footnote marks closing a label: "Total net sales (4)", "Other liabilities (b)".
_LABEL_FOOTNOTES = re.compile(rf"(?:\s*{FOOTNOTE_MARK})+$")
_CHANGE = re.compile(r"^(?:%\s*)?change$", re.IGNORECASE)
_CHANGE_WORD = re.compile(r"\bchange\b", re.IGNORECASE)
# A heading above a year line: "Three Months Ended", "Six Months Ended
# December 31,", "December 31,", "June 30," (a date heading).
_GROUP = re.compile(r"(?:months|weeks|quarter|year)s? ended|^[A-Z][a-z]+ \d{1,2},?$", re.IGNORECASE)
_ENDED = re.compile(r"(?:months|weeks|quarter|year)s? ended", re.IGNORECASE)
_DATE_LINE = re.compile(r"^[A-Z][a-z]+ \d{1,2},?$")
# A label cut before a year of its own text: it ends in a month and day or
# a word that cannot end one ("and", "of", "through").
_LABEL_GOES_ON = re.compile(r"(?:\b[A-Z][a-z]+ \d{1,2},|\b(?:and|or|of|to|through|from|the|in|for|as of))\s*$")
# Columns after the dated ones that a quote leaves out ("% Change").
MAX_UNDATED_COLUMNS = 2
# How far above a row its headings may be: a table's rows and headings.
MAX_HEADING_DISTANCE = 40


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
    while i > 0 and _CELL_TOKEN.fullmatch(tokens[i - 1]):
        i -= 1
    label = " ".join(tokens[:i]).rstrip(" :.")
    values: list[str] = []
    for token in tokens[i:]:
        bare = token.rstrip("%")
        token = bare if bare in _DASHES else token  # "—%": an empty share
        if values and (token in ("%", ")", ")%") or values[-1] == "$"):
            values[-1] += token  # "$ 607" is one cell, "14.2 %" another
        else:
            values.append(token)
    # "$ —" is a cell too: kept so each value stays under its column, but
    # whether a line is a row is decided without it, as before (summaries
    # read rows through is_row; a line of dashes alone is none).
    cells = [v.lstrip("$") if v.lstrip("$") in _DASHES else v for v in values]
    cells = [v for v in cells if any(c.isdigit() for c in v) or v in _DASHES]
    values = [v for v in values if any(c.isdigit() for c in v) or v in _DASHES]
    if not values or not label or not any(c.isalpha() for c in label) or len(label.split()) > 14:
        return None
    if label[0].isdigit() or label[0] in "$(—–":
        return None
    if len(values) == 1 and values[0].isdigit():
        return None  # one plain number: a page reference ("Item 2 … 31"), a zip code, a count in a heading
    # "in 2022 and 2021" is prose ending in years, not a row of them.
    if all(_YEAR.match(v) for v in values) and len(values) <= 2 and label[-1:].islower():
        return None
    return Row(label, tuple(cells))


def cell_token(token: str) -> bool:
    """A token a table's cell is made of: a figure, "$", "%", a dash."""
    return bool(_CELL_TOKEN.fullmatch(token))


def is_row(line: str) -> bool:
    return parse_row(line) is not None


def _cells(line: str) -> list[str]:
    return [c.strip() for c in _CELL_SPLIT.split(line.strip()) if c.strip()]


def _column_headings(lines: list[str], at: int, count: int) -> tuple[list[str], str]:
    """Headings for `count` value columns of the row at `lines[at]`, read
    upward, and the table's unit ("million"), both possibly empty."""
    unit = ""
    headings: list[str] = []
    for back in range(at - 1, max(-1, at - MAX_HEADING_DISTANCE), -1):
        line = lines[back].strip()
        if not line:
            if headings:
                return headings[-count:] if len(headings) >= count else [], unit or _unit_above(lines, back)
            continue
        units = _UNITS.search(line)
        if units and not unit:
            unit = units.group(1).lower().rstrip("s")
        if headings:
            continue
        cells = _cells(line)
        years = line.split()
        if len(years) >= count and all(_YEAR.match(y) for y in years):
            headings = _with_groups(lines, back, years)
            continue
        changes = _years_and_changes(lines, back, cells, count)
        if changes:
            return changes, unit or _unit_above(lines, back)
        dated = _dated_heading(line, count)
        if dated:
            return dated, unit or _unit_above(lines, back)
        extra = count - len(years)
        if 2 <= len(years) and 0 < extra <= MAX_UNDATED_COLUMNS and len(years) % extra == 0:
            if all(_YEAR.match(y) for y in years):
                # One undated column ("% Change") after each group of years:
                # marked "" so the quote leaves it out.
                per, heads = len(years) // extra, _with_groups(lines, back, years)
                marked = [h for g in range(extra) for h in [*heads[g * per : (g + 1) * per], ""]]
                return marked, unit or _unit_above(lines, back)
        if not _heading_cells(cells):
            continue
        if _UNITS.search(cells[0]) and len(cells) > 1:
            dates = _FULL_DATE.findall(" ".join(cells[1:]))
            if len(dates) == count and len(dates) > len(cells) - 1:
                # "(In Millions; Unaudited)   Apr 1, 2023 Dec 31, 2022": the
                # unit's caption, then dates the text joined into one cell.
                return dates, unit or _unit_above(lines, back)
        if _UNITS.search(cells[0]) and len(cells) > count + 1:
            if all(_PERIOD_CELL.match(c) for c in cells[-count:]) and len(set(cells[-count:])) == count:
                headings = cells[-count:]  # figures under the periods, after a column of words
                continue
            # More headings than figures: the row leaves cells blank, and
            # which figure is under which heading cannot be told.
            return [], unit or _unit_above(lines, back)
        if (
            len(cells) == count + 1
            and (_UNITS.search(cells[0]) or not is_row(line))
            or (len(cells) == count and not is_row(line) and count > 1)
        ):
            headings = _periods_above(lines, back, count) or _dated_then_undated(cells[-count:])
            headings = headings or _stacked(lines, back, cells[-count:])
            if not headings:
                return [], unit or _unit_above(lines, back)
    return headings[-count:] if len(headings) >= count else [], unit


def _dated_then_undated(cells: list[str]) -> list[str]:
    """Dated columns, then others ("July 30, 2023   April 30, 2023   Change
    Change"): the dates, and "" for the others (left out of the quote, as
    a "% Change" column is); else []."""
    dated = 0
    while dated < len(cells) and _PERIOD_CELL.match(cells[dated]):
        dated += 1
    if not 0 < dated < len(cells) or not all(_CHANGE_WORD.search(c) for c in cells[dated:]):
        return []
    return [*cells[:dated], *[""] * (len(cells) - dated)]


def _stacked(lines: list[str], at: int, cells: list[str]) -> list[str]:
    """Column headings written over several lines ("Total" / "Estimated" /
    "Fair Value"), joined column by column up to a line that is no part of
    them (a blank, a title, the periods the columns fall under). [] when a
    line of them has a different number of cells: which words head which
    column cannot be told ("Common Stock   Additional   …" over "Shares
    Amount   Capital …"), and fragments ("Capital") would mislead."""
    headings = list(cells)
    if any(_PERIOD_CELL.match(c) for c in cells):
        return headings  # years or dates ("2024   2025   Thereafter   Total"): what is above groups them
    for back in range(at - 1, max(-1, at - 6), -1):
        line = lines[back].strip()
        above = _cells(line)
        if above and _UNITS.search(above[0]):
            above = above[1:]
        if not above or len(above) == 1 or _prose(line) or is_row(line) or not _heading_cells(above):
            break
        if all(_PERIOD_CELL.match(c) or _GROUP.search(c) for c in above):
            break  # the periods over the columns, not part of their names
        if len(above) < len(headings) and len(headings) % len(above) == 0:
            break  # headings over groups of columns ("Fair Value Measured and   Fair Value Measured and")
        if len(above) != len(headings):
            return []
        headings = [f"{a} {h}" for a, h in zip(above, headings)]
    return headings


# A date as a column heading writes it: "Jul 1, 2023", "Sept. 24, 2022".
_DATE = r"[A-Z][a-z]{2,8}\.? \d{1,2}, (?:19|20)\d\d"
# A column heading that names a period: "Q2 2023", "YTD 2022", "Jul 1, 2023", "2023".
_PERIOD_CELL = re.compile(rf"^(?:(?:Q[1-4]|YTD|FY|H[12]|Fiscal)\s?(?:19|20)\d\d|(?:19|20)\d\d|{_DATE})$")
# Full dates in one cell, as a PDF's text joins them ("Apr 1, 2023 Dec 31, 2022").
_FULL_DATE = re.compile(rf"\b{_DATE}\b")
_PERIOD_CODE = re.compile(r"^(?:Q[1-4]|YTD|FY|H[12]|Fiscal)\s?(?:19|20)\d\d$")
# A column a quote leaves out: the second column of a period ("% of Net Revenue" beside "Amount").
SKIPPED = "\x00"


def _periods_above(lines: list[str], at: int, count: int) -> list[str]:
    """When the heading line at `at` names no period ("Amount   Revenue   …"),
    periods a few lines above that span its columns ("Q2 2023   Q2 2022 …",
    under "Three Months Ended   Six Months Ended"): each period heads the
    first of its columns, the others are SKIPPED. [] when there are none."""
    if any(_PERIOD_CELL.match(c) for c in _cells(lines[at])):
        return []
    above = _header_lines(lines, at, 3)
    for k, cells in enumerate(above):
        if not cells or len(cells) >= count or count % len(cells) or not all(_PERIOD_CELL.match(c) for c in cells):
            continue
        groups = above[k + 1] if k + 1 < len(above) else []
        # "Q1 2023" names its period: "three months ended Q1 2023" reads wrong.
        named = any(_PERIOD_CODE.match(c) for c in cells)
        if groups and not named and len(cells) % len(groups) == 0 and all(_GROUP.search(g) for g in groups):
            per_group = len(cells) // len(groups)
            cells = [f"{groups[i // per_group]} {c}" if i % per_group == 0 else c for i, c in enumerate(cells)]
        elif groups and named and len(cells) % len(groups) == 0 and all(_GROUP.search(g) for g in groups):
            # Only the first group is quoted: the columns after it are left out.
            per_group = len(cells) // len(groups)
            cells = [c if i < per_group else "" for i, c in enumerate(cells)]
        per = count // len(cells)
        return [cells[j // per] if j % per == 0 else SKIPPED for j in range(count)]
    return []


def _unit_above(lines: list[str], at: int) -> str:
    """The unit of a caption on the first lines above `at` ("(In millions,
    except percentages)"), past one blank line, or past the lines of a
    heading stacked one cell a line (PDF text) up to the caption."""
    for back in range(at - 1, max(-1, at - MAX_STACKED_LINES - 1), -1):
        found = _UNITS.search(lines[back])
        if found:
            return found.group(1).lower().rstrip("s")
        line = " ".join(lines[back].split())
        if back < at - 3 and not (_GROUP.search(line) or _CHANGE_HEADING.match(line)):
            break
    return ""


def _years_and_changes(lines: list[str], at: int, cells: list[str], count: int) -> list[str]:
    """Headings from a line of years with a change column after each group
    ("2023   2022   Change   2023   2022   Change"): the years with their
    groups, "" for the change columns (left out of the quote); else []."""
    if not all(_YEAR.match(c) or _CHANGE.match(c) for c in cells):
        return []
    years = [c for c in cells if _YEAR.match(c)]
    if len(cells) > count and len(years) == count:
        return _with_groups(lines, at, years)  # the row leaves its change cells blank
    if len(cells) != count:
        return []
    if not 2 <= len(years) < count:
        return []
    heads = iter(_with_groups(lines, at, years))
    return [next(heads) if _YEAR.match(c) else "" for c in cells]


def _dated_heading(line: str, count: int) -> list[str]:
    """Headings from one line naming the period and its years ("Three Months
    Ended September 30,   2023   2022"), or []."""
    tokens = line.split()
    years = [t for t in tokens if _YEAR.match(t)]
    label = " ".join(tokens[: len(tokens) - len(years)]).rstrip(" ,")
    if len(years) != count or tokens[len(tokens) - len(years) :] != years or not _ENDED.search(label):
        return []
    return [f"{label}, {years[0]}", *years[1:]]


def _heading_cells(cells: list[str]) -> bool:
    """Whether a line of cells can be column headings: not a contents line
    ("SIGNATURE   61") and not a unit caption beside them
    ("(In millions, except percentages)   September 30,   Change")."""
    if all(c.upper() == c for c in cells) and not all(_PERIOD_CELL.match(c) for c in cells):
        return False  # a part or section title ("PART II.   OTHER INFORMATION"), not "Q3 2023   YTD 2023"
    if any(_figure_cell(c) for c in cells):
        return False  # a row whose label the row reader does not take ("(Gains) losses   (1,072)   —")
    return not any(c.isdigit() and len(c) <= 3 for c in cells) and not any(_UNITS.search(c) for c in cells[1:])


def _figure_cell(cell: str) -> bool:
    """A cell that is a figure ("(1,072)", "70.1 %", "5.5 pts", "—"), not a
    heading; a year ("2023") is a heading."""
    first = cell.split()[0]
    return (
        bool(_CELL_TOKEN.fullmatch(first))
        and not _YEAR.match(first)
        and (first in _DASHES or any(c.isdigit() for c in first))
    )


# Lines a group heading may run over in PDF text, one cell a line: "Three
# Months Ended" / "December 31," / "Percentage" / "Change" / "Six Months
# Ended" / "December 31," / "Percentage" / "Change".
MAX_STACKED_LINES = 10
_CHANGE_HEADING = re.compile(r"^(?:%\s*change|percent(?:age)?(?:\s+change)?|change)$", re.IGNORECASE)


def _with_groups(lines: list[str], at: int, years: list[str]) -> list[str]:
    """Year columns under their headings: group headings ("Three Months
    Ended" / "December 31," over "2022 2021 2022 2021"), or a line of one
    date a column ("July 1,   June 25,   July 1,   June 25,") under a line of
    groups ("Three Months Ended   Nine Months Ended")."""
    above: list[str] = []
    side_by_side: list[str] = []
    for back in range(at - 1, max(-1, at - MAX_STACKED_LINES), -1):
        line = " ".join(lines[back].split())
        if _CHANGE_HEADING.match(line):
            continue  # "Percentage" / "Change" of a change column, between the groups in PDF text
        if not line or not _GROUP.search(line) or _prose(line):
            break  # a sentence ("… for the twelve months ended September 30, 2021 and 2022 (in millions):") is no heading
        cells = _cells(lines[back])
        if len(cells) > 1:
            # Groups side by side ("Three Months Ended   Nine Months Ended"),
            # each over the lines collected below them.
            if all(_ENDED.search(c) for c in cells):
                side_by_side = cells
            break
        above.insert(0, line)
    if not above and not side_by_side:
        return _under_cells(lines, at, years)
    groups: list[str] = []
    for line in above:
        if groups and (_DATE_LINE.match(line) or groups[-1].lower().endswith("ended")):
            groups[-1] = f"{groups[-1]} {line}"
        else:
            groups.append(line)
    if side_by_side:
        groups = [" ".join([c, *groups]) for c in side_by_side]
    groups = [g.rstrip(" ,") for g in groups]
    if groups and len(years) % len(groups) == 0:
        per = len(years) // len(groups)
        return [f"{groups[i // per]}, {y}" if i % per == 0 else y for i, y in enumerate(years)]
    return years


def _prose(line: str) -> bool:
    """A line of a sentence, not a heading: it starts in lower case, ends a
    sentence or a lead-in, or runs long."""
    return line[:1].islower() or line.endswith((".", ":")) or len(line.split()) > 12


def _under_cells(lines: list[str], at: int, years: list[str]) -> list[str]:
    """Years under a line of dates, one a column ("July 1,   June 25, …") or
    one a group ("December 31,   December 31,"), itself under a line of
    column groups ("Three Months Ended   Six Months Ended"): "three months
    ended July 1, 2023", "June 25, 2022", …; the years alone when the lines
    above are not such headings. A blank line between them and a unit
    caption in the first cell ("(In millions) …   December 31,") are passed."""
    above = _header_lines(lines, at, 2)
    # "July 30,   July 31,   $   %": the change columns' "$" and "%" head no period.
    dates = [d for d in above[0] if d not in ("$", "%")] if above else []
    if not dates or len(years) % len(dates) or not all(_DATE_LINE.match(d) for d in dates):
        return years
    groups = above[1] if len(above) > 1 else []
    if not groups or len(dates) % len(groups) or not all(_GROUP.search(g) for g in groups):
        groups = []
    if len(dates) == len(years):
        columns = [f"{d.rstrip(',')}, {y}" for d, y in zip(dates, years)]
        if not groups or len(years) % len(groups):
            return columns
        per = len(years) // len(groups)
        return [f"{groups[i // per]} {c}" if i % per == 0 else c for i, c in enumerate(columns)]
    per = len(years) // len(dates)
    if len(groups) == len(dates):
        dates = [f"{g} {d}" for g, d in zip(groups, dates)]
    return [f"{dates[i // per].rstrip(',')}, {y}" if i % per == 0 else y for i, y in enumerate(years)]


def _header_lines(lines: list[str], at: int, count: int) -> list[list[str]]:
    """The cells of up to `count` lines above `at`, nearest first, past blank
    lines (one at a time) and without a unit caption cell."""
    found: list[list[str]] = []
    back, blanks = at - 1, 0
    while back >= 0 and len(found) < count:
        line = lines[back].strip()
        back -= 1
        if not line:
            blanks += 1
            if blanks > 1:
                break
            continue
        blanks = 0
        cells = _cells(line)
        if cells and _UNITS.search(cells[0]):
            cells = cells[1:]
        found.append(cells)
    return found


def _first_group(values: list[str], headings: list[str]) -> tuple[list[str], list[str]]:
    """Only the first group of columns ("three months ended …") when the
    headings say where the next group starts."""
    if all("," in h for h in headings):
        # Every column is dated ("July 1, 2023"): a group starts where its ("nine months ended …").
        # heading says so ("nine months ended …") or its first date comes again.
        starts = [i for i, h in enumerate(headings) if i > 0 and (_ENDED.search(h) or h == headings[0])]
        if starts:
            return values[: starts[0]], headings[: starts[0]]
        return values, headings
    if _ENDED.search(headings[0]):
        # "three months ended Q2 2023", "Q2 2022", "six months ended YTD 2023", …
        starts = [i for i, h in enumerate(headings) if i > 0 and _ENDED.search(h)]
        if starts:
            return values[: starts[0]], headings[: starts[0]]
    if all(_PERIOD_CODE.match(h) for h in headings):
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
    figures = [v.strip("$()") for v in values if v not in _DASHES]
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
        if line and len(_cells(lines[back])) == 1 and not _prose(line) and not _YEAR.match(line):
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
    cells = _cells(line)
    for k in range(1, len(cells)):
        if all(_CELL_TOKEN.fullmatch(t) for c in cells[k:] for t in c.split()):
            tail = parse_row(" ".join(["x", *cells[k:]]))
            if tail is not None and len(tail.values) < len(row.values):
                label = " ".join(" ".join(cells[:k]).split()).rstrip(" :.")
                return label, list(tail.values)
            break
    return row.label, list(row.values)


# A line heading a group of a table's rows: a few words, one cell, no
# figure ("Revenue", "North America", "AWS", "Cost of revenue:").
MAX_GROUP_WORDS = 6
# "Reported as", "Research and": a phrase cut before its end heads nothing.
_ENDS_MIDWAY = re.compile(r"\b(?:and|or|of|as|the|for|in|to|by|with|from|at|on)$", re.IGNORECASE)
_NOT_A_GROUP = re.compile(r"^(?:part|item|note|table of contents|page)\b|\d", re.IGNORECASE)


def _group_above(lines: list[str], at: int) -> str:
    """The heading of the group of rows `lines[at]` is in, when one sits
    above them with nothing but rows and blank lines between: "Revenue" and
    "Operating Income" over the same three segments, "North America" and
    "AWS" over "Net sales". "" when there is none (the rows run up to their
    column headings or to a sentence)."""
    below: Row | None = None
    for back in range(at - 1, max(-1, at - MAX_HEADING_DISTANCE), -1):
        line = " ".join(lines[back].split())
        if not line:
            continue
        row = parse_row(lines[back])
        if row is not None:
            if all(_YEAR.match(v) for v in row.values):
                return ""  # the column headings: the rows have no group heading
            if row.label.lower().startswith("total"):
                return ""  # a group above ends at its total ("Cost of revenue:" … "Total cost of revenue")
            below = row
            continue
        if below is not None and below.label[:1].islower():
            return ""  # the first line of a label wrapped over two ("Research and / development expenses")
        name = line.rstrip(":")
        if (
            len(_cells(lines[back])) == 1
            and len(name.split()) <= MAX_GROUP_WORDS
            and name[:1].isupper()
            and not name.endswith((".", ","))
            and not _NOT_A_GROUP.search(name)
            and not _UNITS.search(name)
            and not _GROUP.search(name)
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
    if above and parse_row(lines[at - 1]) is None and len(_cells(lines[at - 1])) == 1 and not _prose(above):
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
    row = parse_row(lines[at])
    if row is None or all(_YEAR.match(v) for v in row.values) and _ENDED.search(row.label):
        # A heading ("Three Months Ended September 30,   2023   2022") is
        # read as a row (summaries leave it out so) but quoted as none.
        return None
    label, values = _label_and_values(lines[at], row)
    # A footnote mark ("Total net sales (4)", "Other liabilities (b)") is no part of it.
    label = _LABEL_FOOTNOTES.sub("", _wrapped(lines, at, label))
    if re.match(r"[a-z]+\b", label):
        return None  # "from Q2 2022 $0.15 or 54% from Q2", "to Intel": a fragment, no row's label
    if label.count("(") > label.count(")") and values[0].endswith(")") and "(" not in values[0]:
        return None  # "Contingencies (Note 13)": the figure closes the label
    while values and _YEAR.match(values[0]) and _LABEL_GOES_ON.search(label):
        # "Outstanding as of December 31,   2021   279.9": the year ends the
        # label ("… September 30, 2022 and 2021   3" ends a contents line's).
        label = f"{label} {values.pop(0)}"
    if not values or len(values) == 1 and re.fullmatch(r"\d{1,3}", values[0]):
        return None  # a title and its page number: a table of contents line
    while len(values) > 1 and _FOOTNOTE.match(values[0]):
        values = values[1:]  # "Total net sales (4)   $ 82,959 …": the label's footnote, no figure
    headings, unit = _column_headings(lines, at, len(values))
    if SKIPPED in headings and any(
        h == SKIPPED and not (v.endswith("%") or v in _DASHES) for v, h in zip(values, headings)
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
    if all(v in _DASHES for v in values):
        # "Preferred stock …: —, December 31, 2022; —, March 31, 2023": no figure to quote.
        return None
    if headings:
        parts = [f"{_with_unit(v, unit)}, {_lower_first(h)}" for v, h in zip(values, headings)]
    else:
        # Without headings an empty cell ("—") says nothing a reader can place.
        parts = [_with_unit(v, unit) for v in values if v not in _DASHES]
        if len(parts) > MAX_BARE_FIGURES:
            # "Operating income: 3,317 million; (165) million; 3,152 million; …"
            # twelve times over: which figure is which period, no reader can tell.
            return None
    return f"{label}: {'; '.join(parts)}."


# Months, spelt out and abbreviated ("Sep 30, 2023" in Intel's tables).
_MONTHS = frozenset(month.lower() for month in MONTHS + MONTH_ABBREVIATIONS)


def _lower_first(heading: str) -> str:
    """ "Three Months Ended December 31, 2022" reads "three months ended
    December 31, 2022" mid-sentence; a period code ("Q3 2022") keeps its capitals."""
    if not _GROUP.search(heading) or _DATE_LINE.match(heading.split(",")[0] + ","):
        return heading
    return " ".join(w if w.lower().strip(",") in _MONTHS or not w.isalpha() else w.lower() for w in heading.split(" "))
