"""OCR (docsum[ocr]): pages without a text layer and images, read offline.

The files are made here: known text drawn onto an image with Pillow (which
the extra brings), saved as PNG, as a multi-page TIFF, as an image-only PDF,
and spliced after a text page into a mixed PDF; the recovered words are
checked against the drawn ones. OCR takes seconds a page, so the pictures
are small and few. Without the extra these tests skip, except the ones
about what happens without it (CI runs this file with the extra installed
and fails if anything here skips: .ci/run).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import EVAL_PDFS, run_cli
from helpers import write_file as write

from docsum.errors import LoadError
from docsum.ingest.load import load_file
from docsum.ingest.ocr import installed
from docsum.ingest.parsing import ParseRequest, parse_file

# Not in the quick loop: OCR costs seconds a page, and loading the engine binds a
# socket (urllib3, under it, probes for IPv6 on ::1).
pytestmark = pytest.mark.process
needs_ocr = pytest.mark.skipif(not installed(), reason="the OCR extra (docsum[ocr]) is not installed")

FIRST = ["Harbour survey report", "Water levels rose sharply in March", "near the northern pier."]
SECOND = ["Second page of conclusions", "Levels returned to normal by June", "after the spring tides."]
TEXT_PAGE = ["Cover letter from the harbour master.", "The survey pages follow this letter."]


def picture(lines: list[str]) -> Any:
    """`lines` drawn in black on white, about 11-point print at 200 dpi."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=34)
    image = Image.new("L", (1100, 70 + 56 * len(lines)), 255)
    draw = ImageDraw.Draw(image)
    for number, line in enumerate(lines):
        draw.text((40, 35 + 56 * number), line, font=font, fill=0)
    return image


