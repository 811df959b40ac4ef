from __future__ import annotations

import codecs
import io
import json
import os
from pathlib import Path
from typing import Any

import pypdf
import pytest
from helpers import assemble_pdf, run_python_as_nobody
from helpers import write_file as write

from docsum.errors import LoadError
from docsum.ingest.discover import discover
from docsum.ingest.load import load_file
from docsum.ingest.loaded import LoadedDocument

EVAL_PDFS = Path(__file__).resolve().parents[2] / "shared" / "eval" / "pdfs"


# --------------------------------------------------------------------------- PDF fixture


def _pdf_string(text: str) -> str:
    return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def make_pdf(pages: list[list[str]], title: str | None = None) -> bytes:
    """A minimal valid PDF: one Helvetica text line per string, one page per list.

    Objects: 1 catalog, 2 page tree, 3 font, then a page and its content stream
    per page, then an optional Info dictionary; followed by a correct xref table.
    """
    objects: dict[int, bytes] = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    }
    kids: list[str] = []
    for index, lines in enumerate(pages):
        page_id, content_id = 4 + 2 * index, 5 + 2 * index
        kids.append(f"{page_id} 0 R")
        ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
        for line in lines:
            ops.append(f"{_pdf_string(line)} Tj T*")
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1")
        objects[page_id] = (
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {content_id} 0 R >>"
        ).encode()
        objects[content_id] = b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream"
    objects[2] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(pages)} >>".encode()
    info_ref = ""
    if title is not None:
        info_id = 4 + 2 * len(pages)
        objects[info_id] = f"<< /Title {_pdf_string(title)} /Producer (docsum tests) >>".encode("latin-1")
        info_ref = f" /Info {info_id} 0 R"
    return assemble_pdf(objects, info_ref)


TWO_PAGES = [
    ["Quarterly report for the river survey.", "Water levels rose in March."],
    ["Second page: conclusions.", "Levels returned to normal by June."],
]


def assert_one_line_error(excinfo: pytest.ExceptionInfo[LoadError], *fragments: str) -> None:
    err = excinfo.value
    assert "\n" not in err.reason and len(err.reason) <= 160
    for fragment in fragments:
        assert fragment in err.reason


# --------------------------------------------------------------------------- PDFs


def test_minimal_two_page_pdf(tmp_path: Path) -> None:
    path = write(tmp_path / "report.pdf", make_pdf(TWO_PAGES, title="River Survey 2024"))
    doc = load_file(path)
    assert isinstance(doc, LoadedDocument)
    assert doc.kind == "pdf"
    assert doc.title == "River Survey 2024"
    assert doc.warnings == []
    assert len(doc.page_starts) == 2 and doc.page_starts[0] == 0
    page1 = doc.text[: doc.page_starts[1]]
    page2 = doc.text[doc.page_starts[1] :]
    assert "river survey" in page1 and "March" in page1 and page1.endswith("\n\n")
    assert page2.startswith("Second page") and "June" in page2


def test_pdf_title_falls_back_to_first_line_and_ignores_filename_titles(tmp_path: Path) -> None:
    plain = write(tmp_path / "a.pdf", make_pdf(TWO_PAGES))
    assert load_file(plain).title == "Quarterly report for the river survey."
    junk = write(tmp_path / "b.pdf", make_pdf(TWO_PAGES, title="Microsoft Word - draft3.docx"))
    assert load_file(junk).title == "Quarterly report for the river survey."


# With the ocr extra, the OCR engine is loaded (and urllib3 under it binds ::1 to probe
# for IPv6): slow and socket-touching, so not in the quick loop.
@pytest.mark.process
def test_image_only_pdf_has_no_text(tmp_path: Path) -> None:
    path = write(tmp_path / "scan.pdf", make_pdf([[], []]))
    with pytest.raises(LoadError) as excinfo:
        load_file(path)
    assert_one_line_error(excinfo, "no extractable text")


