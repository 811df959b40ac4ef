#!/usr/bin/env python3
"""Table rows from the SEC 10-Q income-statement pages: docsum's layout
(PDFium character boxes, docsum.ingest.tables) against pdfplumber, per page.

  EVAL=/path/to/corpora python3 bench/table_extractors.py     # needs pdfplumber for its column

The gold rows come from the text version of each filing (corpora/sec-10-q:
the same statements, cells three spaces apart): every line of the income
statement with a label and at least two figures.  A gold row counts as found
when an extractor yields a row with exactly its cells (currency signs and
spaces inside a cell ignored); "as a line" only asks that the row's words
come out as one line, whatever the cell boundaries (what PDFium's own text
gives).  Times are per income-statement page, the text layer already open
(the file's opening is not counted for PDFium; pdfplumber opens the file
each run, its page objects cache), median of three runs.

Writes bench/results/table_extractors.json and prints a Markdown table.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from docsum.ingest.tables import cells, find_tables, layout_page_text  # noqa: E402

EVAL = Path(os.environ.get("EVAL", ""))
STATEMENT = re.compile(
    r"STATEMENTS? OF (?:INCOME|OPERATIONS)|(?<!COMPREHENSIVE )INCOME STATEMENTS|Statements of Income\n"
)
END = re.compile(r"See accompanying|Refer to accompanying|accompanying notes|Table of Contents", re.IGNORECASE)
TOP_LINE = re.compile(r"Research and development|net sales|net revenue|total revenue", re.IGNORECASE)
FIGURE = re.compile(r"[$(]*\s*-?[\d,.]+\s*\)?%?|—")


def norm(cell: str) -> str:
    return re.sub(r"[\s$]", "", cell)


def row_key(parts: list[str]) -> tuple[str, ...] | None:
    parts = [norm(p) for p in parts]
    parts = [p for p in parts if p]
    if len(parts) < 3 or not parts[0][:1].isalpha() or not all(FIGURE.fullmatch(p) for p in parts[1:]):
        return None
    return tuple(parts)


def statement_span(text: str) -> tuple[int, int] | None:
    for m in STATEMENT.finditer(text):
        end = END.search(text, m.end(), m.end() + 6000)
        stop = end.start() if end else m.end() + 6000
        window = text[m.start() : stop]
        if "Months Ended" in window and TOP_LINE.search(window):
            return m.start(), stop
    return None


def gold_rows(txt: Path) -> list[tuple[str, ...]]:
    text = txt.read_text(encoding="utf-8")
    span = statement_span(text)
    if span is None:
        return []
    # A period with its years ("Three Months Ended September 30,   2023   2022") is a heading, not a row.
    lines = [line for line in text[span[0] : span[1]].split("\n") if "Months Ended" not in line]
    rows = [row_key(cells(line)) for line in lines]
    return [r for r in rows if r]


def statement_page(pdf) -> int | None:  # type: ignore[no-untyped-def]
    for index in range(len(pdf)):
        textpage = pdf[index].get_textpage()
        if statement_span(textpage.get_text_range().replace("\r\n", "\n")) is not None:
            return index
    return None


def median_time(fn, runs: int = 3) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    times, out = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def score(gold: list[tuple[str, ...]], rows: list[list[str]], lines: list[str]) -> tuple[int, int]:
    keys = {row_key(r) for r in rows}
    flat = {norm(line) for line in lines}
    found = sum(1 for g in gold if g in keys)
    as_line = sum(1 for g in gold if "".join(g) in flat)
    return found, as_line


def main() -> int:
    import pypdfium2

    try:
        import pdfplumber
    except ImportError:
        pdfplumber = None
    pdfs = sorted((EVAL / "sec-10-q-pdf").glob("*.pdf"))
    if not pdfs:
        print(f"no SEC 10-Q PDFs under {EVAL}; set EVAL", file=sys.stderr)
        return 2
    results = []
    for path in pdfs:
        gold = gold_rows(EVAL / "sec-10-q" / f"{path.stem}.txt")
        doc = pypdfium2.PdfDocument(str(path))
        index = statement_page(doc)
        if index is None or not gold:
            print(f"{path.name}: no income statement found", file=sys.stderr)
            continue
        raw_s, raw = median_time(lambda i=index, d=doc: d[i].get_textpage().get_text_range(errors="replace"))
        textpage = doc[index].get_textpage()
        lay_s, laid = median_time(lambda tp=textpage, r=raw: layout_page_text(tp, r))
        laid_text = str(laid).replace("\r\n", "\n")
        laid_lines = laid_text.split("\n")
        in_tables = [ln for t in find_tables(laid_text) for ln in laid_text[t.body_start : t.end].split("\n")]
        row = {
            "file": path.name,
            "page": index + 1,
            "gold_rows": len(gold),
            "pdfium_text_s": raw_s,
            "pdfium_as_line": score(gold, [], str(raw).replace("\r\n", "\n").split("\n"))[1],
            "docsum_layout_extra_s": lay_s,
            "docsum_found": score(gold, [cells(ln) for ln in in_tables], laid_lines)[0],
            "docsum_as_line": score(gold, [], laid_lines)[1],
            "docsum_heading": bool(find_tables(laid_text)),
        }
        if pdfplumber is not None:

            def plumbed(call: str, p: Path = path, i: int = index) -> object:
                # A new page object each run: pdfplumber caches a page's characters.
                with pdfplumber.open(str(p), pages=[i + 1]) as plumb:
                    page = plumb.pages[0]
                    if call == "tables":
                        return page.extract_tables({"vertical_strategy": "text", "horizontal_strategy": "text"})
                    return page.extract_text()

            tab_s, tables = median_time(lambda: plumbed("tables"))
            txt_s, plain = median_time(lambda: plumbed("text"))
            rows = [[c or "" for c in r] for t in tables for r in t]  # type: ignore[union-attr]
            row.update(
                pdfplumber_tables_s=tab_s,
                pdfplumber_text_s=txt_s,
                pdfplumber_found=score(gold, rows, [])[0],
                pdfplumber_as_line=score(gold, [], str(plain).split("\n"))[1],
            )
        results.append(row)
        print(json.dumps(row), file=sys.stderr)
    out = HERE / "results" / "table_extractors.json"
    out.parent.mkdir(exist_ok=True)
    load = os.getloadavg()
    out.write_text(json.dumps({"load": load, "pages": results}, indent=1) + "\n", encoding="utf-8")
    total = sum(r["gold_rows"] for r in results)

    def share(key: str) -> str:
        if not all(key in r for r in results):
            return "–"
        return f"{sum(r[key] for r in results) / total:.3f}"

    def ms(key: str) -> str:
        if not all(key in r for r in results):
            return "–"
        return f"{1000 * statistics.median(r[key] for r in results):.1f}"

    print(f"{len(results)} income-statement pages, {total} gold rows; load average {load[0]:.1f}")
    print("| extractor | rows with exact cells | rows as one line | ms per page (median) |")
    print("|---|--:|--:|--:|")
    print(f"| PDFium text (today) | – | {share('pdfium_as_line')} | {ms('pdfium_text_s')} |")
    print(
        f"| docsum layout (PDFium boxes) | {share('docsum_found')} | {share('docsum_as_line')} | "
        f"{ms('pdfium_text_s')} + {ms('docsum_layout_extra_s')} |"
    )
    print(
        f"| pdfplumber extract_tables (text strategy) | {share('pdfplumber_found')} | – | {ms('pdfplumber_tables_s')} |"
    )
    print(f"| pdfplumber extract_text | – | {share('pdfplumber_as_line')} | {ms('pdfplumber_text_s')} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