def saved(image: Any, fmt: str, **options: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def recall(drawn: list[str], text: str) -> float:
    """Share of the drawn words found in `text`."""
    found = set(words(text))
    expected = words(" ".join(drawn))
    return sum(1 for w in expected if w in found) / len(expected)


def mixed_pdf() -> bytes:
    """Page 1 a text layer, page 2 a scan (an image, no text)."""
    import pypdf
    from test_load import make_pdf

    writer = pypdf.PdfWriter()
    for data in (make_pdf([TEXT_PAGE]), saved(picture(FIRST), "PDF", resolution=200.0)):
        for page in pypdf.PdfReader(io.BytesIO(data)).pages:
            writer.add_page(page)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@needs_ocr
def test_scans_images_and_a_mixed_pdf_build_with_their_text(tmp_path: Path) -> None:
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    write(folder / "scan.pdf", saved(picture(FIRST), "PDF", resolution=200.0))
    write(folder / "mixed.pdf", mixed_pdf())
    write(folder / "pages.tiff", saved(picture(FIRST), "TIFF", save_all=True, append_images=[picture(SECOND)]))
    write(folder / "note.png", saved(picture(SECOND), "PNG"))

    result = run_cli("build", folder, "--store", store, "--llm", "extractive", "--json")
    assert result.code == 0, result
    data = result.json()
    assert data["documents"]["added"] == 4 and not data["failures"]
    assert data["pages"] == {"pages": 6, "text_layer": 1, "read_by_ocr": 5, "no_text": 0, "ocr": 5, "unreadable": 0}
    assert data["ocr_files"]["mixed.pdf"]["read_by_ocr"] == 1 and data["ocr_files"]["mixed.pdf"]["text_layer"] == 1
    assert data["ocr"] == {"requested": "auto", "installed": True, "in_effect": "auto"}
    assert data["extractors"]["scan.pdf"] == "ocr" and data["extractors"]["mixed.pdf"] == "pdfium"

    shown = {name: run_cli("show", name, "--store", store, "--json").json() for name in ("mixed.pdf", "pages.tiff")}
    assert shown["mixed.pdf"]["page_origins"] == "to" and shown["mixed.pdf"]["ocr_pages"] == 1
    assert shown["pages.tiff"]["page_origins"] == "oo" and shown["pages.tiff"]["kind"] == "image"
    text_show = run_cli("show", "mixed.pdf", "--store", store)
    assert "read: 1 of 2 pages by OCR" in text_show.stdout

    import sqlite3

    conn = sqlite3.connect(store)
    try:
        nodes = dict(
            conn.execute(
                "SELECT d.path, group_concat(n.text, ' ') FROM documents d JOIN nodes n USING (doc_id) GROUP BY d.path"
            ).fetchall()
        )
    finally:
        conn.close()
    assert recall(FIRST, nodes["scan.pdf"]) >= 0.9, nodes["scan.pdf"]
    assert recall(FIRST + SECOND, nodes["pages.tiff"]) >= 0.9, nodes["pages.tiff"]
    assert recall(SECOND, nodes["note.png"]) >= 0.9, nodes["note.png"]
    assert recall(TEXT_PAGE, nodes["mixed.pdf"]) == 1.0 and recall(FIRST, nodes["mixed.pdf"]) >= 0.9

    # Citations from an OCR'd page say so.
    answer = run_cli("ask", "When did water levels rise near the northern pier?", "--store", store, "--json")
    assert answer.code == 0, answer
    sources = answer.json()["sources"]
    assert any(s.get("ocr") for s in sources), sources


@needs_ocr
def test_the_ocr_setting_decides_which_pages_and_the_cache_keys_on_it(tmp_path: Path) -> None:
    scan = write(tmp_path / "scan.pdf", saved(picture(FIRST), "PDF", resolution=200.0))
    text = write(tmp_path / "letter.pdf", mixed_pdf())
    cache = tmp_path / "cache"

    def parse(path: Path, mode: str) -> Any:
        return parse_file(ParseRequest(str(path), None, "cl100k_base", 1.0, 256, 20, str(cache), ocr=mode))

    with pytest.raises(LoadError) as off:
        parse(scan, "off")
    assert "no extractable text" in off.value.reason and "--ocr off" in off.value.reason
    first = parse(scan, "auto")
    assert not first.cached and first.loaded.page_origins == "o" and recall(FIRST, first.loaded.text) >= 0.9
    again = parse(scan, "auto")
    assert again.cached and again.loaded.text == first.loaded.text  # an unchanged rebuild OCRs nothing
    assert parse(text, "auto").loaded.page_origins == "to"
    forced = parse(text, "force")
    assert not forced.cached and forced.loaded.page_origins == "oo"
    assert recall(TEXT_PAGE, forced.loaded.text) >= 0.8  # the text page, read from its pixels
    assert parse(text, "off").loaded.page_origins == "t-"


@needs_ocr
def test_page_and_image_bombs_are_capped_or_refused(tmp_path: Path) -> None:
    # A scan declared at 5 dpi: a page 220 inches wide. Rendered at 200 dpi
    # it would be 2,000 million pixels; it is read at the pixel limit instead.
    huge = write(tmp_path / "huge.pdf", saved(picture(FIRST), "PDF", resolution=5.0))
    doc = load_file(huge)
    assert doc.page_origins == "o" and recall(FIRST, doc.text) >= 0.9
    assert any("inches; read by OCR at" in w for w in doc.warnings), doc.warnings

    from PIL import Image

    bomb = write(tmp_path / "bomb.png", saved(Image.new("1", (12_000, 12_000), 1), "PNG"))
    with pytest.raises(LoadError) as refused:
        load_file(bomb)
    assert "more than docsum reads" in refused.value.reason and "\n" not in refused.value.reason


def test_with_ocr_off_or_without_the_extra_scans_fail_and_images_are_skipped(tmp_path: Path) -> None:
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    write(folder / "letter.txt", "A letter about the harbour survey and its findings.")
    write(folder / "scan.pdf", b"%PDF-1.4 not really")  # replaced below when Pillow is there
    write(folder / "photo.png", b"\x89PNG\r\n\x1a\n")
    from test_load import make_pdf

    write(folder / "scan.pdf", make_pdf([[], []]))  # two pages, no text layer
    args = ("--ocr", "off") if installed() else ()
    # The plan counts the file that would fail, and names it with its reason.
    dry = run_cli("build", folder, "--store", store, "--llm", "extractive", "--dry-run", *args)
    assert "1 to add, 0 to update, 0 to remove, 0 unchanged, 1 failing;" in dry.stdout, dry
    assert "failed    scan.pdf  no extractable text" in dry.stdout, dry
    result = run_cli("build", folder, "--store", store, "--llm", "extractive", "--json", *args)
    assert result.code == 3, result  # the scan fails, the rest is built
    data = result.json()
    assert data["documents"]["added"] == 1
    [failure] = data["failures"]
    assert failure["path"] == "scan.pdf" and "no extractable text" in failure["error"]
    # Both ways out, the first time: read it (the install command, word for word) or ignore it.
    assert ".docsumignore" in failure["error"], failure
    if installed():
        assert "(--ocr off)" in failure["error"], failure
    else:
        assert "install the OCR extra (pip install 'docsum[ocr]')" in failure["error"], failure
    skipped = {s["path"]: s["reason"] for s in data["skipped_files"]}
    assert "docsum[ocr]" in skipped["photo.png"]
    plain = run_cli("build", folder, "--store", store, "--llm", "extractive", *args)
    assert "1 needing OCR (docsum[ocr], --ocr) (.png 1)" in plain.stderr, plain.stderr
    # The second failure in a row says so, and names the ignore file once whoever names it.
    [line] = [x for x in plain.stderr.splitlines() if x.startswith("docsum: failed scan.pdf")]
    assert "failed 2 runs in a row" in line and line.count(".docsumignore") == 1, line


def _half_empty_pdf() -> bytes:
    """Page 1 a text layer, page 2 none (blank, or a scan: the text layer cannot tell)."""
    from test_load import make_pdf

    return make_pdf([TEXT_PAGE, []])


# Not "OCR extra" in the reason: CI fails the OCR run when a test skips for want of the extra (.ci/run).
without_ocr = pytest.mark.skipif(installed(), reason="what a user without docsum[ocr] sees; it is installed here")
NO_LAYER = "1 of 2 pages with no readable text layer, left empty"


@without_ocr
def test_without_the_extra_pages_with_no_text_layer_are_counted_as_such_with_how_to_read_them(
    tmp_path: Path,
) -> None:
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    write(folder / "letter.pdf", _half_empty_pdf())
    install = "install the OCR extra: pip install 'docsum[ocr]'"

    # The plan says it before anything is stored.
    dry = run_cli("build", folder, "--store", store, "--llm", "extractive", "--dry-run")
    assert dry.code == 0, dry
    [planned] = [x for x in dry.stdout.splitlines() if x.startswith("add       letter.pdf  ")]
    assert planned.endswith(f" nodes; {NO_LAYER}"), planned
    assert f"pages: {NO_LAYER}" in dry.stdout and install in dry.stderr, dry

    result = run_cli("build", folder, "--store", store, "--llm", "extractive")
    assert result.code == 0, result
    # No OCR here: nothing is said to be "by OCR", nor "unreadable" (nothing tried to read it).
    assert "OCR" not in result.stdout and "unreadable" not in result.stdout + result.stderr, result
    assert result.stdout.splitlines()[1] == f"pages: {NO_LAYER}", result.stdout
    [added] = [x for x in result.stderr.splitlines() if x.startswith("added     letter.pdf (")]
    assert added.endswith(f" nodes; {NO_LAYER})"), added
    # How to read them, on stderr: the install command, and that the stored document must be read again.
    [note] = [x for x in result.stderr.splitlines() if x.startswith("docsum: note: pages with no text layer")]
    assert "(letter.pdf)" in note and install in note and "`docsum remove` each of those files" in note, note

    write(folder / "letter.pdf", _half_empty_pdf() + b"\n")  # changed: read again, for --json
    data = run_cli("build", folder, "--store", store, "--llm", "extractive", "--json").json()
    assert data["pages"] == {"pages": 2, "text_layer": 1, "read_by_ocr": 0, "no_text": 1, "ocr": 0, "unreadable": 1}
    assert data["ocr_files"]["letter.pdf"]["no_text"] == 1
    assert data["ocr"] == {"requested": "auto", "installed": False, "in_effect": "off"}
    shown = run_cli("show", "letter.pdf", "--store", store)
    assert NO_LAYER in shown.stdout and "OCR" not in shown.stdout, shown


@needs_ocr
def test_with_the_extra_an_empty_page_is_one_ocr_found_nothing_on(tmp_path: Path) -> None:
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    write(folder / "letter.pdf", _half_empty_pdf())
    result = run_cli("build", folder, "--store", store, "--llm", "extractive")
    assert result.code == 0, result
    said = "1 of 2 pages unreadable: no readable text layer, and OCR found no text"
    assert result.stdout.splitlines()[1] == f"pages: {said}", result.stdout
    assert "pip install" not in result.stderr, result.stderr

    # --ocr off: the page was not tried, and the line says why.
    write(folder / "letter.pdf", _half_empty_pdf() + b"\n")
    off = run_cli("build", folder, "--store", store, "--llm", "extractive", "--ocr", "off", "--json")
    data = off.json()
    assert data["ocr"] == {"requested": "off", "installed": True, "in_effect": "off"}
    assert data["pages"]["no_text"] == 1 and data["pages"]["read_by_ocr"] == 0
    write(folder / "letter.pdf", _half_empty_pdf() + b"\n\n")
    plain = run_cli("build", folder, "--store", store, "--llm", "extractive", "--ocr", "off")
    assert f"pages: {NO_LAYER} (--ocr off)" in plain.stdout, plain


def _manifest() -> list[dict[str, Any]]:
    manifest = EVAL_PDFS / "manifest.jsonl"
    if not manifest.is_file():
        return []
    entries = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [e for e in entries if "expect_ocr" in e]


@needs_ocr
@pytest.mark.slow  # about 10 s a page on an idle machine
@pytest.mark.skipif(not EVAL_PDFS.is_dir(), reason="shared eval PDFs not present")
@pytest.mark.parametrize("entry", _manifest(), ids=lambda e: e["file"])
def test_eval_pdfs_that_need_ocr_recover_their_text(entry: dict[str, Any]) -> None:
    doc = load_file(EVAL_PDFS / entry["file"])
    assert entry["expect_ocr"] == "text"
    assert len(doc.text) >= entry["min_chars_ocr"], len(doc.text)
    assert doc.page_origins == "o" * entry["pages_pdfinfo"]
    missing = [w for w in entry["ocr_words"] if w.lower() not in doc.text.lower()]
    assert not missing, (missing, doc.text[:500])


def dense_scan(pages: int) -> bytes:
    """`pages` Letter pages at 200 dpi full of drawn lines: seconds of OCR each."""
    lines = [f"Line {n} of the harbour survey, with its soundings and tides." for n in range(40)]
    from PIL import Image

    images = []
    for _ in range(pages):
        page = Image.new("L", (1700, 2200), 255)
        page.paste(picture(lines[:20]), (100, 100))
        page.paste(picture(lines[20:]), (100, 1250))
        images.append(page)
    return saved(images[0], "PDF", resolution=200.0, save_all=True, append_images=images[1:])


@needs_ocr
def test_ocr_is_stopped_by_the_parse_timeout_and_by_sigint(tmp_path: Path) -> None:
    import signal
    import time
    import uuid

    from helpers import processes_with, spawn_cli, stored_paths, stored_so_far, subprocess_env, wait_for

    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    write(folder / "a-notes.txt", "Plain notes about the river survey.")
    write(folder / "b-scan.pdf", dense_scan(6))
    timed = run_cli("build", folder, "--store", store, "--llm", "extractive", "--jobs", "1", "--parse-timeout", "3")
    assert timed.code == 3, timed
    assert "docsum: failed b-scan.pdf: still being read after 3 s; stopped (see --parse-timeout)" in timed.stderr

    store = tmp_path / "t.sqlite"
    mark = f"DOCSUM_TEST_MARK={uuid.uuid4().hex}"
    proc = spawn_cli(
        "build",
        folder,
        "--store",
        store,
        "--llm",
        "extractive",
        "--jobs",
        "1",
        env=subprocess_env(**dict([mark.split("=")])),
    )
    try:
        wait_for(lambda: "a-notes.txt" in stored_so_far(store), timeout=60, what="the text file committed")
        time.sleep(2)  # the scan is now being read by OCR
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        stopped_after = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out, err)
    assert stopped_after < 10, stopped_after  # not after six pages of OCR
    assert "Traceback" not in err and stored_paths(store) == {"a-notes.txt"}
    wait_for(lambda: not processes_with(mark), timeout=10, what="every worker process gone")