def _encrypted_pdf(user_password: str) -> bytes:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(make_pdf(TWO_PAGES))))
    # RC4 works without the optional 'cryptography' package.
    writer.encrypt(user_password=user_password, owner_password="owner-secret", algorithm="RC4-128")
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def test_encrypted_pdf_needing_a_password(tmp_path: Path) -> None:
    path = write(tmp_path / "locked.pdf", _encrypted_pdf("s3cret"))
    with pytest.raises(LoadError) as excinfo:
        load_file(path)
    assert_one_line_error(excinfo, "password")


def test_encrypted_pdf_with_empty_user_password_opens(tmp_path: Path) -> None:
    path = write(tmp_path / "permissions-only.pdf", _encrypted_pdf(""))
    doc = load_file(path)
    assert "Water levels" in doc.text and len(doc.page_starts) == 2


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"%PDF-1.4\n",
        b"not a pdf at all, just text pretending",
        b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R",
        make_pdf(TWO_PAGES)[:150],
        make_pdf(TWO_PAGES)[:-60],
        bytes(range(256)) * 8,
    ],
    ids=["empty", "header-only", "text", "cut-dict", "truncated", "no-trailer", "random"],
)
def test_damaged_pdfs_give_one_line_load_error_or_text(tmp_path: Path, data: bytes) -> None:
    path = write(tmp_path / "broken.pdf", data)
    try:
        doc = load_file(path)
    except LoadError as err:
        assert "\n" not in err.reason and len(err.reason) <= 160
    else:
        assert doc.text.strip()


def pdfium_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    """PDFium refuses every file, so the fallback extractor (pypdf) reads it."""
    import pypdfium2

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise pypdfium2.PdfiumError("Failed to load document (PDFium: Data format error).")

    monkeypatch.setattr(pypdfium2, "PdfDocument", refuse)


def test_pypdf_recursion_error_is_a_damaged_pdf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pdfium_refuses(monkeypatch)

    def explode(*args: Any, **kwargs: Any) -> None:
        raise RecursionError("maximum recursion depth exceeded while calling a Python object\n(deep)")

    monkeypatch.setattr(pypdf, "PdfReader", explode)
    path = write(tmp_path / "deep.pdf", make_pdf(TWO_PAGES))
    with pytest.raises(LoadError) as excinfo:
        load_file(path)
    assert_one_line_error(excinfo, "damaged PDF", "RecursionError")


def test_failing_page_is_skipped_with_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pdfium_refuses(monkeypatch)
    real = pypdf.PageObject.extract_text
    calls = {"n": 0}

    def flaky(self: pypdf.PageObject, *args: Any, **kwargs: Any) -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ValueError("bad font\nprogram")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pypdf.PageObject, "extract_text", flaky)
    doc = load_file(write(tmp_path / "flaky.pdf", make_pdf(TWO_PAGES)))
    assert len(doc.page_starts) == 2  # the failed page keeps its slot
    assert doc.text[doc.page_starts[1] :].startswith("Second page")
    assert "March" not in doc.text
    assert doc.extractor == "pypdf"
    assert "PDFium could not open" in doc.warnings[0]
    assert len(doc.warnings) == 2 and "page 1" in doc.warnings[1] and "\n" not in doc.warnings[1]


def _manifest() -> list[dict[str, Any]]:
    manifest = EVAL_PDFS / "manifest.jsonl"
    if not manifest.is_file():
        return []
    return [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines() if line.strip()]


# Files of which no engine reads every page (a broken font encoding): the
# pages that read are kept, with a warning naming the others (README,
# Decisions), so the manifest's character count is out of reach.
PARTLY_READABLE = {"pdfjs-TAMReview.pdf"}


