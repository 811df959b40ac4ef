"""Reading pictures of pages: the optional OCR engine (``pip install 'docsum[ocr]'``).

The engine is RapidOCR (PP-OCR detection and recognition models as ONNX,
run by onnxruntime). Its wheel carries the models; this module hands their
paths to it explicitly, so its "download a missing model" branch is never
taken and nothing leaves the machine (it has no telemetry). Everything here
runs in a parse worker (docsum.ingest.parsing): under that worker's time and
memory limits, killed with it on SIGINT.

A page reaches OCR as a greyscale numpy array (a PDF page rendered by PDFium,
or one frame of an image file). Both are capped in pixels before OCR, so a
page bomb (a 200-inch page, a 100,000-pixel-wide PNG) costs a bounded amount
of memory; a file with more pages than OCR_MAX_PAGES has the rest left unread
with a warning.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

# What the user installs; every message about missing OCR names it, and the
# command that installs it (the one docs/ocr.md and the other extras' messages use).
OCR_EXTRA = "docsum[ocr]"
OCR_INSTALL = f"pip install '{OCR_EXTRA}'"
MODE_AUTO, MODE_OFF, MODE_FORCE = "auto", "off", "force"
MODES = (MODE_AUTO, MODE_OFF, MODE_FORCE)
# The document kinds (docsum.ingest.formats) whose text OCR may change.
PAGED_KINDS = frozenset({"pdf", "image"})
# A page's text origin, one character per page in LoadedDocument.page_origins.
ORIGIN_TEXT, ORIGIN_OCR, ORIGIN_NONE = "t", "o", "-"

# Resolution a PDF page is rendered at for OCR. 200 dpi puts 10-point print
# at about 28 pixels a line, where the recognizer is accurate. 150 dpi saves
# little: the recognizer scales every line to 48 pixels high whatever the
# page's resolution, so only detection gets cheaper (measured: 5.9 instead of
# 6.0 CPU s a dense page, and 3 word errors instead of 1 on the prose).
RENDER_DPI = 200
# Pixels of one page image given to OCR: a Letter page at 200 dpi is 3.7
# million; anything larger is scaled down to this first (memory stays near
# 100 MB a page, whatever the file claims its page size is).
MAX_PAGE_PIXELS = 12_000_000
# Longest side RapidOCR keeps before it scales a picture down (its default is
# 2000): a Legal page (14 inches) at RENDER_DPI. See _engine.
MAX_SIDE_PIXELS = 2800
# Pages of one file OCR reads; at 2-10 s a page more would take hours, and
# a file claiming thousands of blank scanned pages is the classic page bomb.
OCR_MAX_PAGES = 1000
# A page image whose pixels all lie within this many grey levels of each
# other holds no print (an empty PDF page renders as 255 everywhere); a scan
# of an empty sheet, with its specks, still goes to OCR.
BLANK_RANGE = 16
# Recognized text below this confidence is dropped (RapidOCR's own default).
_MIN_SCORE = 0.5

_MODEL_FILES = {
    "Det": "PP-OCRv6_det_small.onnx",
    "Rec": "PP-OCRv6_rec_small.onnx",
    "Cls": "ch_ppocr_mobile_v2.0_cls_mobile.onnx",
}


class OcrUnavailable(Exception):
    """The OCR extra is not installed (or its models are missing)."""


@dataclass(frozen=True)
class PageCounts:
    """How a document's pages were read, from its page origins."""

    pages: int
    ocr: int
    unreadable: int

    @classmethod
    def of(cls, origins: str) -> PageCounts:
        return cls(len(origins), origins.count(ORIGIN_OCR), origins.count(ORIGIN_NONE))

    def __add__(self, other: PageCounts) -> PageCounts:
        return PageCounts(self.pages + other.pages, self.ocr + other.ocr, self.unreadable + other.unreadable)

    @property
    def text_layer(self) -> int:
        return self.pages - self.ocr - self.unreadable

    def describe(self, ocr_ran: bool | None = None) -> str:
        """How the pages were read, for a person; '' when every page had a text layer.

        ``ocr_ran``: OCR was there to read the pages without text (True), or
        was not (False: not installed, or ``--ocr off``); None when not known
        (a stored document). A page left empty is "unreadable" only when OCR
        tried it: otherwise it merely had no text layer, and saying "by OCR"
        of a machine without OCR misleads."""
        if not (self.ocr or self.unreadable):
            return ""
        of = f" of {self.pages} page{'s' if self.pages != 1 else ''}"
        if self.ocr:
            unreadable = f", {self.unreadable} unreadable" if self.unreadable else ""
            return f"{self.ocr}{of} by OCR{unreadable}"
        if ocr_ran:
            return f"{self.unreadable}{of} unreadable: no readable text layer, and OCR found no text"
        return f"{self.unreadable}{of} with no readable text layer, left empty"

    def as_dict(self) -> dict[str, int]:
        """The counts, named by what they count. ``ocr`` and ``unreadable``
        are the names earlier versions used, kept for the scripts that read
        them: the same numbers as ``read_by_ocr`` and ``no_text``."""
        return {
            "pages": self.pages,
            "text_layer": self.text_layer,
            "read_by_ocr": self.ocr,
            "no_text": self.unreadable,
            "ocr": self.ocr,
            "unreadable": self.unreadable,
        }


