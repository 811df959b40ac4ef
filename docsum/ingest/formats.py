"""Which file suffixes docsum reads, and as what kind of document.

Discovery uses this to decide what to pick up and the loader to decide how to
read it, so the two can never disagree.
"""

from __future__ import annotations

import os
from pathlib import Path

SUPPORTED_SUFFIXES: dict[str, str] = {
    ".txt": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".rst": "rst",  # read as plain text: its markup is light and readable
    ".csv": "csv",  # read as plain text: one record a line, as a person reads it
    ".pdf": "pdf",
    ".html": "html",
    ".htm": "html",
    ".docx": "docx",
    # Pictures of pages, read by OCR (docsum[ocr]); without it discovery skips
    # them with one note (docsum.ingest.discover), as most images in a folder
    # are not documents.
    ".png": "image",
    ".jpg": "image",
    ".jpeg": "image",
    ".tif": "image",
    ".tiff": "image",
}
IMAGE_KIND = "image"


def kind_for(path: Path | str) -> str | None:
    """The document kind for ``path``'s suffix, or None when docsum does not read it.
    A string is split as text (a walk over 100,000 files need not parse a Path
    for each just to read its suffix)."""
    if isinstance(path, str):
        suffix = os.path.splitext(path)[1]
        # pathlib's rule: a name ending in "." has no suffix.
        return SUPPORTED_SUFFIXES.get(suffix.lower()) if len(suffix) > 1 else None
    return SUPPORTED_SUFFIXES.get(path.suffix.lower())