@pytest.mark.skipif(not EVAL_PDFS.is_dir(), reason="shared eval PDFs not present")
@pytest.mark.parametrize("entry", _manifest(), ids=lambda e: e["file"])
def test_eval_pdfs(entry: dict[str, Any]) -> None:
    path = EVAL_PDFS / entry["file"]
    expect = entry["expect"]
    # `expect` is what a file yields without the OCR extra (tests/test_ocr.py
    # checks `expect_ocr`): read with OCR off, so the same holds on a machine
    # that has the extra (TAMReview's unreadable pages are then OCR'd).
    if expect == "text":
        doc = load_file(path, ocr="off")
        if entry["file"] in PARTLY_READABLE:
            assert doc.text.strip() and doc.warnings[0].startswith("only part of the text could be read")
        else:
            assert len(doc.text) >= entry["min_chars"] and not doc.warnings
        assert len(doc.page_starts) == entry["pages_pdfinfo"]
        assert doc.page_starts == sorted(doc.page_starts) and doc.page_starts[0] == 0
        assert doc.title and "\n" not in doc.title and len(doc.title) <= 120
    elif expect == "needs-password":
        with pytest.raises(LoadError) as excinfo:
            load_file(path)
        assert_one_line_error(excinfo, "password")
    elif expect == "no-text":
        with pytest.raises(LoadError) as excinfo:
            load_file(path, ocr="off")
        assert_one_line_error(excinfo, "no extractable text")
    elif expect == "broken":
        try:
            doc = load_file(path, ocr="off")
        except LoadError as err:
            assert "\n" not in err.reason and len(err.reason) <= 160
        else:
            assert doc.text.strip()
    else:  # pragma: no cover - a new manifest category needs a decision here
        pytest.fail(f"unknown expectation {expect!r}")


# --------------------------------------------------------------------------- text files


def test_plain_utf8_text(tmp_path: Path) -> None:
    doc = load_file(write(tmp_path / "notes.txt", "\n\n  First line here  \r\nsecond\rthird\n"))
    assert doc.kind == "text"
    assert doc.text == "\n\n  First line here  \nsecond\nthird\n"
    assert doc.title == "First line here"
    assert doc.page_starts == [] and doc.warnings == []


@pytest.mark.parametrize("content", [b"", b"   \n\t\r\n  "])
def test_empty_file(tmp_path: Path, content: bytes) -> None:
    with pytest.raises(LoadError) as excinfo:
        load_file(write(tmp_path / "empty.txt", content))
    assert_one_line_error(excinfo, "empty file")


