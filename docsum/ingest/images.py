"""Image files as documents: PNG, JPEG and TIFF (each frame of a multi-page
TIFF a page), read by OCR (docsum[ocr], which brings Pillow).

An image is untrusted like any file: its declared size is checked before a
pixel is decoded (Pillow reads only the header on open), a picture larger
than the page limit is scaled down before OCR, and a TIFF of thousands of
frames has only the first OCR_MAX_PAGES read.
"""

from __future__ import annotations

import io
import warnings as warnings_module
from pathlib import Path
from typing import Any

from docsum.errors import LoadError, one_line
from docsum.ingest.loaded import LoadedDocument, paged_document
from docsum.ingest.ocr import (
    MAX_PAGE_PIXELS,
    MODE_OFF,
    OCR_MAX_PAGES,
    ORIGIN_NONE,
    ORIGIN_OCR,
    OcrUnavailable,
    PageImage,
    capped_scale,
    installed,
    missing_reason,
    recognize,
)
from docsum.ingest.pdfocr import EXTRACTOR_OCR

# Declared pixels of one frame above which the file is refused undecoded:
# ten times the page limit covers a 600-dpi A3 scan; beyond it is a bomb.
MAX_DECLARED_PIXELS = 10 * MAX_PAGE_PIXELS


def load_image(path: Path, data: bytes, mode: str) -> LoadedDocument:  # noqa: C901 (listed when the check came in: simplify, then drop this)
    """The text OCR reads on each frame of the image ``data``."""
    label = str(path)
    if mode == MODE_OFF:
        raise LoadError(label, "an image, and OCR is off (--ocr off)")
    if not installed():
        raise LoadError(label, f"an image; {missing_reason()}")
    from PIL import Image

    try:
        with warnings_module.catch_warnings():
            # Pillow's own bomb check, at docsum's limit: an error past twice
            # it, a warning (silenced: _frame refuses it) in between.
            warnings_module.simplefilter("ignore", Image.DecompressionBombWarning)
            Image.MAX_IMAGE_PIXELS = MAX_DECLARED_PIXELS
            picture = Image.open(io.BytesIO(data))
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise LoadError(label, one_line(f"not a readable image ({type(exc).__name__}: {exc})")) from exc
    with picture:
        frames = int(getattr(picture, "n_frames", 1) or 1)
        warnings: list[str] = []
        if frames > OCR_MAX_PAGES:
            warnings.append(f"{frames} pages; only the first {OCR_MAX_PAGES} were read (a limit against page bombs)")
            frames = OCR_MAX_PAGES
        texts: list[str] = []
        origins: list[str] = []
        for index in range(frames):
            try:
                picture.seek(index)
                page = _frame(picture, index + 1, frames)
            except LoadError as exc:
                raise LoadError(label, exc.reason) from exc
            except (OSError, ValueError, EOFError, Image.DecompressionBombError) as exc:
                raise LoadError(
                    label, one_line(f"damaged image: page {index + 1} ({type(exc).__name__}: {exc})")
                ) from exc
            if page.note and len(warnings) < 4:
                warnings.append(page.note)
            try:
                text = recognize(page)
            except OcrUnavailable as exc:
                raise LoadError(label, str(exc)) from exc
            readable = any(ch.isalnum() for ch in text)
            texts.append(text if readable else "")
            origins.append(ORIGIN_OCR if readable else ORIGIN_NONE)
    if ORIGIN_OCR not in origins:
        raise LoadError(label, "no text: OCR found no text in the image")
    return paged_document(path, texts, None, "image", warnings, EXTRACTOR_OCR, "".join(origins))


def _frame(picture: Any, number: int, frames: int) -> PageImage:
    """The current frame as greyscale pixels, at most MAX_PAGE_PIXELS."""
    import numpy as np

    width, height = picture.size
    where = f"page {number}: " if frames > 1 else ""
    if width * height > MAX_DECLARED_PIXELS:
        raise LoadError(
            "", f"{where}an image of {width} x {height} pixels, more than docsum reads ({MAX_DECLARED_PIXELS:,})"
        )
    scale = capped_scale(width, height, 1.0)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    if scale < 1.0 and picture.format == "JPEG":
        picture.draft("L", size)  # JPEG decodes at a fraction of its size directly
    grey = picture.convert("L")
    note = ""
    if grey.size != size and scale < 1.0:
        grey = grey.resize(size)
        note = f"{where}{width} x {height} pixels; scaled down for OCR to stay within the pixel limit"
    return PageImage(np.asarray(grey), note)