def ocr_pages(origins: str, pages: tuple[int, ...]) -> tuple[int, ...]:
    """Those of ``pages`` (1-based) whose text OCR read, by the document's ``origins``."""
    return tuple(p for p in pages if 0 < p <= len(origins) and origins[p - 1] == ORIGIN_OCR)


def installed() -> bool:
    """The OCR extra's packages can be imported (without importing them)."""
    return all(importlib.util.find_spec(name) is not None for name in ("rapidocr", "onnxruntime"))


def missing_reason() -> str:
    """The end of a message for a file that needs OCR when it is not installed."""
    return f"to read it with OCR, install the OCR extra ({OCR_INSTALL}); to skip it, list it in .docsumignore"


def wanted(mode: str) -> bool:
    """OCR is to run at all under ``mode`` (and can: the extra is installed)."""
    return mode != MODE_OFF and installed()


def effective_mode(mode: str) -> str:
    """``mode`` as it acts here: "off" when the extra is not installed."""
    return mode if wanted(mode) else MODE_OFF


@dataclass(frozen=True)
class PageImage:
    """One page to recognize: greyscale pixels, and a note when they were scaled down."""

    pixels: np.ndarray
    note: str = ""


def capped_scale(width: float, height: float, scale: float) -> float:
    """``scale`` for a ``width`` x ``height`` picture, lowered so the result
    holds at most MAX_PAGE_PIXELS pixels."""
    area = max(width, 1.0) * max(height, 1.0) * scale * scale
    if area <= MAX_PAGE_PIXELS:
        return scale
    return scale * math.sqrt(MAX_PAGE_PIXELS / area)


# --------------------------------------------------------------------------- the engine


_THREADS: list[int] = []  # set by the parse worker from its request (see set_threads)


def set_threads(threads: int) -> None:
    """onnxruntime threads for this process's OCR: the build gives each
    worker its share of the cores (two workers on two cores: one each), so
    parallel files do not fight over the same cores."""
    _THREADS[:] = [max(1, threads)]


