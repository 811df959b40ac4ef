"""What reading one file yields (`LoadedDocument`) and how its title is found:
shared by the text and markup readers (docsum.ingest.load) and the PDF reader
(docsum.ingest.pdf), which load.py calls, so neither imports the other's module."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from docsum.ingest.discover import printable_name
from docsum.lexical import registrant, title_lines

_TITLE_MAX = 120


@dataclass
class LoadedDocument:
    text: str
    page_starts: list[int]  # [] for text files; PDF page i+1 starts at page_starts[i]
    title: str
    kind: str  # a value of docsum.ingest.formats.SUPPORTED_SUFFIXES: "pdf", "text", "markdown", "html", ...
    warnings: list[str] = field(default_factory=list)
    extractor: str = ""  # PDFs: the engine that produced the text ("pdfium" | "pypdf")
    # Paged documents: where each page's text came from, one character a page
    # (docsum.ingest.ocr: ORIGIN_TEXT "t", ORIGIN_OCR "o", ORIGIN_NONE "-");
    # "" for formats without pages.
    page_origins: str = ""


def paged_document(
    path: Path, texts: list[str], title: str | None, kind: str, warnings: list[str], extractor: str, origins: str
) -> LoadedDocument:
    """A document of pages: every page keeps its slot (an empty one if it
    yielded nothing) so page numbers in citations stay the real ones."""
    page_starts: list[int] = []
    offset = 0
    for idx, page_text in enumerate(texts):
        if idx:
            offset += 2  # the "\n\n" separator
        page_starts.append(offset)
        offset += len(page_text)
    text = "\n\n".join(texts)
    return LoadedDocument(
        text=text,
        page_starts=page_starts,
        title=title or first_line_title(text) or name_title(path),
        kind=kind,
        warnings=warnings,
        extractor=extractor,
        page_origins=origins,
    )


# --------------------------------------------------------------------------- titles

_ATX_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_FRONT_MATTER_TITLE = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.IGNORECASE)


def clip_title(raw: str) -> str:
    title = " ".join(raw.split())
    if len(title) <= _TITLE_MAX:
        return title
    cut = title[: _TITLE_MAX - 1]
    # Prefer ending on a word boundary when one is reasonably close.
    space = cut.rfind(" ")
    if space > _TITLE_MAX // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


def _front_matter(lines: list[str]) -> tuple[str | None, int]:
    """Title from YAML front matter, and the index of the first body line."""
    if not lines or lines[0].strip() != "---":
        return None, 0
    for idx in range(1, min(len(lines), 200)):
        if lines[idx].strip() in ("---", "..."):
            title = None
            for line in lines[1:idx]:
                m = _FRONT_MATTER_TITLE.match(line)
                if m:
                    title = m.group(1).strip("\"'").strip() or None
                    break
            return title, idx + 1
    return None, 0


def markdown_title(text: str) -> str | None:
    lines = text.split("\n", 2000)[:2000]
    fm_title, body_start = _front_matter(lines)
    if fm_title:
        return clip_title(fm_title)
    in_fence = False
    for idx in range(body_start, len(lines)):
        line = lines[idx]
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        m = _ATX_HEADING.match(line)
        if m and m.group(1).strip():
            return clip_title(m.group(1))
        # Setext heading: a text line underlined with === or ---.
        if idx + 1 < len(lines) and line.strip() and re.fullmatch(r" {0,3}(=+|-+)[ \t]*", lines[idx + 1]):
            return clip_title(line)
    if body_start:
        return first_line_title("\n".join(lines[body_start:]))
    return None


def name_title(path: Path) -> str:
    """The file's name as a last-resort title, storable even when the name is not UTF-8."""
    return printable_name(path.stem)


def first_line_title(text: str) -> str | None:
    """The title the first lines give, whole when it runs over two or three
    lines (docsum.lexical.title_lines); for an SEC filing, its registrant
    (docsum.lexical.registrant). Lines of pure punctuation (rules, "* * *",
    extraction debris) make poor titles and are passed over."""
    found = registrant(text) or (title_lines(text) or ("", 0))[0]
    return clip_title(found) if found else None


# Titles producers fill in by default; they say nothing about the document.
PLACEHOLDER_TITLES = frozenset({"title", "untitled", "untitled document", "document", "none", "unknown"})