def test_binary_file_named_txt(tmp_path: Path) -> None:
    with pytest.raises(LoadError) as excinfo:
        load_file(write(tmp_path / "image.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))))
    assert_one_line_error(excinfo, "binary content, not text")
    # No NUL byte, but mostly control bytes.
    with pytest.raises(LoadError) as excinfo:
        load_file(write(tmp_path / "ctrl.md", bytes([1, 2, 3, 4, 5, 6, 65]) * 200))
    assert_one_line_error(excinfo, "binary content")


def test_latin1_text_falls_back_with_warning(tmp_path: Path) -> None:
    doc = load_file(write(tmp_path / "legacy.txt", "Café déjà vu – “quoted” naïve\n".encode("cp1252")))
    assert doc.text == "Café déjà vu – “quoted” naïve\n"
    assert doc.warnings == ["not UTF-8; decoded as cp1252"]
    # 0x81 is undefined in cp1252, so only latin-1 can decode this file.
    doc = load_file(write(tmp_path / "latin1.txt", b"Gr\xfc\xdfe \x81 aus K\xf6ln"))
    assert doc.text == "Grüße \x81 aus Köln"
    assert doc.warnings == ["not UTF-8; decoded as latin-1"]


def test_mostly_utf8_with_a_bad_byte_keeps_utf8(tmp_path: Path) -> None:
    data = "Ünïcödé text — ok. ".encode() * 5 + b"\xff" + " more ✓".encode()
    doc = load_file(write(tmp_path / "mixed.txt", data))
    assert doc.text.startswith("Ünïcödé text")
    assert "\ufffd" in doc.text and doc.text.endswith("more ✓")
    assert len(doc.warnings) == 1 and "invalid UTF-8" in doc.warnings[0]


@pytest.mark.parametrize(
    ("bom", "codec"),
    [
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
        (codecs.BOM_UTF32_LE, "utf-32-le"),
    ],
)
def test_bom_encodings(tmp_path: Path, bom: bytes, codec: str) -> None:
    content = "Überschrift\r\nZeile zwei 東京 😀\n"
    doc = load_file(write(tmp_path / "bom.txt", bom + content.encode(codec)))
    assert doc.text == "Überschrift\nZeile zwei 東京 😀\n"
    assert doc.title == "Überschrift"
    assert doc.warnings == []


def test_unreadable_file(shared_dir: Path) -> None:
    path = write(shared_dir / "secret.txt", "hidden away")
    path.chmod(0)
    # Root reads any file: load it as the unprivileged user.
    script = (
        "import sys; from pathlib import Path; from docsum.errors import LoadError; from docsum.ingest.load import load_file\n"
        "try:\n    load_file(Path(sys.argv[1]))\nexcept LoadError as exc:\n    print(exc.reason)"
    )
    proc = run_python_as_nobody(script, path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "permission denied\n"


def test_vanished_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(LoadError) as excinfo:
        load_file(tmp_path / "gone.txt")
    assert_one_line_error(excinfo, "file vanished")
    (tmp_path / "folder.md").mkdir()
    with pytest.raises(LoadError) as excinfo:
        load_file(tmp_path / "folder.md")
    assert_one_line_error(excinfo, "directory")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.txt")
    with pytest.raises(LoadError) as excinfo:
        load_file(tmp_path / "pipe.txt")  # must not block
    assert_one_line_error(excinfo, "not a regular file")
    found = discover([tmp_path])
    assert found.files == []
    assert [e.reason for e in found.errors] == ["is a named pipe (FIFO), not a regular file"]


def test_unsupported_suffix_is_a_load_error(tmp_path: Path) -> None:
    with pytest.raises(LoadError):
        load_file(write(tmp_path / "data.xlsx", b"PK\x03\x04"))


def test_path_with_spaces_and_non_ascii(tmp_path: Path) -> None:
    folder = tmp_path / "Prüfung Ordner" / "naïve docs"
    path = write(folder / "Ünïcode file 東京.md", "Some text without heading.\n")
    found = discover([tmp_path / "Prüfung Ordner"])
    assert [f.relpath for f in found.files] == ["naïve docs/Ünïcode file 東京.md"]
    assert found.files[0].path == path
    doc = load_file(found.files[0].path)
    assert doc.kind == "markdown" and doc.title == "Some text without heading."


# --------------------------------------------------------------------------- titles


@pytest.mark.parametrize(
    ("content", "title"),
    [
        ("\n\nIntro paragraph.\n\n# The Real Title #\n\ntext\n", "The Real Title"),
        ("```bash\n# not a heading\n```\n## Setup guide\n", "Setup guide"),
        ('---\ntitle: "Front Matter Title"\ndate: 2024\n---\n# Heading\n', "Front Matter Title"),
        ("---\ndate: 2024\n---\n\nBody first line\n", "Body first line"),
        ("Setext Title\n============\n\nbody\n", "Setext Title"),
        ("no heading at all\nsecond line\n", "no heading at all"),
        ("----\n* * *\n", "fallback"),
    ],
)
def test_markdown_titles(tmp_path: Path, content: str, title: str) -> None:
    doc = load_file(write(tmp_path / "fallback.md", content))
    assert doc.title == title


def test_long_first_line_title_is_clipped(tmp_path: Path) -> None:
    doc = load_file(write(tmp_path / "long.txt", "word " * 100))
    assert len(doc.title) <= 120 and doc.title.endswith("…") and doc.title.startswith("word word")
