"""Tables keep their headings: rows one per line with cells apart, and a node
that starts inside a table repeats the table's heading lines.

The PDF here is made in the test with its cells at known positions; the SEC
filings (skipped without the shared evaluation data) check the same on real
income statements, PDF and text alike."""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path

import pytest
from helpers import assemble_pdf, run_cli

from docsum.ingest.load import load_file
from docsum.ingest.split import split_document
from docsum.ingest.tables import CELL_SEP, cells, find_tables
from docsum.models.tokens import tokenizer_for_model

# The corpora next to the checkout, or where EVAL points (as for bench/): a
# worktree does not sit next to shared/.
EVAL_CORPORA = Path(os.environ.get("EVAL") or Path(__file__).resolve().parents[2] / "shared" / "eval" / "corpora")
SEC_PDF = EVAL_CORPORA / "sec-10-q-pdf"
SEC_TEXT = EVAL_CORPORA / "sec-10-q"
GPT4 = tokenizer_for_model("gpt-4")

# --------------------------------------------------------------------------- a generated PDF

PROSE = [
    "The cooperative reports its results for the quarter below. Figures are",
    "in thousands of euros and unaudited; the notes explain each line.",
]
HEAD_TOP = ["Three Months Ended", "Six Months Ended"]
HEAD_DATES = ["June 30,", "July 1,", "June 30,", "July 1,"]
HEAD_YEARS = ["2024", "2023", "2024", "2023"]
ROWS = [(f"Line item {n:02d} {word}", [f"{n * 101:,}", f"{n * 97:,}", f"({n * 13})", f"{n * 1009:,}"]) for n, word in
        enumerate(["water sales", "meter rentals", "grants", "repairs", "energy", "wages", "insurance", "levies",
                   "interest", "depreciation", "audit", "software", "vehicles", "training", "postage", "rates",
                   "cleaning", "legal fees", "bank charges", "sundries"], start=1)]  # fmt: skip
AFTER = ["The board approved these figures at its meeting in August."]
COLUMNS = [300, 370, 440, 510]


def _literal(text: str) -> bytes:
    return b"(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("latin-1") + b")"


def _show(x: float, y: float, text: str) -> bytes:
    return b"BT /F1 9 Tf 1 0 0 1 %.1f %.1f Tm %s Tj ET" % (x, y, _literal(text))


def table_pdf() -> bytes:
    """One page: prose, a table whose column heads are written column by
    column (dates above years, as filings produced from HTML do: the content
    stream does not run row by row), its rows, and prose after it."""
    ops: list[bytes] = []
    y = 740.0
    for line in PROSE:
        ops.append(_show(72, y, line))
        y -= 12
    y -= 12
    ops.append(_show(300, y, HEAD_TOP[0]))
    ops.append(_show(440, y, HEAD_TOP[1]))
    y -= 12
    for x, date, year in zip(COLUMNS, HEAD_DATES, HEAD_YEARS):
        ops.append(_show(x, y, date))
        ops.append(_show(x, y - 12, year))
    y -= 30
    for label, figures in ROWS:
        ops.append(_show(72, y, label))
        for x, figure in zip(COLUMNS, figures):
            ops.append(_show(x, y, figure))
        y -= 12
    y -= 12
    for line in AFTER:
        ops.append(_show(72, y, line))
        y -= 12
    stream = b"\n".join(ops) + b"\n"
    return assemble_pdf(
        {
            1: b"<< /Type /Catalog /Pages 2 0 R >>",
            2: b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            3: b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
            4: b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"endstream",
            5: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        }
    )


HEADING = "\n".join(CELL_SEP.join(line) for line in (HEAD_TOP, HEAD_DATES, HEAD_YEARS))


def row_text(label: str, figures: list[str]) -> str:
    return CELL_SEP.join([label, *figures])


