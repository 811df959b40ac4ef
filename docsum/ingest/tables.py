"""Tables in page text: rows one per line, cells apart, headings known.

The convention (docs/tables.md): a table row is one line whose cells are
separated by runs of at least two spaces; docsum writes ``CELL_SEP`` (three
spaces, as the SEC filings' text versions do).  A table's *heading* is the run
of column-heading lines directly above its first row of figures ("Three
Months Ended   Six Months Ended", "July 30,   July 31,", "2023   2022").

Two halves share that convention:

* ``layout_page_text`` rebuilds a PDF page's table lines from PDFium's
  character boxes, so cells that PDFium joined with one space are set apart
  (everything outside a table keeps PDFium's text, character for character);
* ``find_tables`` finds the tables of any text written that way (PDF pages and
  text files alike), so the splitter can repeat a table's heading in a node
  that starts inside it.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

CELL_SEP = "   "
_CELL_SPLIT = re.compile(r"\s{2,}")
# A cell of figures: amounts, percentages, negatives in parentheses, a dash for
# nil, a currency sign; "6,188 $" (a sign that belongs to the next cell) too.
_FIGURE = re.compile(
    r"[$€£¥]?\s*\(?\s*[$€£¥]?\s*[-+−]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)\s*%?\s*\)?\s*%?(?:\s*[$€£¥])?|[—–-]+|[$€£¥]"
)
_DIGIT = re.compile(r"\d")
_YEAR = re.compile(r"(?:19|20)\d\d")
_LETTER = re.compile(r"[^\W\d_]")
# One-cell lines that still belong to a heading: periods, dates, units.
_HEADING_WORDS = re.compile(
    r"\b(?:months?|weeks?|quarters?|years?|ended|ending|as of|fiscal|period|unaudited|"
    r"in (?:millions|thousands|billions)|(?:19|20)\d\d|january|february|march|april|may|june|july|"
    r"august|september|october|november|december)\b",
    re.IGNORECASE,
)
_MAX_HEADING_LINES = 6
_MAX_LABEL_LINE = 80  # a longer line without cells is prose: the table has ended
_MAX_BLANKS = 2  # blank lines a table may hold between rows (text filings space their sections)
_MIN_ROWS = 2
_MAX_LEADING_LABELS = 2


@dataclass(frozen=True)
class Table:
    """Offsets into the text: the heading lines are ``[heading_start,
    heading_end)``, the rows ``[body_start, end)``."""

    heading_start: int
    heading_end: int
    body_start: int
    end: int
    heading: str  # the heading lines, blank lines dropped, as a node repeats them


def cells(line: str) -> list[str]:
    stripped = line.strip()
    return _CELL_SPLIT.split(stripped) if stripped else []


def _is_figure(cell: str) -> bool:
    return _FIGURE.fullmatch(cell) is not None


def _is_row(parts: Sequence[str]) -> bool:
    """A row of figures: a label (or none) and figures to its right, the last cell a figure."""
    if len(parts) < 2 or not _is_figure(parts[-1]):
        return False
    figures = [p for p in parts[1:] if _is_figure(p)]
    if not any(_DIGIT.search(p) for p in figures) or _is_year_line(parts):
        return False
    return len(figures) >= len(parts) - 1


def _is_year_line(parts: Sequence[str]) -> bool:
    """Column heads that are years: "2023   2022", or "Three Months Ended
    September 30,   2023   2022" (a period as the stub's head)."""
    if len(parts) < 2 or not all(_YEAR.fullmatch(p.strip("()*")) for p in parts[1:]):
        return False
    first = parts[0]
    return _YEAR.fullmatch(first.strip("()*")) is not None or _HEADING_WORDS.search(first) is not None


def _is_heading(parts: Sequence[str]) -> bool:
    if not parts or _is_row(parts):
        return False
    if _is_year_line(parts):
        return True
    if len(parts) >= 2:
        # Column heads are short (the stub's head, first, may be long); two
        # long runs of words are two text columns.
        return all(len(p) <= 40 for p in parts[1:]) and any(_LETTER.search(p) for p in parts)
    return len(parts[0]) <= 60 and _HEADING_WORDS.search(parts[0]) is not None


