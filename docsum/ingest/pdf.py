"""Text out of PDF files: PDFium first, pypdf where it does better.

PDFium (through pypdfium2, the engine in Chromium) extracts text about twenty
times faster than pypdf and opens real files pypdf refuses.  pypdf stays for
what PDFium cannot do: files it refuses to open (it then gets a second
chance with pypdf's own repair logic) and files where PDFium finds no text at
all.  Which engine produced a document's text is recorded in
``LoadedDocument.extractor``.

Both engines run on untrusted bytes.  pypdf's safety limits are raised to what
real filings need (10-Qs hold content arrays of several hundred thousand
elements) but stay finite; the worker process that calls this module also has
an address-space limit and a time limit (see docsum.ingest.parsing).
"""

from __future__ import annotations

import io
import logging
import re
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docsum.errors import LoadError, one_line
from docsum.ingest.loaded import PLACEHOLDER_TITLES, LoadedDocument, clip_title, paged_document
from docsum.ingest.ocr import MODE_AUTO, MODE_OFF, ORIGIN_NONE, ORIGIN_TEXT, missing_reason, wanted
from docsum.ingest.tables import layout_page_text
from docsum.ingest.textquality import PARTLY_READ, garbage_reason

if TYPE_CHECKING:
    import pypdf

# pypdf logs a warning for every small spec violation (hundreds for some real
# files); they would drown docsum's own progress output.  Problems that matter
# reach the user through LoadedDocument.warnings or LoadError instead.
logging.getLogger("pypdf").setLevel(logging.ERROR)

# How the failure of a PDF without a text layer starts (without OCR).
NO_TEXT = "no extractable text (scanned or image-only PDF?)"
EXTRACTOR_PDFIUM = "pdfium"
EXTRACTOR_PYPDF = "pypdf"

# pypdf's defaults are tuned for hostile input: at most 100,000 elements in an
# array, which one company's 10-Q filings exceed.  Ten times that opens every
# real file we have and keeps the worst case near 100 MB of parsed objects;
# pypdf's per-stream parsing budget (2 million tokens) and its decompression
# limits stay as they are and still bound a hostile file.
PYPDF_ARRAY_LIMIT = 1_000_000

_FAILED_PAGE_WARNINGS = 3
_FILENAME_LIKE = re.compile(r".*\.(pdf|docx?|odt|rtf|txt|tex|dvi|ps|indd|pptx?|xlsx?|html?)$", re.IGNORECASE)
# Characters that mean the extraction failed: C0 controls (PDFium's output for
# glyphs whose font has no Unicode map) and U+FFFD.
_GARBLED = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f\ufffd]")
_CONTROLS = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f]")
_NON_SPACE = re.compile(r"\S")
# Above this share of garbled characters PDFium's text is compared with pypdf's.
_GARBLED_LIMIT = 0.05
# A str never holds a valid surrogate pair (they are combined into one code
# point), so any surrogate left is a lone one: SQLite and UTF-8 output refuse it.
_SURROGATE = re.compile("[\ud800-\udfff]")


class _NeedsPassword(Exception):
    """PDFium could not open the file without a password."""


@dataclass
class PdfPages:
    texts: list[str]
    warnings: list[str]
    metadata_title: str | None
    garbled: float = 0.0  # share of the raw characters that were control characters or U+FFFD
    # The same share, page by page (empty: not measured).
    page_garbled: list[float] = field(default_factory=list)


def _garbled_share(raw_pages: list[str]) -> float:
    visible = sum(len(_NON_SPACE.findall(page)) for page in raw_pages)
    bad = sum(len(_GARBLED.findall(page)) for page in raw_pages)
    return bad / visible if visible else 0.0


def _pages(texts: list[str], warnings: list[str], title: str | None, raw_pages: list[str]) -> PdfPages:
    return PdfPages(texts, warnings, title, _garbled_share(raw_pages), [_garbled_share([raw]) for raw in raw_pages])


def _reads(pages: PdfPages, index: int) -> bool:
    """Page `index` of `pages` holds readable text: words, not control codes,
    glyph names or symbol soup (docsum.ingest.textquality)."""
    if index >= len(pages.texts) or not _has_text([pages.texts[index]]):
        return False
    if index < len(pages.page_garbled) and pages.page_garbled[index] > _GARBLED_LIMIT:
        return False
    return garbage_reason(pages.texts[index]) is None