SERIF = Path("/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf")


def word_errors(expected: list[str], found: list[str]) -> int:
    """Word-level edit distance: substituted, inserted and dropped words."""
    previous = list(range(len(found) + 1))
    for i, want in enumerate(expected, 1):
        current = [i] + [0] * len(found)
        for j, got in enumerate(found, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (want != got))
        previous = current
    return previous[-1]


@needs_ocr
@pytest.mark.skipif(not SERIF.is_file(), reason="DejaVu Serif (Debian's fonts-dejavu-core) is not installed")
def test_a_scanned_page_of_serif_print_keeps_its_word_spaces(tmp_path: Path) -> None:
    """The issue's goal: at most 3 % word errors on clean English print scanned
    at 200 dpi. With RapidOCR's line-box margin (unclip 1.6) and its scaling
    of a Letter page to 2000 px, the recognizer joined words ("theSoftware",
    "EXPRESSOR"): 21 errors in these 474 words (4.4 %); 6 with docsum's settings."""
    import textwrap

    from PIL import Image, ImageDraw, ImageFont

    text = " ".join((Path(__file__).parents[1] / "LICENSE").read_text().split())
    lines = textwrap.wrap(f"{text} {text} {text}", 78)[:40]  # a full page
    font = ImageFont.truetype(str(SERIF), 31)  # 11 pt at 200 dpi
    page = Image.new("L", (1700, 2200), 255)  # Letter
    draw = ImageDraw.Draw(page)
    for number, line in enumerate(lines):
        draw.text((150, 150 + 47 * number), line, font=font, fill=0)
    pdf = tmp_path / "license-scan.pdf"
    pdf.write_bytes(saved(page, "PDF", resolution=200.0))  # an image-only PDF, as a scanner writes
    doc = load_file(pdf)
    assert doc.page_origins == "o"
    expected, found = " ".join(lines).split(), doc.text.split()
    errors = word_errors(expected, found)
    assert errors <= 0.03 * len(expected), (errors, len(expected), doc.text)


@needs_ocr
def test_an_empty_page_is_not_given_to_the_ocr_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PDF ending on an empty page (two of the SEC 10-Qs do) is read without
    loading the engine: the page stays an empty slot, as when OCR finds nothing."""
    import pypdf
    from test_load import make_pdf

    import docsum.ingest.ocr as ocr

    def no_engine(threads: int) -> Any:
        raise AssertionError("the OCR engine was loaded for an empty page")

    monkeypatch.setattr(ocr, "_engine", no_engine)
    writer = pypdf.PdfWriter()
    for page in pypdf.PdfReader(io.BytesIO(make_pdf([TEXT_PAGE]))).pages:
        writer.add_page(page)
    writer.add_blank_page(612, 792)
    out = io.BytesIO()
    writer.write(out)
    path = tmp_path / "ends-blank.pdf"
    path.write_bytes(out.getvalue())
    doc = load_file(path)
    assert doc.page_origins == "t-"
    assert "harbour master" in doc.text