def _is_label(parts: Sequence[str]) -> bool:
    """A one-cell line that names the rows under it ("Operating expenses:"),
    not a sentence ("See accompanying notes.")."""
    return (
        len(parts) == 1 and len(parts[0]) <= _MAX_LABEL_LINE and not parts[0].endswith(".") and not _is_heading(parts)
    )


def _lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of every line, newline excluded."""
    spans: list[tuple[int, int]] = []
    pos = 0
    while True:
        nl = text.find("\n", pos)
        if nl < 0:
            spans.append((pos, len(text)))
            return spans
        spans.append((pos, nl))
        pos = nl + 1


def table_lines(lines: Sequence[str]) -> list[tuple[int, int, int]]:
    """Tables as line numbers: (heading's first line, first row, one past the last row).

    A table is at least two rows of figures under a heading; label lines
    ("Operating expenses") and a few blank lines may sit between its rows.
    A table without a heading has nothing to repeat and is not reported."""
    parts = [cells(line) for line in lines]
    found: list[tuple[int, int, int]] = []
    n = len(lines)
    i = 0
    while i < n:
        if not _is_row(parts[i]):
            i += 1
            continue
        body = i
        rows, last, blanks = 0, i, 0
        j = i
        while j < n:
            p = parts[j]
            if not p:
                blanks += 1
                if blanks > _MAX_BLANKS:
                    break
            elif _is_row(p):
                rows, last, blanks = rows + 1, j, 0
            elif _is_label(p):
                blanks = 0  # a label line inside the table
            else:
                break  # prose, or a new heading: a new table starts there
            j += 1
        # Section labels ("Net sales:") may stand between the heading and the first row.
        floor = found[-1][2] if found else 0
        while body - 1 > floor and body > i - _MAX_LEADING_LABELS and _is_label(parts[body - 1]):
            body -= 1
        head = _heading_above(parts, body, floor)
        if rows >= _MIN_ROWS and head < body:
            found.append((head, body, last + 1))
        i = last + 1
    return found


def _heading_above(parts: Sequence[Sequence[str]], body: int, floor: int) -> int:
    """First line of the heading run ending right above line ``body`` (``body`` when none).

    Single blank lines may separate the heading's lines and the heading from
    the rows, as in the text filings; a one-cell heading line counts only
    with a many-celled one."""
    head = body
    seen_wide = False
    k = body - 1
    while k >= floor and body - k <= 2 * _MAX_HEADING_LINES:
        if not parts[k]:
            k -= 1  # a blank line: the heading goes on only if a heading line is right above it
            if k < floor or not parts[k]:
                break
            continue
        if not _is_heading(parts[k]):
            break
        head = k
        seen_wide = seen_wide or len(parts[k]) >= 2
        k -= 1
    return head if seen_wide else body


def find_tables(text: str) -> list[Table]:
    """The tables of ``text`` (see the module's convention), in order."""
    if "  " not in text:  # no line has cells apart: the common case, decided at once
        return []
    spans = _lines(text)
    lines = [text[s:e] for s, e in spans]
    out: list[Table] = []
    for head, body, end in table_lines(lines):
        heading = "\n".join(lines[k].rstrip() for k in range(head, body) if lines[k].strip())
        out.append(Table(spans[head][0], spans[body - 1][1], spans[body][0], spans[end - 1][1], heading))
    return out


# --------------------------------------------------------------------------- PDF pages

# Between two cells the gap is wider than this many character heights; word
# spaces (even in justified lines) stay below it.
_CELL_GAP = 2.0
_MIN_FIGURE_LINES = 3
_CURRENCY = frozenset("$€£¥")
_WORD_GAP = 0.3


def _maybe_table(raw: str) -> bool:
    """Cheap test on PDFium's text before any character box is read: at least
    a few lines ending in two figures."""
    hits = 0
    for line in raw.splitlines():
        words = line.split()
        if len(words) >= 3 and _is_figure(words[-1]) and _is_figure(words[-2]) and _DIGIT.search(words[-1]):
            hits += 1
            if hits >= _MIN_FIGURE_LINES:
                return True
    return False


Box = tuple[float, float, float, float]  # left, bottom, right, top (PDF points, y upwards)


def _spatial_lines(raw: str, boxes: Sequence[Box]) -> list[list[int]]:
    """The page's visible characters grouped into lines by position, top to
    bottom, each line's character indices left to right.

    PDFium writes text in content-stream order, which for many filings puts
    each stacked column head ("April 1," over "2023") on a line of its own; a
    table read by position has one line per row whatever the stream order."""
    chars = [i for i, ch in enumerate(raw) if not ch.isspace() and boxes[i][3] > boxes[i][1]]
    chars.sort(key=lambda i: -(boxes[i][1] + boxes[i][3]))
    lines: list[list[int]] = []
    bottom = 0.0
    for i in chars:
        centre = (boxes[i][1] + boxes[i][3]) / 2
        if not lines or centre < bottom:
            lines.append([])
            bottom = boxes[i][1]
        lines[-1].append(i)
    for line in lines:
        line.sort(key=lambda i: boxes[i][0])
    return lines


def _line_cells(raw: str, boxes: Sequence[Box], line: Sequence[int]) -> str:
    """One spatial line as text, its cells joined by CELL_SEP: a new cell
    starts where the gap to the previous character is wider than _CELL_GAP
    character heights, a new word where PDFium saw a space or the gap is
    wider than _WORD_GAP. A lone currency sign goes with the figure after it
    ("$ 6,704"), wherever the filing placed it."""
    heights = [boxes[i][3] - boxes[i][1] for i in line if raw[i].isalnum()] or [boxes[line[0]][3] - boxes[line[0]][1]]
    height = statistics.median(heights)
    table: list[list[str]] = []  # cells, each a list of words
    prev: int | None = None
    for i in line:
        gap = boxes[i][0] - boxes[prev][2] if prev is not None else 0.0
        if prev is None or gap > _CELL_GAP * height:
            table.append([raw[i]])
        elif gap > _WORD_GAP * height or (prev + 1 < len(raw) and raw[prev + 1].isspace()) or i != prev + 1:
            table[-1].append(raw[i])
        else:
            table[-1][-1] += raw[i]
        prev = i
    for k in range(len(table) - 1):
        if len(table[k]) > 1 and table[k][-1] in _CURRENCY:
            table[k + 1].insert(0, table[k].pop())
    merged: list[list[str]] = []
    for words in table:
        if merged and len(merged[-1]) == 1 and merged[-1][0] in _CURRENCY:
            merged[-1].extend(words)
        else:
            merged.append(words)
    return CELL_SEP.join(" ".join(words) for words in merged)


def layout_page_text(textpage: Any, raw: str) -> str:
    """PDFium's text ``raw`` of ``textpage`` (a pypdfium2 PdfTextPage) with
    each table rebuilt from the character boxes: one line per row, cells apart.

    A table replaces the stretch of ``raw`` that holds its characters, and
    only when that stretch holds nothing else; the rest of the page, and every
    page without a table, comes back exactly as PDFium wrote it. A page whose
    text does not map one to one onto its characters is left alone too."""
    if not _maybe_table(raw):
        return raw
    try:
        return _rebuilt(textpage, raw)
    except Exception:  # noqa: BLE001 - the layout only improves a table; a page it cannot place keeps PDFium's text
        return raw


def _rebuilt(textpage: Any, raw: str) -> str:
    if textpage.count_chars() != len(raw):
        return raw
    boxes: list[Box] = [textpage.get_charbox(i, loose=True) for i in range(len(raw))]
    lines = _spatial_lines(raw, boxes)
    celled = [_line_cells(raw, boxes, line) for line in lines]
    pieces: list[tuple[int, int, str]] = []
    for head, _body, end in table_lines(celled):
        members = [i for k in range(head, end) for i in lines[k]]
        first, last = min(members), max(members)
        visible = sum(1 for i in range(first, last + 1) if not raw[i].isspace())
        if visible != len(members):
            continue  # other text is interleaved with the table's in the stream: keep PDFium's order
        pieces.append((first, last + 1, "\n".join(celled[head:end])))
    if not pieces:
        return raw
    out: list[str] = []
    pos = 0
    for first, stop, table in sorted(pieces):
        if first < pos:
            continue
        out += [raw[pos:first], table]
        pos = stop
    out.append(raw[pos:])
    return "".join(out)
