"""HTML, Word, reStructuredText and CSV files, on files the tests generate."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import docx
import pytest
from helpers import run_cli, stored_paths
from helpers import write_file as write

from docsum.errors import LoadError
from docsum.ingest import markup
from docsum.ingest.load import load_file

PAGE = b"""<!doctype html>
<html><head><meta charset="utf-8"><title>Harbour  Report</title>
<style>body { color: red } .secret { display: none }</style>
<script>var tracking = "SCRIPT-TEXT";</script></head>
<body><nav><a href="/">NAV-TEXT</a></nav><div hidden>HIDDEN-TEXT</div>
<h1>Harbour works</h1>
<p>The quay was   rebuilt
in <b>2021</b> at a cost of &euro;4 million.</p><!-- an HTML COMMENT -->
<h2>Tenders</h2>
<ul><li>Dredging</li><li>Lighting</li><li><button>Toggle</button></li></ul>
<table><tr><th>Year</th><th>Ships</th></tr><tr><td>2022</td><td>310</td></tr></table>
<noscript>NOSCRIPT-TEXT</noscript>
<p>Caf\xc3\xa9 opens in May.<br>Ask at the office.</p>
</body></html>"""


def test_html_keeps_headings_and_paragraphs_and_drops_scripts_and_styles(tmp_path: Path) -> None:
    doc = load_file(write(tmp_path / "report.html", PAGE))
    assert doc.kind == "html" and doc.title == "Harbour Report" and doc.page_starts == []
    assert doc.text.startswith("# Harbour works\n\nThe quay was rebuilt in 2021 at a cost of €4 million.\n\n## Tenders")
    assert "- Dredging\n- Lighting\n\nYear | Ships" in doc.text  # the item left empty by its button is gone
    assert "Year | Ships\n2022 | 310" in doc.text
    assert "Café opens in May.\nAsk at the office." in doc.text
    for dropped in (
        "SCRIPT-TEXT",
        "color: red",
        "HTML COMMENT",
        "NOSCRIPT-TEXT",
        "NAV-TEXT",
        "HIDDEN-TEXT",
        "<",
        "&euro;",
    ):
        assert dropped not in doc.text


def test_htm_in_a_legacy_encoding_and_without_a_title(tmp_path: Path) -> None:
    page = '<html><head><meta charset="windows-1252"></head><body><h2>Résumé</h2><p>Naïve text.</p></body></html>'
    doc = load_file(write(tmp_path / "old.HTM", page.encode("cp1252")))
    assert doc.title == "Résumé" and "Naïve text." in doc.text


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"<html><body><script>only()</script></body></html>", "no text in this html file"),
        (b"\x00\x01\x02\x03binary" * 50, "binary content, not an HTML page"),
    ],
)
def test_html_without_text_is_that_files_failure(tmp_path: Path, data: bytes, reason: str) -> None:
    with pytest.raises(LoadError) as excinfo:
        load_file(write(tmp_path / "x.html", data))
    assert excinfo.value.reason == reason


def make_docx(title: str | None = None) -> bytes:
    document = docx.Document()
    if title is not None:
        document.core_properties.title = title
    document.add_heading("Quarterly review", 0)
    document.add_heading("Revenue", 1)
    document.add_paragraph("Revenue grew 12 percent on ferry tickets.")
    document.add_paragraph("new routes", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    for (row, col), value in {(0, 0): "Route", (0, 1): "Riders", (1, 0): "North", (1, 1): "900"}.items():
        table.cell(row, col).text = value
    document.add_heading("Outlook", 2)
    document.add_paragraph("Stable.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def test_docx_keeps_headings_paragraphs_lists_and_tables_in_order(tmp_path: Path) -> None:
    doc = load_file(write(tmp_path / "review.docx", make_docx()))
    assert doc.kind == "docx" and doc.title == "Quarterly review"
    assert doc.text == (
        "# Quarterly review\n\n# Revenue\n\nRevenue grew 12 percent on ferry tickets.\n\n- new routes\n\n"
        "Route | Riders\nNorth | 900\n\n## Outlook\n\nStable."
    )
    assert load_file(write(tmp_path / "titled.docx", make_docx(title="Board pack"))).title == "Board pack"


def test_docx_reads_content_controls_and_text_boxes_once(tmp_path: Path) -> None:
    from docx.oxml import parse_xml

    ns = (
        'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
        'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
        'xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"'
    )
    document = docx.Document()
    document.add_paragraph("Body paragraph.")
    body = document.element.body
    # A cover page in a content control, as Word's templates make them.
    body.insert(
        0,
        parse_xml(f"<w:sdt {ns}><w:sdtContent><w:p><w:r><w:t>Cover page text</w:t></w:r></w:p></w:sdtContent></w:sdt>"),
    )
    # A text box: the modern copy under mc:Choice, the legacy copy under mc:Fallback.
    box = "<w:txbxContent><w:p><w:r><w:t>Boxed note</w:t></w:r></w:p></w:txbxContent>"
    body.insert(
        2,
        parse_xml(
            f'<w:p {ns}><w:r><mc:AlternateContent><mc:Choice Requires="wps"><wps:txbx>{box}</wps:txbx></mc:Choice>'
            f"<mc:Fallback><w:pict>{box}</w:pict></mc:Fallback></mc:AlternateContent></w:r></w:p>"
        ),
    )
    buffer = io.BytesIO()
    document.save(buffer)
    doc = load_file(write(tmp_path / "boxed.docx", buffer.getvalue()))
    assert doc.text == "Cover page text\n\nBody paragraph.\n\nBoxed note"


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"", "damaged Word document: not a .docx (zip) file"),
        (b"just text in a .docx", "damaged Word document: not a .docx (zip) file"),
        (bytes.fromhex("d0cf11e0a1b11ae1") + b"\x00" * 512, "encrypted or old-format (.doc) Word file"),
        (make_docx()[:700], "damaged Word document"),  # cut short
        (_zip({"hello.txt": b"not a word document"}), "damaged Word document"),
        # A zip bomb (the limit is lowered so the test stays small).
        (_zip({"word/document.xml": b"\x00" * (3 * 1024 * 1024)}), "unpacks to 3 MB, more than the 1 MB"),
    ],
    ids=["empty", "text", "ole", "truncated", "other-zip", "bomb"],
)
def test_malformed_docx_is_one_line_load_error(
    tmp_path: Path, data: bytes, fragment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(markup, "DOCX_MAX_UNPACKED", 1024 * 1024)
    with pytest.raises(LoadError) as excinfo:
        load_file(write(tmp_path / "bad.docx", data))
    reason = excinfo.value.reason
    assert fragment in reason and "\n" not in reason and len(reason) <= 160


def test_rst_and_csv_are_read_as_text(tmp_path: Path) -> None:
    rst = load_file(write(tmp_path / "guide.rst", "=====\nGuide\n=====\n\nInstall it with *pip*.\n"))
    assert rst.kind == "rst" and rst.title == "Guide" and "Install it with *pip*." in rst.text
    csv = load_file(write(tmp_path / "ships.csv", "name,tons\nAurora,1200\n"))
    assert csv.kind == "csv" and csv.text == "name,tons\nAurora,1200\n"


def test_a_folder_of_every_format_builds_and_a_bad_one_fails_alone(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    write(folder / "a.html", PAGE)
    write(folder / "b.docx", make_docx())
    write(folder / "c.rst", "Title\n=====\n\nBody text about canals.\n")
    write(folder / "d.csv", "a,b\n1,2\n")
    write(folder / "e.docx", b"not a docx")
    store = tmp_path / "store.sqlite"
    result = run_cli("build", folder, "--store", store)
    assert result.code == 3, result
    assert stored_paths(store) == {"a.html", "b.docx", "c.rst", "d.csv"}
    failed = [line for line in result.stderr.splitlines() if line.startswith("docsum: failed")]
    assert failed == ["docsum: failed e.docx: damaged Word document: not a .docx (zip) file"]
