"""Turn one file into plain text.

Nothing here raises but ``LoadError``: ``load_file`` reports every per-file
failure with a one-line reason, so a build over thousands of files never stops
because one of them is odd.  Finding the files is docsum.discover's job.
"""

from __future__ import annotations

import codecs
import io
import logging
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from docsum.discover import printable_name
from docsum.errors import LoadError, one_line, os_reason
from docsum.formats import kind_for
from docsum.markup import READERS as MARKUP_READERS

if TYPE_CHECKING:
    import pypdf

# pypdf logs a warning for every small spec violation (hundreds for some real
# files); they would drown docsum's own progress output.  Problems that matter
# reach the user through LoadedDocument.warnings or LoadError instead.
logging.getLogger("pypdf").setLevel(logging.ERROR)

_TITLE_MAX = 120
# Share of control bytes (other than tab/newline/CR/FF/VT/ESC) above which a
# file without NUL bytes is still judged binary.  Real text, even with ANSI
# colour codes, stays far below this; compressed or encrypted data sits near 12%.
_CONTROL_BYTE_LIMIT = 0.10
_SNIFF_BYTES = 65536
_TEXT_CONTROLS = frozenset(b"\t\n\r\x0b\x0c\x1b")
_CONTROL_BYTES = bytes(b for b in range(32) if b not in _TEXT_CONTROLS) + b"\x7f"


@dataclass
class LoadedDocument:
    text: str
    page_starts: list[int]  # [] for text files; PDF page i+1 starts at page_starts[i]
    title: str
    kind: str  # a value of docsum.formats.SUPPORTED_SUFFIXES: "pdf", "text", "markdown", "html", ...
    warnings: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- loading


def load_file(path: Path) -> LoadedDocument:
    """Read one file into text; every per-file failure is a ``LoadError``."""
    kind = kind_for(path)
    if kind is None:
        raise LoadError(str(path), f"unsupported file type {path.suffix or '(no suffix)'!r}")
    data = _read_bytes(path)
    try:
        if kind == "pdf":
            return _load_pdf(path, data)
        if kind in MARKUP_READERS:
            return _load_markup(path, data, kind)
        return _load_text(path, data, kind)
    except LoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - the contract is "only LoadError escapes"
        raise LoadError(str(path), one_line(f"unexpected error: {type(exc).__name__}: {exc}")) from exc


