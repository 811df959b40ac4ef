"""Turn one file into plain text.

Nothing here raises but ``LoadError``: ``load_file`` reports every per-file
failure with a one-line reason, so a build over thousands of files never stops
because one of them is odd.  Finding the files is docsum.ingest.discover's job.
"""

from __future__ import annotations

import codecs
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from docsum.errors import LoadError, one_line, os_reason
from docsum.ingest.formats import kind_for
from docsum.ingest.loaded import (
    PLACEHOLDER_TITLES,
    LoadedDocument,
    clip_title,
    first_line_title,
    markdown_title,
    name_title,
)
from docsum.ingest.markup import READERS as MARKUP_READERS
from docsum.ingest.ocr import MODE_AUTO
from docsum.userfiles import open_regular

# Share of control bytes (other than tab/newline/CR/FF/VT/ESC) above which a
# file without NUL bytes is still judged binary.  Real text, even with ANSI
# colour codes, stays far below this; compressed or encrypted data sits near 12%.
_CONTROL_BYTE_LIMIT = 0.10
_SNIFF_BYTES = 65536
_TEXT_CONTROLS = frozenset(b"\t\n\r\x0b\x0c\x1b")
_CONTROL_BYTES = bytes(b for b in range(32) if b not in _TEXT_CONTROLS) + b"\x7f"


# --------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class FileContent:
    """The bytes of one file and what describes them, all from one read: the
    text, the hash, the size and the mtime a build stores always agree."""

    data: bytes
    sha256: str
    size: int
    mtime_ns: int


# A file that changes while it is read is read again this many times before
# it is reported as failed (the next build tries again).
_READ_ATTEMPTS = 3
_PROC_FD = Path("/proc/self/fd")
_SWAPPED_OUTSIDE = "leads outside the build root (replaced by a symlink after the folder was scanned?); not read"


def read_once(path: Path, inside: Path | None = None) -> FileContent:
    """Read ``path`` once and describe exactly the bytes read.

    With ``inside``, the file actually opened must lie under that folder: a
    symlink swapped in after the folder was scanned is refused, not followed
    (the check is made on the open file, so no later swap can change it).
    A file that changes while it is read is read again; one that keeps
    changing fails.  Every problem is a ``LoadError``.
    """
    label = str(path)
    try:
        # A FIFO or device swapped in after discovery is refused, never waited on.
        fd = open_regular(path)
    except OSError as exc:
        raise LoadError(label, os_reason(exc)) from exc
    try:
        before = os.fstat(fd)
        if inside is not None:
            _check_inside(label, fd, path, before, inside)
        for _ in range(_READ_ATTEMPTS):
            data = _read_all(fd)
            after = os.fstat(fd)
            if (after.st_size, after.st_mtime_ns, after.st_ctime_ns) == (
                len(data),
                before.st_mtime_ns,
                before.st_ctime_ns,
            ):
                return FileContent(data, hashlib.sha256(data).hexdigest(), len(data), after.st_mtime_ns)
            before = after
        raise LoadError(label, "the file kept changing while it was read; the next build tries again")
    except OSError as exc:
        raise LoadError(label, os_reason(exc)) from exc
    finally:
        os.close(fd)


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    parts: list[bytes] = []
    while block := os.read(fd, 1 << 20):
        parts.append(block)
    return b"".join(parts)


def _check_inside(label: str, fd: int, path: Path, st: os.stat_result, inside: Path) -> None:
    """Refuse an opened file that does not lie under ``inside``."""
    try:
        # The kernel's name for the open file: what was read, whatever the
        # path resolves to now.
        opened = os.readlink(_PROC_FD / str(fd))
    except OSError:
        # No /proc: resolve the path and make sure it names the same file.
        opened = os.path.realpath(path)
        try:
            now = os.stat(opened)
        except OSError:
            now = None
        if now is None or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise LoadError(label, "the file was replaced while it was opened; the next build tries again") from None
    root = os.path.realpath(inside)
    if os.path.commonpath([opened, root]) != root:
        raise LoadError(label, _SWAPPED_OUTSIDE)


# How each kind of document becomes text: a function of the file's path (for
# messages and titles), its bytes and the OCR mode (docsum.ingest.ocr.MODES;
# only pages and images use it), raising LoadError for a bad file.  Kinds
# without an entry are read as plain text.  Whatever is registered here runs
# in the build's worker processes as is.
Reader = Callable[[Path, bytes, str], LoadedDocument]


def _read_pdf(path: Path, data: bytes, ocr: str) -> LoadedDocument:
    from docsum.ingest.pdf import load_pdf  # PDF engines cost ~50 ms to import; `docsum ask` never needs them

    return load_pdf(path, data, ocr)


def _read_image(path: Path, data: bytes, ocr: str) -> LoadedDocument:
    from docsum.ingest.images import load_image  # Pillow and the OCR engine: only for images

    return load_image(path, data, ocr)


def _markup_reader(kind: str) -> Reader:
    return lambda path, data, ocr: _load_markup(path, data, kind)


READERS: dict[str, Reader] = {
    "pdf": _read_pdf,
    "image": _read_image,
    **{kind: _markup_reader(kind) for kind in MARKUP_READERS},
}


def load_file(path: Path, inside: Path | None = None, ocr: str = MODE_AUTO) -> LoadedDocument:
    """Read one file into text; every per-file failure is a ``LoadError``."""
    return load_content(path, read_once(path, inside), ocr)


def load_content(path: Path, content: FileContent, ocr: str = MODE_AUTO) -> LoadedDocument:
    """Turn bytes already read from ``path`` into text (``LoadError`` only);
    ``ocr`` says whether pages without a text layer are read by OCR."""
    kind = kind_for(path)
    if kind is None:
        raise LoadError(str(path), f"unsupported file type {path.suffix or '(no suffix)'!r}")
    try:
        reader = READERS.get(kind)
        if reader is not None:
            return reader(path, content.data, ocr)
        return _load_text(path, content.data, kind)
    except LoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - the contract is "only LoadError escapes"
        raise LoadError(str(path), one_line(f"unexpected error: {type(exc).__name__}: {exc}")) from exc


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
    # A UTF-16/32 file can decode to U+0000: dropped, as from markup, since no
    # store can keep it (PostgreSQL's text refuses it) and it means nothing.
    text = _normalise_newlines(text).replace("\x00", "")
    if text.startswith("\ufeff"):  # a BOM that survived (e.g. doubled)
        text = text[1:]
    if not text.strip():
        raise LoadError(str(path), "empty file: no text")
    title = (markdown_title(text) if kind == "markdown" else None) or first_line_title(text) or name_title(path)
    return LoadedDocument(text=text, page_starts=[], title=title, kind=kind, warnings=warnings)


def _load_markup(path: Path, data: bytes, kind: str) -> LoadedDocument:
    """HTML and Word files: docsum.ingest.markup turns them into text with Markdown-style headings."""
    extracted = MARKUP_READERS[kind](path, data)
    text = _normalise_newlines(extracted.text).replace("\x00", "")
    if not any(ch.isalnum() for ch in text):
        raise LoadError(str(path), f"no text in this {kind} file")
    title = (
        (clip_title(extracted.title) if extracted.title and extracted.title.lower() not in PLACEHOLDER_TITLES else None)
        or markdown_title(text)
        or first_line_title(text)
        or name_title(path)
    )
    return LoadedDocument(text=text, page_starts=[], title=title, kind=kind, warnings=extracted.warnings)
