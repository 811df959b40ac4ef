"""Which file suffixes docsum reads, and as what kind of document.

Discovery uses this to decide what to pick up and the loader to decide how to
read it, so the two can never disagree.
"""

from __future__ import annotations

from pathlib import Path

SUPPORTED_SUFFIXES: dict[str, str] = {
    ".txt": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".pdf": "pdf",
}


def kind_for(path: Path) -> str | None:
    """The document kind for ``path``'s suffix, or None when docsum does not read it."""
    return SUPPORTED_SUFFIXES.get(path.suffix.lower())