def _read_bytes(path: Path) -> bytes:
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise LoadError(str(path), "is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise LoadError(str(path), "not a regular file")
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise LoadError(str(path), os_reason(exc)) from exc


def _normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _decode_text(path: Path, data: bytes) -> tuple[str, list[str]]:
    warnings: list[str] = []
    # UTF-32 BOMs first: the UTF-32-LE BOM begins with the UTF-16-LE one.
    for bom, codec in (
        (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if data.startswith(bom):
            body = data[len(bom) :]
            try:
                return body.decode(codec), warnings
            except UnicodeDecodeError:
                warnings.append(f"invalid {codec.upper()} sequences replaced with U+FFFD")
                return body.decode(codec, errors="replace"), warnings

    if b"\x00" in data:
        raise LoadError(str(path), "binary content, not text")
    sample = data[:_SNIFF_BYTES]
    if sample and len(sample) - len(sample.translate(None, _CONTROL_BYTES)) > _CONTROL_BYTE_LIMIT * len(sample):
        raise LoadError(str(path), "binary content, not text")

    try:
        return data.decode("utf-8"), warnings
    except UnicodeDecodeError:
        pass
    # A UTF-8 file with a few corrupt bytes keeps its real characters; reading
    # it as cp1252 would garble every accented letter.  Legacy single-byte
    # files almost never contain valid multi-byte UTF-8 sequences.
    lenient = data.decode("utf-8", errors="replace")
    bad = lenient.count("\ufffd") - data.decode("utf-8", errors="ignore").count("\ufffd")
    good_non_ascii = sum(1 for ch in lenient if ord(ch) > 127 and ch != "\ufffd")
    if good_non_ascii > bad:
        warnings.append(f"invalid UTF-8 ({bad} bad byte sequence{'s' if bad != 1 else ''} replaced)")
        return lenient, warnings
    try:
        text = data.decode("cp1252")
        warnings.append("not UTF-8; decoded as cp1252")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
        warnings.append("not UTF-8; decoded as latin-1")
    return text, warnings


def _load_text(path: Path, data: bytes, kind: str) -> LoadedDocument:
    text, warnings = _decode_text(path, data)
    text = _normalise_newlines(text)
    if text.startswith("\ufeff"):  # a BOM that survived (e.g. doubled)
        text = text[1:]
    if not text.strip():
        raise LoadError(str(path), "empty file: no text")
    title = (_markdown_title(text) if kind == "markdown" else None) or _first_line_title(text) or _name_title(path)
    return LoadedDocument(text=text, page_starts=[], title=title, kind=kind, warnings=warnings)


def _load_markup(path: Path, data: bytes, kind: str) -> LoadedDocument:
    """HTML and Word files: docsum.markup turns them into text with Markdown-style headings."""
    extracted = MARKUP_READERS[kind](path, data)
    text = _normalise_newlines(extracted.text).replace("\x00", "")
    if not any(ch.isalnum() for ch in text):
        raise LoadError(str(path), f"no text in this {kind} file")
    title = (
        (_clip_title(extracted.title) if extracted.title and extracted.title.lower() not in _PLACEHOLDER_TITLES else None)
        or _markdown_title(text)
        or _first_line_title(text)
        or _name_title(path)
    )
    return LoadedDocument(text=text, page_starts=[], title=title, kind=kind, warnings=extracted.warnings)


# --------------------------------------------------------------------------- titles

_ATX_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_FRONT_MATTER_TITLE = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.IGNORECASE)


def _clip_title(raw: str) -> str:
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


def _markdown_title(text: str) -> str | None:
    lines = text.split("\n", 2000)[:2000]
    fm_title, body_start = _front_matter(lines)
    if fm_title:
        return _clip_title(fm_title)
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
            return _clip_title(m.group(1))
        # Setext heading: a text line underlined with === or ---.
        if idx + 1 < len(lines) and line.strip() and re.fullmatch(r" {0,3}(=+|-+)[ \t]*", lines[idx + 1]):
            return _clip_title(line)
    if body_start:
        return _first_line_title("\n".join(lines[body_start:]))
    return None


def _name_title(path: Path) -> str:
    """The file's name as a last-resort title, storable even when the name is not UTF-8."""
    return printable_name(path.stem)


def _first_line_title(text: str) -> str | None:
    # Lines of pure punctuation (rules, "* * *", extraction debris) make poor titles.
    for line in text.split("\n", 500)[:500]:
        if any(ch.isalnum() for ch in line):
            return _clip_title(line)
    return None


_FILENAME_LIKE = re.compile(r".*\.(pdf|docx?|odt|rtf|txt|tex|dvi|ps|indd|pptx?|xlsx?|html?)$", re.IGNORECASE)
_PLACEHOLDER_TITLES = frozenset({"title", "untitled", "untitled document", "document", "none", "unknown"})


def _pdf_metadata_title(reader: pypdf.PdfReader) -> str | None:
    try:
        meta = reader.metadata
        raw = meta.title if meta is not None else None
    except Exception:  # noqa: BLE001 - metadata is optional; a broken Info dict must not fail the file
        return None
    if not isinstance(raw, str):
        return None
    title = " ".join(raw.split())
    for prefix in ("Microsoft Word - ", "Microsoft PowerPoint - "):
        if title.startswith(prefix):
            title = title[len(prefix) :]
    # Producers often store the source file name or a template placeholder.
    if not title or title.lower() in _PLACEHOLDER_TITLES or _FILENAME_LIKE.fullmatch(title):
        return None
    return _clip_title(title)


# --------------------------------------------------------------------------- PDF


def _damaged(path: Path, exc: BaseException) -> LoadError:
    cause = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    reason = "damaged PDF: " + cause
    return LoadError(str(path), one_line(reason))


def _open_pdf(path: Path, data: bytes) -> pypdf.PdfReader:
    import pypdf  # here, not at the top: `docsum ask` never reads a PDF and pypdf costs ~50 ms to import

    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        encrypted = reader.is_encrypted
    except pypdf.errors.DependencyError as exc:
        raise LoadError(str(path), _aes_reason()) from exc
    except pypdf.errors.FileNotDecryptedError as exc:
        raise LoadError(str(path), "encrypted PDF; needs a password") from exc
    except Exception as exc:  # noqa: BLE001 - pypdf raises many types (incl. RecursionError) for damage
        raise _damaged(path, exc) from exc
    if encrypted:
        try:
            # Many PDFs are encrypted only to set permissions and open with an
            # empty user password.
            result = reader.decrypt("")
        except pypdf.errors.DependencyError as exc:
            raise LoadError(str(path), _aes_reason()) from exc
        except Exception as exc:  # noqa: BLE001
            raise _damaged(path, exc) from exc
        if result == pypdf.PasswordType.NOT_DECRYPTED:
            raise LoadError(str(path), "encrypted PDF; needs a password")
    return reader


def _aes_reason() -> str:
    # pypdf needs the optional 'cryptography' package for AES; without it we
    # cannot even try the empty password, so the password may or may not matter.
    return "encrypted PDF (AES); needs a password or the 'cryptography' package to open"


def _load_pdf(path: Path, data: bytes) -> LoadedDocument:
    import pypdf  # here, not at the top: `docsum ask` never reads a PDF and pypdf costs ~50 ms to import

    reader = _open_pdf(path, data)
    warnings: list[str] = []
    try:
        pages = list(reader.pages)
    except pypdf.errors.FileNotDecryptedError as exc:
        raise LoadError(str(path), "encrypted PDF; needs a password") from exc
    except Exception as exc:  # noqa: BLE001
        raise _damaged(path, exc) from exc
    if not pages:
        raise LoadError(str(path), "damaged PDF: no pages")

    texts: list[str] = []
    failed: list[int] = []
    for number, page in enumerate(pages, start=1):
        try:
            raw = page.extract_text() or ""
        except pypdf.errors.FileNotDecryptedError as exc:
            raise LoadError(str(path), "encrypted PDF; needs a password") from exc
        except Exception as exc:  # noqa: BLE001 - one bad page must not cost the others
            failed.append(number)
            if len(failed) <= 3:
                warnings.append(one_line(f"page {number}: text extraction failed ({type(exc).__name__}: {exc})"))
            raw = ""
        # NULs come from broken font encodings and would upset SQLite FTS and prompts.
        texts.append(_normalise_newlines(raw).replace("\x00", "").strip())
    if len(failed) > 3:
        warnings.append(f"text extraction failed on {len(failed)} of {len(pages)} pages")
    if len(failed) == len(pages):
        raise LoadError(str(path), f"damaged PDF: text extraction failed on all {len(pages)} pages")

    # Every page keeps its slot (an empty one if it failed) so page numbers
    # in citations stay the real page numbers.
    page_starts: list[int] = []
    offset = 0
    for idx, page_text in enumerate(texts):
        if idx:
            offset += 2  # the "\n\n" separator
        page_starts.append(offset)
        offset += len(page_text)
    text = "\n\n".join(texts)
    if not any(ch.isalnum() for ch in text):
        raise LoadError(str(path), "no extractable text (scanned or image-only PDF?)")
    title = _pdf_metadata_title(reader) or _first_line_title(text) or _name_title(path)
    return LoadedDocument(text=text, page_starts=page_starts, title=title, kind="pdf", warnings=warnings)