def test_pdf_table_rows_are_one_per_line_with_cells_apart(tmp_path: Path) -> None:
    pdf = tmp_path / "results.pdf"
    pdf.write_bytes(table_pdf())
    text = load_file(pdf).text
    lines = text.split("\n")
    # The heading comes out row by row although the file writes it column by column.
    assert HEADING in text, text
    for label, figures in ROWS:
        assert row_text(label, figures) in lines, (label, text)
    # Prose around the table reads as PDFium writes it.
    assert lines[:2] == PROSE
    assert lines[-1] == AFTER[0]
    tables = find_tables(text)
    assert len(tables) == 1 and tables[0].heading == HEADING


def test_every_node_with_a_row_repeats_the_heading_through_the_cli(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "results.pdf").write_bytes(table_pdf())
    store = tmp_path / "store.sqlite"
    result = run_cli(
        "build", folder, "--store", store, "--llm", "extractive", "--chunk-size", "96", "--chunk-overlap", "0"
    )
    assert result.code == 0, result
    conn = sqlite3.connect(store)
    try:
        nodes = [r[0] for r in conn.execute("SELECT text FROM nodes ORDER BY seq")]
    finally:
        conn.close()
    assert len(nodes) >= 3, nodes  # the table spans several nodes
    holders = 0
    for label, figures in ROWS:
        row = row_text(label, figures)
        having = [n for n in nodes if row in n.split("\n")]
        assert having, (row, nodes)
        for node in having:
            holders += 1
            assert node.index(HEADING) < node.index(row), node
    assert holders >= len(ROWS)


def test_repeated_heading_stays_inside_the_token_budget() -> None:
    prose = "Opening remarks about the period. " * 5
    table = "\n".join([HEADING, *(row_text(label, figures) for label, figures in ROWS)])
    text = f"{prose}\n\n{table}\n\nClosing remarks."
    for size in (40, 64, 96, 160):
        chunks = split_document(text, GPT4, size, 0, tables=find_tables(text))
        for chunk in chunks:
            assert chunk.text == text[chunk.start_char : chunk.end_char]
            assert chunk.token_count == GPT4.count(chunk.node_text) <= size, (size, chunk)
        starts_inside = [c for c in chunks if text.find(HEAD_YEARS[-1]) < c.start_char < len(text) - 20]
        assert starts_inside, size
        for chunk in starts_inside:
            # A heading costs at most half the budget: a tiny one keeps its last lines (the years).
            if size >= 96:
                assert chunk.heading == HEADING, (size, chunk)
            else:
                assert chunk.heading and HEADING.endswith(chunk.heading), (size, chunk)
            # Rows are whole: a node starts at a row, never inside one.
            assert chunk.text.split("\n")[0] in {row_text(lb, f) for lb, f in ROWS}, chunk


def test_text_without_tables_splits_as_before() -> None:
    text = "Alpha  beta gamma 12  34.\n" * 3 + "\n\n" + "Plain prose, no figures at all. " * 40
    assert find_tables(text) == []
    chunks = split_document(text, GPT4, 64, 8, tables=find_tables(text))
    assert all(c.heading == "" and c.node_text == c.text for c in chunks)


def test_a_row_of_figures_without_a_heading_is_not_a_table() -> None:
    text = "Totals\nApples   12   14\nPears   3   4\n"
    assert find_tables(text) == []
    assert cells("Apples   12   14") == ["Apples", "12", "14"]


# --------------------------------------------------------------------------- the SEC filings

# The statement's title as the filings set it (capitals; Intel's in title case).
_STATEMENT = re.compile(
    r"STATEMENTS? OF (?:INCOME|OPERATIONS)|(?<!COMPREHENSIVE )INCOME STATEMENTS|Statements of Income\n"
)
_STATEMENT_END = re.compile(r"See accompanying|Refer to accompanying|accompanying notes", re.IGNORECASE)
_TOP_LINE = re.compile(r"Research and development|net sales|net revenue|total revenue", re.IGNORECASE)
_FIGURES_AT_END = re.compile(r"[^\W\d].*\s\(?\$?\s*[\d,.]+\s*\)?\s+\(?\$?\s*[\d,.]+\s*\)?\s*$")
_YEAR = re.compile(r"\b20\d\d\b")


