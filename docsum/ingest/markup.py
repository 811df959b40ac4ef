"""Text out of HTML pages and Word (.docx) documents.

Both come out as plain text with Markdown-style structure: headings become
``#`` lines, list items ``- `` lines, table rows cells joined by `` | ``,
paragraphs are separated by a blank line.  The splitter and the summaries
then see the document's structure, not its markup; scripts, styles and other
non-content elements are dropped.

Every failure is a ``LoadError`` with a one-line reason naming what is wrong
with the file.  The parsers (beautifulsoup4 on lxml, python-docx) are imported
only when such a file is read.
"""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docsum.errors import LoadError, one_line

if TYPE_CHECKING:
    import bs4

# Elements whose content is never document text.
_NON_CONTENT = frozenset(
    {"script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "head", "nav", "button", "select"}
)
# Elements that start a new paragraph-like block.
_BLOCKS = frozenset(
    {
        "p",
        "div",
        "section",
        "article",
        "main",
        "header",
        "footer",
        "aside",
        "blockquote",
        "pre",
        "ul",
        "ol",
        "dl",
        "table",
        "caption",
        "figure",
        "figcaption",
        "form",
        "fieldset",
        "address",
        "details",
        "summary",
        "hr",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
    }
)
# Elements that are one line of an enclosing block (list items).
_LINES = frozenset({"li", "dt", "dd"})
_EMPTY_ITEMS = frozenset({"-", "#", "##", "###", "####", "#####", "######"})
_WHITESPACE = re.compile(r"\s+")
_BLANK_RUNS = re.compile(r"\n{3,}")
# An unpacked .docx part larger than this is refused before parsing: a few
# kilobytes of zip can unpack to gigabytes (a "zip bomb").  The largest real
# reports and books stay far below it.
DOCX_MAX_UNPACKED = 256 * 1024 * 1024
# Word stores a text box twice: a modern copy and, under mc:Fallback, a legacy one.
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_ZIP_MAGIC = b"PK\x03\x04"
_OLE_MAGIC = bytes.fromhex("d0cf11e0a1b11ae1")
_UTF_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")


@dataclass
class Extracted:
    text: str
    title: str | None = None  # from the file's own metadata or first heading
    warnings: list[str] = field(default_factory=list)


def _tidy(text: str) -> str:
    """Trim every line and keep at most one blank line between blocks."""
    lines = [line.strip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    lines = [line for line in lines if line not in _EMPTY_ITEMS]  # list items whose content was dropped
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()


# --------------------------------------------------------------------------- HTML


def read_html(path: Path, data: bytes) -> Extracted:
    """Headings, paragraphs, lists and tables of an HTML page, as text."""
    if b"\x00" in data[:4096] and not data.startswith(_UTF_BOMS[1:]):
        raise LoadError(str(path), "binary content, not an HTML page")
    from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning

    try:
        with warnings.catch_warnings():
            # A page whose whole text looks like a URL or a file name: bs4
            # fears it was handed a location, but docsum always hands it the
            # content. Its twenty-line advice carries nothing for a user.
            warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
            soup = BeautifulSoup(data, "lxml")
    except Exception as exc:  # noqa: BLE001 - the parser is lenient; anything it raises is this file's damage
        raise LoadError(str(path), one_line(f"damaged HTML: {type(exc).__name__}: {exc}")) from exc
    title_tag = soup.find("title")
    title = title_tag.get_text(" ", strip=True) if title_tag is not None else None
    return Extracted(text=_tidy("".join(_html_pieces(soup))), title=title or None)


def _html_pieces(soup: bs4.BeautifulSoup) -> list[str]:  # noqa: C901 (listed when the check came in: simplify, then drop this)
    """The page's text in document order, with Markdown-style markers and line
    breaks where the blocks are.

    One read-only pass with an explicit stack: editing the tree in place costs
    quadratic time on real pages, and recursion would fail on deeply nested
    (hostile) markup."""
    from bs4 import NavigableString, Tag
    from bs4.element import PreformattedString

    pieces: list[str] = []
    # Entries: (node, inside <pre>), or (text to emit when a block closes, None).
    stack: list[tuple[object, bool | None]] = [(child, False) for child in reversed(soup.contents)]
    while stack:
        node, in_pre = stack.pop()
        if in_pre is None:
            pieces.append(str(node))
        elif isinstance(node, PreformattedString):
            continue  # comments, doctype, CDATA, processing instructions
        elif isinstance(node, NavigableString):
            # Source line breaks inside a paragraph are just spaces.
            pieces.append(str(node) if in_pre else _WHITESPACE.sub(" ", str(node)))
        elif isinstance(node, Tag):
            name = node.name
            if name in _NON_CONTENT or node.has_attr("hidden"):
                continue
            if name == "br":
                pieces.append("\n")
                continue
            if name == "tr":
                cells = (" ".join(cell.get_text(" ").split()) for cell in node.find_all(("td", "th")))
                pieces.append(" | ".join(c for c in cells if c) + "\n")  # the table's block opened the line
                continue
            if name in _LINES:
                pieces.append("\n- " if name == "li" else "\n")
            elif name in _BLOCKS:
                pieces.append("\n\n")
                if len(name) == 2 and name[0] == "h" and name[1].isdigit():
                    pieces.append("#" * int(name[1]) + " ")
                stack.append(("\n\n", None))
            stack.extend((child, in_pre or name == "pre") for child in reversed(node.contents))
    return pieces


# --------------------------------------------------------------------------- Word


def read_docx(path: Path, data: bytes) -> Extracted:
    """Headings, paragraphs, list items and tables of a .docx, in order."""
    if not data.startswith(_ZIP_MAGIC):
        if data.startswith(_OLE_MAGIC):
            raise LoadError(str(path), "not a .docx: an encrypted or old-format (.doc) Word file; save it as .docx")
        raise LoadError(str(path), "damaged Word document: not a .docx (zip) file")
    _check_unpacked_size(path, data)
    import docx

    try:
        document = docx.Document(io.BytesIO(data))
        text, heading = _docx_text(document)
        meta_title = document.core_properties.title
    except LoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - python-docx and lxml raise many types for damaged files
        raise LoadError(str(path), one_line(f"damaged Word document: {type(exc).__name__}: {exc}")) from exc
    title = meta_title.strip() if isinstance(meta_title, str) and meta_title.strip() else heading
    return Extracted(text=_tidy(text), title=title)


def _check_unpacked_size(path: Path, data: bytes) -> None:
    import zipfile  # here, not at the top: it pulls in the compression modules, which `docsum ask` never needs

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise LoadError(str(path), one_line(f"damaged Word document: {exc}")) from exc
    if unpacked > DOCX_MAX_UNPACKED:
        raise LoadError(
            str(path),
            f"Word document unpacks to {unpacked // (1024 * 1024)} MB, more than the {DOCX_MAX_UNPACKED // (1024 * 1024)} MB docsum reads",
        )


def _docx_blocks(document: Any) -> Iterator[Any]:
    """Paragraphs and tables of the body in document order, including those
    inside content controls (cover pages, tables of contents) and text boxes,
    which python-docx's own iteration skips.  Paragraphs inside a table come
    with their table; a text box's compatibility copy is not read twice."""
    from docx.oxml.ns import qn
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    paragraph, table = qn("w:p"), qn("w:tbl")
    for element in document.element.body.iter(paragraph, table):
        if any(True for _ in element.iterancestors(table, _MC_FALLBACK)):
            continue
        yield Table(element, document) if element.tag == table else Paragraph(element, document)


def _docx_text(document: Any) -> tuple[str, str | None]:
    from docx.table import Table

    blocks: list[str] = []
    heading: str | None = None
    for item in _docx_blocks(document):
        if isinstance(item, Table):
            blocks.append(_docx_table(item))
            continue
        text = item.text.strip()
        if not text:
            continue
        style = (item.style.name if item.style is not None else "") or ""
        level = _heading_level(style)
        if level:
            heading = heading or text
            blocks.append("#" * level + " " + " ".join(text.split()))
        elif style.startswith("List"):
            blocks.append("- " + text)
        else:
            blocks.append(text)
    return "\n\n".join(blocks), heading


def _heading_level(style: str) -> int:
    if style == "Title":
        return 1
    match = re.fullmatch(r"Heading ([1-9])", style)
    return int(match.group(1)) if match else 0


def _docx_table(table: Any) -> str:
    rows: list[str] = []
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            value = " ".join(cell.text.split())
            # A merged cell is returned once per grid column it spans.
            if not cells or value != cells[-1]:
                cells.append(value)
        if any(cells):
            rows.append(" | ".join(cells))
    return "\n".join(rows)


READERS: dict[str, Callable[[Path, bytes], Extracted]] = {"html": read_html, "docx": read_docx}