def _page_by_page(path: Path, engines: list[PdfPages]) -> LoadedDocument | None:
    """For a file whose fonts an engine garbles: each page from the first
    engine that reads it. A page no engine reads keeps an empty slot (page
    numbers stay true) and the document carries the warning "only part of
    the text could be read", naming those pages. None when no page reads:
    the whole text then goes to the build's garbage check, which refuses it.

    pdfjs-TAMReview.pdf is the case: PDFium reads its first page (title,
    author, abstract) and its last, and returns control codes for the rest;
    pypdf returns glyph names (/g145/g137…) throughout."""
    total = max(len(p.texts) for p in engines)
    texts: list[str] = []
    unreadable: list[int] = []
    used: dict[int, int] = {}
    for index in range(total):
        reader = next((n for n, pages in enumerate(engines) if _reads(pages, index)), None)
        if reader is None:
            texts.append("")
            if any(index < len(p.texts) and p.texts[index].strip() for p in engines):
                unreadable.append(index + 1)
            continue
        texts.append(engines[reader].texts[index])
        used[reader] = used.get(reader, 0) + 1
    if not used:
        return None
    main = max(used, key=lambda n: used[n])
    chosen = PdfPages(texts, list(engines[main].warnings), engines[main].metadata_title)
    if unreadable:
        from docsum.citations import page_ranges

        chosen.warnings.insert(
            0,
            (
                f"{PARTLY_READ}: {page_ranges(unreadable)} of {total} came out as glyph codes "
                "or symbols (a broken font encoding) and are left empty"
            ),
        )
    return _document(path, chosen, EXTRACTOR_PDFIUM if main == 0 else EXTRACTOR_PYPDF)


def load_pdf(path: Path, data: bytes, ocr: str = MODE_AUTO) -> LoadedDocument:
    """The text of the PDF ``data`` (read from ``path``), one slot per page;
    pages without a readable text layer are read by OCR as ``ocr`` says
    (docsum.ingest.pdfocr)."""
    if not wanted(ocr):
        return _text_layer(path, data, ocr)
    from docsum.ingest.pdfocr import with_ocr

    try:
        layer: LoadedDocument | None = _text_layer(path, data, ocr)
    except LoadError as exc:
        if not exc.reason.startswith(NO_TEXT):
            raise
        layer = None
    return with_ocr(path, data, layer, ocr)


def _text_layer(path: Path, data: bytes, ocr: str) -> LoadedDocument:  # noqa: C901 (listed when the check came in: simplify, then drop this)
    """The PDF's own text, from whichever engine reads it best."""
    label = str(path)
    pdfium_problem = ""
    pdfium: PdfPages | None = None
    try:
        pdfium = pdfium_pages(data)
        if _has_text(pdfium.texts) and pdfium.garbled <= _GARBLED_LIMIT:
            return _document(path, pdfium, EXTRACTOR_PDFIUM)
        pdfium_problem = "garbled" if _has_text(pdfium.texts) else "no text"
    except _NeedsPassword:
        # pypdf tries the empty password with every algorithm it knows; PDFium
        # already did, so this mostly yields the same verdict with pypdf's wording.
        pdfium_problem = "password"
    except LoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - PDFium refused the file; pypdf may still repair it
        pdfium_problem = one_line(f"{type(exc).__name__}: {exc}")
    try:
        fallback = pypdf_pages(label, data)
    except LoadError as exc:
        if pdfium is not None and pdfium_problem == "garbled":
            # Garbled beats nothing; its readable pages beat garbled.
            return _page_by_page(path, [pdfium]) or _document(path, pdfium, EXTRACTOR_PDFIUM)
        if pdfium_problem == "no text":
            raise LoadError(label, _no_text(ocr)) from exc
        not_pdf = not_a_pdf(data)
        if not_pdf:
            # "damaged PDF: PdfStreamError" would send the user hunting for a
            # repair tool when the file is a saved web page or a renamed .docx.
            raise LoadError(label, not_pdf) from exc
        raise
    if pdfium is not None and pdfium_problem == "garbled":
        mixed = _page_by_page(path, [pdfium, fallback])
        if mixed is not None:
            return mixed
    if (
        pdfium is not None
        and pdfium_problem == "garbled"
        and (not _has_text(fallback.texts) or fallback.garbled >= pdfium.garbled)
    ):
        return _document(path, pdfium, EXTRACTOR_PDFIUM)
    if not _has_text(fallback.texts):
        raise LoadError(label, _no_text(ocr))
    if pdfium_problem not in ("no text", "password", "garbled"):
        fallback.warnings.insert(0, one_line(f"PDFium could not open the file ({pdfium_problem}); read with pypdf"))
    return _document(path, fallback, EXTRACTOR_PYPDF)


