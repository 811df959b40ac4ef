"""The column headings above a table row, read upward from it in the
document's own text: a line of cells ("(In Millions)   Q3 2022   Q3 2021"),
a line of years under group headings ("Three Months Ended" / "December
31,"), dates one a column, headings stacked over several lines; and the
table's unit ("(In millions)"). docsum.tablerows quotes a row with them.
"""

from __future__ import annotations

import re

from docsum.tablecells import (
    CELL_TOKEN,
    DASHES,
    DATE_LINE,
    ENDED,
    FULL_DATE,
    GROUP,
    PERIOD_CELL,
    PERIOD_CODE,
    UNITS,
    YEAR,
    is_prose,
    is_row,
    line_cells,
)

# A change column's heading among years: "Change", "% Change".
_CHANGE = re.compile(r"^(?:%\s*)?change$", re.IGNORECASE)
# A column after dated ones: "$ Change", "% Change".
_CHANGE_WORD = re.compile(r"\bchange\b", re.IGNORECASE)
# Columns after the dated ones that a quote leaves out ("% Change").
MAX_UNDATED_COLUMNS = 2
# How far above a row its headings may be: a table's rows and headings.
MAX_HEADING_DISTANCE = 40


def column_headings(lines: list[str], at: int, count: int) -> tuple[list[str], str]:  # noqa: C901 (listed when the check came in: simplify, then drop this)
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
        units = UNITS.search(line)
        if units and not unit:
            unit = units.group(1).lower().rstrip("s")
        if headings:
            continue
        cells = line_cells(line)
        years = line.split()
        if len(years) >= count and all(YEAR.match(y) for y in years):
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
            if all(YEAR.match(y) for y in years):
                # One undated column ("% Change") after each group of years:
                # marked "" so the quote leaves it out.
                per, heads = len(years) // extra, _with_groups(lines, back, years)
                marked = [h for g in range(extra) for h in [*heads[g * per : (g + 1) * per], ""]]
                return marked, unit or _unit_above(lines, back)
        if not _heading_cells(cells):
            continue
        if UNITS.search(cells[0]) and len(cells) > 1:
            dates = FULL_DATE.findall(" ".join(cells[1:]))
            if len(dates) == count and len(dates) > len(cells) - 1:
                # "(In Millions; Unaudited)   Apr 1, 2023 Dec 31, 2022": the
                # unit's caption, then dates the text joined into one cell.
                return dates, unit or _unit_above(lines, back)
        if UNITS.search(cells[0]) and len(cells) > count + 1:
            if all(PERIOD_CELL.match(c) for c in cells[-count:]) and len(set(cells[-count:])) == count:
                headings = cells[-count:]  # figures under the periods, after a column of words
                continue
            # More headings than figures: the row leaves cells blank, and
            # which figure is under which heading cannot be told.
            return [], unit or _unit_above(lines, back)
        if (
            len(cells) == count + 1
            and (UNITS.search(cells[0]) or not is_row(line))
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
    while dated < len(cells) and PERIOD_CELL.match(cells[dated]):
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
    if any(PERIOD_CELL.match(c) for c in cells):
        return headings  # years or dates ("2024   2025   Thereafter   Total"): what is above groups them
    for back in range(at - 1, max(-1, at - 6), -1):
        line = lines[back].strip()
        above = line_cells(line)
        if above and UNITS.search(above[0]):
            above = above[1:]
        if not above or len(above) == 1 or is_prose(line) or is_row(line) or not _heading_cells(above):
            break
        if all(PERIOD_CELL.match(c) or GROUP.search(c) for c in above):
            break  # the periods over the columns, not part of their names
        if len(above) < len(headings) and len(headings) % len(above) == 0:
            break  # headings over groups of columns ("Fair Value Measured and   Fair Value Measured and")
        if len(above) != len(headings):
            return []
        headings = [f"{a} {h}" for a, h in zip(above, headings)]
    return headings


# A column a quote leaves out: the second column of a period ("% of Net Revenue" beside "Amount").
SKIPPED = "\x00"


def _periods_above(lines: list[str], at: int, count: int) -> list[str]:
    """When the heading line at `at` names no period ("Amount   Revenue   …"),
    periods a few lines above that span its columns ("Q2 2023   Q2 2022 …",
    under "Three Months Ended   Six Months Ended"): each period heads the
    first of its columns, the others are SKIPPED. [] when there are none."""
    if any(PERIOD_CELL.match(c) for c in line_cells(lines[at])):
        return []
    above = _header_lines(lines, at, 3)
    for k, cells in enumerate(above):
        if not cells or len(cells) >= count or count % len(cells) or not all(PERIOD_CELL.match(c) for c in cells):
            continue
        groups = above[k + 1] if k + 1 < len(above) else []
        # "Q1 2023" names its period: "three months ended Q1 2023" reads wrong.
        named = any(PERIOD_CODE.match(c) for c in cells)
        if groups and not named and len(cells) % len(groups) == 0 and all(GROUP.search(g) for g in groups):
            per_group = len(cells) // len(groups)
            cells = [f"{groups[i // per_group]} {c}" if i % per_group == 0 else c for i, c in enumerate(cells)]
        elif groups and named and len(cells) % len(groups) == 0 and all(GROUP.search(g) for g in groups):
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
        found = UNITS.search(lines[back])
        if found:
            return found.group(1).lower().rstrip("s")
        line = " ".join(lines[back].split())
        if back < at - 3 and not (GROUP.search(line) or _CHANGE_HEADING.match(line)):
            break
    return ""


def _years_and_changes(lines: list[str], at: int, cells: list[str], count: int) -> list[str]:
    """Headings from a line of years with a change column after each group
    ("2023   2022   Change   2023   2022   Change"): the years with their
    groups, "" for the change columns (left out of the quote); else []."""
    if not all(YEAR.match(c) or _CHANGE.match(c) for c in cells):
        return []
    years = [c for c in cells if YEAR.match(c)]
    if len(cells) > count and len(years) == count:
        return _with_groups(lines, at, years)  # the row leaves its change cells blank
    if len(cells) != count:
        return []
    if not 2 <= len(years) < count:
        return []
    heads = iter(_with_groups(lines, at, years))
    return [next(heads) if YEAR.match(c) else "" for c in cells]


def _dated_heading(line: str, count: int) -> list[str]:
    """Headings from one line naming the period and its years ("Three Months
    Ended September 30,   2023   2022"), or []."""
    tokens = line.split()
    years = [t for t in tokens if YEAR.match(t)]
    label = " ".join(tokens[: len(tokens) - len(years)]).rstrip(" ,")
    if len(years) != count or tokens[len(tokens) - len(years) :] != years or not ENDED.search(label):
        return []
    return [f"{label}, {years[0]}", *years[1:]]


def _heading_cells(cells: list[str]) -> bool:
    """Whether a line of cells can be column headings: not a contents line
    ("SIGNATURE   61") and not a unit caption beside them
    ("(In millions, except percentages)   September 30,   Change")."""
    if all(c.upper() == c for c in cells) and not all(PERIOD_CELL.match(c) for c in cells):
        return False  # a part or section title ("PART II.   OTHER INFORMATION"), not "Q3 2023   YTD 2023"
    if any(_figure_cell(c) for c in cells):
        return False  # a row whose label the row reader does not take ("(Gains) losses   (1,072)   —")
    return not any(c.isdigit() and len(c) <= 3 for c in cells) and not any(UNITS.search(c) for c in cells[1:])


def _figure_cell(cell: str) -> bool:
    """A cell that is a figure ("(1,072)", "70.1 %", "5.5 pts", "—"), not a
    heading; a year ("2023") is a heading."""
    first = cell.split()[0]
    return (
        bool(CELL_TOKEN.fullmatch(first))
        and not YEAR.match(first)
        and (first in DASHES or any(c.isdigit() for c in first))
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
    above, side_by_side = _group_lines(lines, at)
    if not above and not side_by_side:
        return _under_cells(lines, at, years)
    groups: list[str] = []
    for line in above:
        if groups and (DATE_LINE.match(line) or groups[-1].lower().endswith("ended")):
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


def _group_lines(lines: list[str], at: int) -> tuple[list[str], list[str]]:
    """The one-cell group heading lines over the row at `at`, top first, and
    the groups written side by side on the line above them, if any."""
    above: list[str] = []
    for back in range(at - 1, max(-1, at - MAX_STACKED_LINES), -1):
        line = " ".join(lines[back].split())
        if _CHANGE_HEADING.match(line):
            continue  # "Percentage" / "Change" of a change column, between the groups in PDF text
        if not line or not GROUP.search(line) or is_prose(line):
            break  # a sentence ("… for the twelve months ended September 30, 2021 and 2022 (in millions):") is no heading
        cells = line_cells(lines[back])
        if len(cells) > 1:
            # Groups side by side ("Three Months Ended   Nine Months Ended"),
            # each over the lines collected below them.
            return above, cells if all(ENDED.search(c) for c in cells) else []
        above.insert(0, line)
    return above, []


def _under_cells(lines: list[str], at: int, years: list[str]) -> list[str]:
    """Years under a line of dates, one a column ("July 1,   June 25, …") or
    one a group ("December 31,   December 31,"), itself under a line of
    column groups ("Three Months Ended   Six Months Ended"): "three months
    ended July 1, 2023", "June 25, 2022", …; the years alone when the lines
    above are not such headings. A blank line between them and a unit
    caption in the first cell ("(In millions) …   December 31,") are passed."""
    # A change column's headings ("September 30,   Change" over "Three
    # Months Ended   Percentage"; "$   %") head no period.
    above = [
        [c for c in cells if c not in ("$", "%") and not _CHANGE_HEADING.match(c)]
        for cells in _header_lines(lines, at, 2)
    ]
    dates = above[0] if above else []
    if not dates or len(years) % len(dates) or not all(DATE_LINE.match(d) for d in dates):
        return years
    groups = above[1] if len(above) > 1 else []
    if not groups or len(dates) % len(groups) or not all(GROUP.search(g) for g in groups):
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
        cells = line_cells(line)
        if cells and UNITS.search(cells[0]):
            cells = cells[1:]
        found.append(cells)
    return found