def _statement_rows(text: str, span: tuple[int, int]) -> list[tuple[int, int]]:
    """(start, end) of the income statement's lines that end in two figures:
    found without docsum.ingest.tables, so a table it misses fails the test."""
    rows: list[tuple[int, int]] = []
    pos = span[0]
    for line in text[span[0] : span[1]].split("\n"):
        if _FIGURES_AT_END.match(line.strip()) and "Months Ended" not in line:
            rows.append((pos, pos + len(line)))
        pos += len(line) + 1
    return rows


def _income_statement(text: str) -> tuple[int, int]:
    """From the income statement's title to its closing 'See accompanying
    notes' line: the first titled stretch with 'Months Ended' and a top line."""
    for m in _STATEMENT.finditer(text):
        end = _STATEMENT_END.search(text, m.end(), m.end() + 5000)
        stop = end.start() if end else text.find("Table of Contents", m.end(), m.end() + 5000)
        window = text[m.start() : stop if stop > 0 else m.end() + 5000]
        if "Months Ended" in window and _TOP_LINE.search(window):
            return m.start(), m.start() + len(window)
    raise AssertionError("no income statement found")


def _sec_files(folder: Path, suffix: str) -> list[Path]:
    return sorted(folder.glob(f"*{suffix}")) if folder.is_dir() else []


@pytest.mark.process  # a large filing is read in a parse worker
@pytest.mark.skipif(not SEC_PDF.is_dir() and not SEC_TEXT.is_dir(), reason="shared SEC 10-Q corpora not present")
@pytest.mark.parametrize(
    "path", _sec_files(SEC_PDF, ".pdf") + _sec_files(SEC_TEXT, ".txt"), ids=lambda p: f"{p.parent.name}/{p.name}"
)
def test_every_node_with_an_income_statement_row_holds_its_period_headings(path: Path) -> None:
    loaded = load_file(path)
    text = loaded.text
    statement = _income_statement(text)
    rows = _statement_rows(text, statement)
    assert len(rows) >= 8, text[statement[0] : statement[1]]
    for size in (1024, 160):  # the default, and one that puts node starts inside the statement
        chunks = split_document(text, GPT4, size, size // 8, loaded.page_starts or None, find_tables(text))
        checked = 0
        for chunk in chunks:
            inside = [r for r in rows if chunk.start_char <= r[0] and r[1] <= chunk.end_char]
            if not inside:
                continue
            checked += 1
            node = chunk.node_text
            first_row = node.index(text[inside[0][0] : inside[0][1]])
            above = node[:first_row]
            assert "Months Ended" in above and len(set(_YEAR.findall(above))) >= 2, (size, node[:1500])
        assert checked, size


def test_a_text_file_is_split_as_before_through_the_cli(tmp_path: Path) -> None:
    """Text files keep their old nodes (docs/tables.md: repeating headings
    there cost recall on the SEC text filings); only PDFs repeat them."""
    folder = tmp_path / "docs"
    folder.mkdir()
    table = "\n".join([HEADING, *(row_text(label, figures) for label, figures in ROWS)])
    (folder / "results.txt").write_text(f"{PROSE[0]}\n\n{table}\n", encoding="utf-8")
    store = tmp_path / "store.sqlite"
    result = run_cli(
        "build", folder, "--store", store, "--llm", "extractive", "--chunk-size", "96", "--chunk-overlap", "0"
    )
    assert result.code == 0, result
    text = (folder / "results.txt").read_text(encoding="utf-8")
    conn = sqlite3.connect(store)
    try:
        nodes = list(conn.execute("SELECT text, start_char, end_char FROM nodes ORDER BY seq"))
    finally:
        conn.close()
    assert len(nodes) >= 3
    assert all(node == text[start:end] for node, start, end in nodes)