def _no_text(ocr: str) -> str:
    if ocr == MODE_OFF:
        return f"{NO_TEXT}; not read by OCR (--ocr off); to skip it, list it in .docsumignore"
    return f"{NO_TEXT}; {missing_reason()}"


# What a file named .pdf that is not one usually is, by its first bytes.
_OTHER_FORMATS: tuple[tuple[bytes, str], ...] = (
    (b"<!doctype html", "an HTML page"),
    (b"<html", "an HTML page"),
    (b"<?xml", "an XML file"),
    (b"pk\x03\x04", "a ZIP archive (a .docx, .xlsx or .epub?)"),
    (b"\x89png", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"{", "JSON or text"),
)


def not_a_pdf(data: bytes) -> str | None:
    """Why ``data`` is not a PDF at all, or None when it carries the PDF
    signature. Readers accept "%PDF-" anywhere in the first KiB, so does this."""
    if b"%PDF-" in data[:1024]:
        return None
    head = data[:64].lstrip().lower()
    kind = next((name for magic, name in _OTHER_FORMATS if head.startswith(magic)), None)
    return f"not a PDF: no %PDF- signature; the file looks like {kind}" if kind else "not a PDF: no %PDF- signature"


def _has_text(texts: list[str]) -> bool:
    return any(ch.isalnum() for page in texts for ch in page)


def clean_extracted(raw: str) -> str:
    """Page text as docsum stores it: LF newlines, no control characters
    (broken font encodings; they upset SQLite FTS, prompts and terminals), no
    lone surrogates."""
    text = raw.replace("\r\n", "\n").replace("\r", "\n")
    # PDFium gives a hyphen that ended a line as U+FFFE, a noncharacter:
    # answers quoted "asset\ufffebacked securities" and "the write\ufffeoff".
    text = text.replace("\ufffe", "-")
    text = _CONTROLS.sub("", text)
    return _SURROGATE.sub("\ufffd", text).strip()


def _document(path: Path, pages: PdfPages, extractor: str) -> LoadedDocument:
    origins = "".join(ORIGIN_TEXT if _has_text([page]) else ORIGIN_NONE for page in pages.texts)
    return paged_document(path, pages.texts, pages.metadata_title, "pdf", pages.warnings, extractor, origins)


def _usable_title(raw: object) -> str | None:
    if not isinstance(raw, str):
        return None
    title = " ".join(_SURROGATE.sub("\ufffd", raw).split())
    for prefix in ("Microsoft Word - ", "Microsoft PowerPoint - "):
        if title.startswith(prefix):
            title = title[len(prefix) :]
    # Producers often store the source file name or a template placeholder.
    if not title or title.lower() in PLACEHOLDER_TITLES or _FILENAME_LIKE.fullmatch(title):
        return None
    return clip_title(title)


class _PageFailures:
    """Collects per-page extraction failures into at most a few warnings."""

    def __init__(self) -> None:
        self.pages: list[int] = []
        self.warnings: list[str] = []

    def add(self, number: int, exc: BaseException) -> None:
        self.pages.append(number)
        if len(self.pages) <= _FAILED_PAGE_WARNINGS:
            self.warnings.append(one_line(f"page {number}: text extraction failed ({type(exc).__name__}: {exc})"))

    def finish(self, label: str, total: int) -> list[str]:
        if len(self.pages) > _FAILED_PAGE_WARNINGS:
            self.warnings.append(f"text extraction failed on {len(self.pages)} of {total} pages")
        if total and len(self.pages) == total:
            first = self.warnings[0].split("(", 1)[-1].rstrip(")") if self.warnings else ""
            limit = "exceeds docsum's safety limits" if "LimitReachedError" in first else "damaged PDF"
            raise LoadError(label, one_line(f"{limit}: text extraction failed on all {total} pages ({first})"))
        return self.warnings


# --------------------------------------------------------------------------- PDFium