def _threads() -> int:
    if _THREADS:
        return _THREADS[0]
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@functools.cache
def _engine(threads: int) -> Any:
    """One RapidOCR per worker process and thread count, built on first use
    (about a second: the models are loaded once, then serve every page)."""
    if not installed():
        raise OcrUnavailable(f"OCR is not installed ({OCR_EXTRA})")
    import rapidocr

    models = Path(rapidocr.__file__).parent / "models"
    # Measured by bench/ocr.py's engines step (bench/RESULTS.md section 14)
    # on four dense 10-Q pages and two pages of 11-point prose rendered at
    # 200 dpi, one onnxruntime thread: recognition took 83-93 % of the time,
    # detection the rest, docsum's layout under 0.01 s. RapidOCR's defaults
    # took 13.9 CPU s a dense page (12 % word errors on the prose), docsum's
    # settings before these 9.5 CPU s (5.4 %), these 6.0 CPU s (0.1 %), with
    # the same word recall on the 10-Q pages (0.9996).
    params: dict[str, Any] = {
        "Global.log_level": "error",
        # Upright print: the 180-degree line classifier only costs time.
        "Global.use_cls": False,
        # RapidOCR scales any picture whose longer side passes 2000 px down
        # first, and crops the lines for recognition from that copy: a Letter
        # page at 200 dpi (2200 px) lost a tenth of its resolution. Up to a
        # Legal page at RENDER_DPI (14 in, 2800 px) is now read as rendered;
        # small print reads better for it (10-Q recall with the two settings
        # below: 0.9988 scaled to 2000 px, 0.9996 as rendered).
        "Global.max_side_len": MAX_SIDE_PIXELS,
        # Det: the longer side at most 1280 px (measured: as accurate on a
        # 200-dpi page as the full size, and half the detection time).
        "Det.limit_type": "max",
        "Det.limit_side_len": 1280,
        # Each line's box grown by 2.0 (RapidOCR: 1.6) before it is cropped.
        # The recognizer scales every crop to 48 px high; a taller crop puts
        # more margin around the letters, which made it keep the spaces it
        # dropped at 1.6 ("theSoftware": 4.2 % word errors on the prose, 0.3 %
        # at 2.0) and makes each crop narrower after scaling (6.6 -> 6.2 CPU s
        # a dense page). 2.4 was faster still (5.5) but misread more of the
        # 10-Q's small print (recall 0.9971 against 0.9996).
        "Det.unclip_ratio": 2.0,
        # One line per recognizer run (RapidOCR: 6). A batch is padded to its
        # widest line and its output is lines x steps x 18,710 characters of
        # scores: 6 lines took 9.5 CPU s a dense page, 12 lines 12.1, 1 line
        # 6.6. Batching also changed the words read (the model sees the padding).
        "Rec.rec_batch_num": 1,
        # The worker's share of the cores (set_threads). Two threads on one
        # page cost 9.4 CPU s a dense page instead of 6.0 (load 3 on 2 cores:
        # waiting threads spin), so a core of its own per worker is cheapest.
        "EngineConfig.onnxruntime.intra_op_num_threads": max(1, threads),
        "EngineConfig.onnxruntime.inter_op_num_threads": 1,
    }
    for task, name in _MODEL_FILES.items():
        model = models / name
        if not model.is_file():
            # Never let RapidOCR fetch it: say what is wrong instead.
            raise OcrUnavailable(f"the OCR model {name} is missing from the rapidocr install; reinstall {OCR_EXTRA}")
        params[f"{task}.model_path"] = str(model)
    from rapidocr import RapidOCR

    return RapidOCR(params=params)


def blank(pixels: np.ndarray) -> bool:
    """No mark anywhere on the picture: its darkest and lightest pixels differ
    by less than BLANK_RANGE (an empty page, in any background colour)."""
    return pixels.size == 0 or int(pixels.max()) - int(pixels.min()) < BLANK_RANGE


def recognize(page: PageImage) -> str:
    """The text on ``page``, line by line in reading order ('' if none)."""
    if blank(page.pixels):
        # Nothing to read, and the engine not loaded for it: two of the 20 SEC
        # 10-Q PDFs end on an empty page (no text layer); loading RapidOCR for
        # it made the 20 files' build cost 38 % more CPU with the extra than
        # with --ocr off, 0-7 % once skipped (bench/ocr.py sec, within noise).
        return ""
    result = _engine(_threads())(page.pixels)
    boxes = getattr(result, "boxes", None)
    texts = getattr(result, "txts", None)
    scores = getattr(result, "scores", None)
    if boxes is None or not texts:
        return ""
    found = [
        (box, str(text))
        for box, text, score in zip(boxes, texts, scores or [1.0] * len(texts))
        if float(score) >= _MIN_SCORE and str(text).strip()
    ]
    return layout_lines([(_bounds(box), text) for box, text in found])


def _bounds(box: Any) -> tuple[float, float, float, float]:
    xs = [float(point[0]) for point in box]
    ys = [float(point[1]) for point in box]
    return min(xs), min(ys), max(xs), max(ys)


def layout_lines(pieces: list[tuple[tuple[float, float, float, float], str]]) -> str:
    """Recognized pieces (x0, y0, x1, y1 and text) as lines of text: pieces
    whose vertical middles fall within one line's height are one line, read
    left to right; a gap of more than a line's height between lines starts a
    new paragraph (a blank line), which the splitter treats as a boundary."""
    lines: list[list[tuple[tuple[float, float, float, float], str]]] = []
    for piece in sorted(pieces, key=lambda p: (p[0][1] + p[0][3]) / 2):
        (_, y0, _, y1), _ = piece
        middle = (y0 + y1) / 2
        if lines:
            last = lines[-1]
            top = min(b[1] for b, _ in last)
            bottom = max(b[3] for b, _ in last)
            if top <= middle <= bottom:
                last.append(piece)
                continue
        lines.append([piece])
    out: list[str] = []
    previous_bottom: float | None = None
    for line in lines:
        top = min(b[1] for b, _ in line)
        bottom = max(b[3] for b, _ in line)
        if previous_bottom is not None and top - previous_bottom > (bottom - top):
            out.append("")
        out.append(" ".join(text.strip() for _, text in sorted(line, key=lambda p: p[0][0])))
        previous_bottom = bottom
    return "\n".join(out)
