"""OCR for the pages of a PDF that have no readable text layer.

docsum.ingest.pdf reads the text layer first; this module then renders,
with PDFium, each page that needs OCR (``--ocr auto``: a page with no text,
or text the garbage check rejects; ``--ocr force``: every page) and puts the
recognized text in that page's slot. A page OCR cannot read either stays an
empty slot, so page numbers stay true; the document's ``page_origins`` says
which pages came from where.
"""

from __future__ import annotations

from pathlib import Path

from docsum.errors import LoadError, one_line
from docsum.ingest.loaded import LoadedDocument, paged_document
from docsum.ingest.ocr import (
    MODE_AUTO,
    MODE_FORCE,
    OCR_MAX_PAGES,
    ORIGIN_NONE,
    ORIGIN_OCR,
    ORIGIN_TEXT,
    RENDER_DPI,
    OcrUnavailable,
    PageImage,
    capped_scale,
    recognize,
)
from docsum.ingest.textquality import PARTLY_READ, garbage_reason

EXTRACTOR_OCR = "ocr"
# Page sizes are in PDF points (1/72 inch).
_POINTS_PER_INCH = 72.0


def _page_texts(layer: LoadedDocument) -> list[str]:
    starts = layer.page_starts
    ends = [start - 2 for start in starts[1:]] + [len(layer.text)]  # less the "\n\n" between pages
    return [layer.text[start:end] for start, end in zip(starts, ends)]


def needs_ocr(text: str, mode: str) -> bool:
    """A page whose text layer holds ``text`` is read by OCR under ``mode``."""
    if mode == MODE_FORCE:
        return True
    return not any(ch.isalnum() for ch in text) or garbage_reason(text) is not None


def with_ocr(path: Path, data: bytes, layer: LoadedDocument | None, mode: str) -> LoadedDocument:  # noqa: C901 (listed when the check came in: simplify, then drop this)
    """``layer`` (the text layer, None when the PDF has none) with its
    unreadable pages, or every page under ``--ocr force``, read by OCR."""
    if layer is not None and not any(needs_ocr(text, mode) for text in _page_texts(layer)):
        return layer  # every page reads: nothing to render (the common case costs no second open)
    import pypdfium2

    label = str(path)
    try:
        document = pypdfium2.PdfDocument(data)
    except pypdfium2.PdfiumError as exc:
        if layer is not None:
            return layer  # pypdf read it, PDFium cannot render it: the text layer is all there is
        raise LoadError(label, one_line(f"cannot render the PDF for OCR ({exc})")) from exc
    try:
        total = len(document)
        texts = _page_texts(layer) if layer is not None else [""] * total
        texts += [""] * (total - len(texts))
        origins = list(layer.page_origins if layer is not None else "")
        origins += [ORIGIN_NONE] * (total - len(origins))
        todo = [index for index in range(total) if needs_ocr(texts[index], mode)]
        warnings = list(layer.warnings) if layer is not None else []
        if todo:
            # The pages that warning names as left empty are read by OCR now;
            # the page counts say what stays unread.
            warnings = [w for w in warnings if not w.startswith(PARTLY_READ)]
        if len(todo) > OCR_MAX_PAGES:
            warnings.append(
                f"{len(todo)} pages need OCR; only the first {OCR_MAX_PAGES} were read (a limit against page bombs)"
            )
            todo = todo[:OCR_MAX_PAGES]
        notes: list[str] = []
        for index in todo:
            page = document[index]
            try:
                image = _render(page, index + 1)
            finally:
                page.close()
            if image.note:
                notes.append(image.note)
            try:
                recognized = recognize(image)
            except OcrUnavailable as exc:
                raise LoadError(label, str(exc)) from exc
            if any(ch.isalnum() for ch in recognized):
                texts[index], origins[index] = recognized, ORIGIN_OCR
            elif needs_ocr(texts[index], MODE_AUTO):
                # Neither the text layer nor OCR reads it: an empty slot. (A
                # good text layer that forced OCR found nothing on is kept.)
                texts[index], origins[index] = "", ORIGIN_NONE
        warnings.extend(notes[:3])
        if len(notes) > 3:
            warnings.append(f"{len(notes)} pages were scaled down for OCR (page size over the pixel limit)")
        title = layer.title if layer is not None and ORIGIN_TEXT in origins else None
    finally:
        document.close()
    if not any(origin != ORIGIN_NONE for origin in origins):
        raise LoadError(label, "no extractable text: no text layer, and OCR found none on any page")
    extractor = layer.extractor if layer is not None and ORIGIN_TEXT in origins else EXTRACTOR_OCR
    return paged_document(path, texts, title, "pdf", warnings, extractor, "".join(origins))


def _render(page: object, number: int) -> PageImage:
    """The page as a greyscale picture at RENDER_DPI, or smaller when that
    would pass the pixel limit (a page bomb declares a page 200 inches wide)."""
    width, height = page.get_size()  # type: ignore[attr-defined]
    wanted = RENDER_DPI / _POINTS_PER_INCH
    scale = capped_scale(width, height, wanted)
    note = ""
    if scale < wanted:
        note = (
            f"page {number} is {width / _POINTS_PER_INCH:.0f} x {height / _POINTS_PER_INCH:.0f} inches; "
            f"read by OCR at {scale * _POINTS_PER_INCH:.0f} dpi to stay within the pixel limit"
        )
    bitmap = page.render(scale=scale, grayscale=True)  # type: ignore[attr-defined]
    try:
        pixels = bitmap.to_numpy().copy()  # the bitmap's buffer is freed on close
    finally:
        bitmap.close()
    if pixels.ndim == 3:
        pixels = pixels[:, :, 0]
    return PageImage(pixels, note)