def pdfium_pages(data: bytes) -> PdfPages:
    import pypdfium2  # here, not at the top: `docsum ask` never reads a PDF

    try:
        document = pypdfium2.PdfDocument(data)
    except pypdfium2.PdfiumError as exc:
        if "password" in str(exc).lower():
            raise _NeedsPassword() from exc
        raise
    try:
        total = len(document)
        if total == 0:
            raise ValueError("no pages")
        failures = _PageFailures()
        texts: list[str] = []
        raw_pages: list[str] = []
        for index in range(total):
            try:
                page = document[index]
                try:
                    textpage = page.get_textpage()
                    try:
                        raw = layout_page_text(textpage, textpage.get_text_range(errors="replace"))
                    finally:
                        textpage.close()
                finally:
                    page.close()
            except Exception as exc:  # noqa: BLE001 - one bad page must not cost the others
                failures.add(index + 1, exc)
                raw = ""
            raw_pages.append(raw)
            texts.append(clean_extracted(raw))
        if len(failures.pages) == total:
            raise ValueError(f"text extraction failed on all {total} pages")
        warnings = failures.finish("", total)
        try:
            title = _usable_title(document.get_metadata_value("Title"))
        except Exception:  # noqa: BLE001 - metadata is optional; a broken Info dict must not fail the file
            title = None
        return _pages(texts, warnings, title, raw_pages)
    finally:
        document.close()


# --------------------------------------------------------------------------- pypdf


def _pypdf_limits() -> AbstractContextManager[Any]:
    import pypdf

    return pypdf.apply_configuration(array_maximum_element_count=PYPDF_ARRAY_LIMIT)


def _damaged(label: str, exc: BaseException) -> LoadError:
    cause = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if type(exc).__name__ == "LimitReachedError":
        # Not the file's fault as far as anyone can tell: say which guard stopped it.
        return LoadError(label, one_line(f"PDF exceeds docsum's safety limits ({exc})"))
    return LoadError(label, one_line("damaged PDF: " + cause))


def _aes_reason() -> str:
    # pypdf needs the optional 'cryptography' package for AES; without it we
    # cannot even try the empty password, so the password may or may not matter.
    return "encrypted PDF (AES); needs a password or the 'cryptography' package to open"


def _open_pypdf(label: str, data: bytes) -> pypdf.PdfReader:
    import pypdf

    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        encrypted = reader.is_encrypted
    except pypdf.errors.DependencyError as exc:
        raise LoadError(label, _aes_reason()) from exc
    except pypdf.errors.FileNotDecryptedError as exc:
        raise LoadError(label, "encrypted PDF; needs a password") from exc
    except Exception as exc:  # noqa: BLE001 - pypdf raises many types (incl. RecursionError) for damage
        raise _damaged(label, exc) from exc
    if encrypted:
        try:
            # Many PDFs are encrypted only to set permissions and open with an
            # empty user password.
            result = reader.decrypt("")
        except pypdf.errors.DependencyError as exc:
            raise LoadError(label, _aes_reason()) from exc
        except Exception as exc:  # noqa: BLE001
            raise _damaged(label, exc) from exc
        if result == pypdf.PasswordType.NOT_DECRYPTED:
            raise LoadError(label, "encrypted PDF; needs a password")
    return reader


def pypdf_pages(label: str, data: bytes) -> PdfPages:
    import pypdf

    with _pypdf_limits():
        reader = _open_pypdf(label, data)
        try:
            pages = list(reader.pages)
        except pypdf.errors.FileNotDecryptedError as exc:
            raise LoadError(label, "encrypted PDF; needs a password") from exc
        except Exception as exc:  # noqa: BLE001
            raise _damaged(label, exc) from exc
        if not pages:
            raise LoadError(label, "damaged PDF: no pages")
        failures = _PageFailures()
        texts: list[str] = []
        raw_pages: list[str] = []
        for number, page in enumerate(pages, start=1):
            try:
                raw = page.extract_text() or ""
            except pypdf.errors.FileNotDecryptedError as exc:
                raise LoadError(label, "encrypted PDF; needs a password") from exc
            except Exception as exc:  # noqa: BLE001 - one bad page must not cost the others
                failures.add(number, exc)
                raw = ""
            raw_pages.append(raw)
            texts.append(clean_extracted(raw))
        warnings = failures.finish(label, len(pages))
        try:
            meta = reader.metadata
            title = _usable_title(meta.title if meta is not None else None)
        except Exception:  # noqa: BLE001 - metadata is optional; a broken Info dict must not fail the file
            title = None
    return _pages(texts, warnings, title, raw_pages)
