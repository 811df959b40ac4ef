"""Find the files a build should read and turn each into plain text.

Nothing here raises for a single bad file: discovery collects problems in
``Discovery.errors`` (symlinks it will not follow in ``Discovery.skipped``)
and ``load_file`` reports every per-file failure as a
``LoadError`` with a one-line reason, so a build over thousands of files never
stops because one of them is odd.
"""

from __future__ import annotations

import codecs
import errno
import io
import logging
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from docsum.errors import LoadError

if TYPE_CHECKING:
    import pypdf

SUPPORTED_SUFFIXES: dict[str, str] = {
    ".txt": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".pdf": "pdf",
}

# pypdf logs a warning for every small spec violation (hundreds for some real
# files); they would drown docsum's own progress output.  Problems that matter
# reach the user through LoadedDocument.warnings or LoadError instead.
logging.getLogger("pypdf").setLevel(logging.ERROR)

_TITLE_MAX = 120
_REASON_MAX = 160
# Share of control bytes (other than tab/newline/CR/FF/VT/ESC) above which a
# file without NUL bytes is still judged binary.  Real text, even with ANSI
# colour codes, stays far below this; compressed or encrypted data sits near 12%.
_CONTROL_BYTE_LIMIT = 0.10
_SNIFF_BYTES = 65536
_TEXT_CONTROLS = frozenset(b"\t\n\r\x0b\x0c\x1b")
_CONTROL_BYTES = bytes(b for b in range(32) if b not in _TEXT_CONTROLS) + b"\x7f"

_OUTSIDE_ROOT = "symlink leads outside the build root; use --follow-symlinks"


@dataclass
class LoadedDocument:
    text: str
    page_starts: list[int]  # [] for text files; PDF page i+1 starts at page_starts[i]
    title: str
    kind: str  # "pdf" | "text" | "markdown"
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FoundFile:
    path: Path  # absolute (not resolved: a followed symlink keeps its own path)
    root: Path  # build root it was found under (absolute, resolved)
    relpath: str  # POSIX path relative to root; a file named directly: its name


@dataclass
class Discovery:
    files: list[FoundFile]
    skipped_hidden: int = 0
    skipped_unsupported: int = 0
    errors: list[LoadError] = field(default_factory=list)
    # Symlinks not followed, as (path, reason): outside the root (without
    # follow_symlinks), loops, dangling links. They are a property of the
    # tree, not a failure of a document: a build reports them and moves on
    # (exit 0), and a cron job is not flagged every night because of them.
    skipped: list[tuple[str, str]] = field(default_factory=list)


# --------------------------------------------------------------------------- helpers


def _one_line(message: str, limit: int = _REASON_MAX) -> str:
    flat = " ".join(message.split())
    if len(flat) > limit:
        flat = flat[: limit - 1].rstrip() + "…"
    return flat


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, FileNotFoundError):
        return "file vanished before it could be read"
    if isinstance(exc, IsADirectoryError):
        return "is a directory, not a file"
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    return _one_line(exc.strerror or str(exc) or type(exc).__name__, 80).lower()


def _is_hidden(name: str) -> bool:
    return name.startswith(".")


def _kind_for(path: Path) -> str | None:
    return SUPPORTED_SUFFIXES.get(path.suffix.lower())


def _is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


# --------------------------------------------------------------------------- discovery


@dataclass(frozen=True)
class _Candidate:
    relpath: str
    path: Path
    root: Path
    resolved: str
    via_symlink: bool


class _Walker:
    def __init__(self, follow_symlinks: bool) -> None:
        self.follow_symlinks = follow_symlinks
        self.candidates: list[_Candidate] = []
        self.skipped_hidden = 0
        self.skipped_unsupported = 0
        self.errors: list[LoadError] = []
        self.skipped: list[tuple[str, str]] = []
        # Resolved directories already walked: stops symlink cycles and keeps
        # an aliased directory from being read twice.
        self.visited: set[str] = set()

    def add_file(self, path: Path, root: Path, relpath: str, resolved: str, via_symlink: bool, st: os.stat_result) -> None:
        if _kind_for(path) is None:
            self.skipped_unsupported += 1
            return
        if not stat.S_ISREG(st.st_mode):
            # A FIFO or device named *.txt would block or never end on read.
            self.errors.append(LoadError(str(path), "not a regular file"))
            return
        self.candidates.append(_Candidate(relpath, path, root, resolved, via_symlink))

    def walk(self, root: Path) -> None:
        root_str = str(root)
        self.visited.add(root_str)
        # (logical path, relpath prefix, resolved path, reached through a symlink)
        pending: list[tuple[Path, str, str, bool]] = [(root, "", root_str, False)]
        # Symlinked directories wait until every real directory of the tree has
        # been walked, so an alias never claims files ahead of their real path.
        deferred: list[tuple[Path, str, str, bool]] = []
        while pending or deferred:
            if not pending:
                item = deferred.pop(0)
                if item[2] in self.visited:
                    continue  # an alias of a directory already walked
                self.visited.add(item[2])
                pending.append(item)
            directory, prefix, resolved_dir, through_link = pending.pop()
            try:
                with os.scandir(directory) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as exc:
                self.errors.append(LoadError(str(directory), f"cannot read directory: {_os_reason(exc)}"))
                continue
            subdirs: list[tuple[Path, str, str, bool]] = []
            for entry in entries:
                if _is_hidden(entry.name):
                    self.skipped_hidden += 1
                    continue
                path = Path(entry.path)
                relpath = prefix + entry.name
                try:
                    if entry.is_symlink():
                        target = self._follow(path, root_str)
                        if target is None:
                            continue
                        st = os.stat(target)
                        if stat.S_ISDIR(st.st_mode):
                            if _is_within(resolved_dir, target):
                                # The link points at a directory containing itself.
                                self.skipped.append((str(path), "symlink loop"))
                            else:
                                deferred.append((path, relpath + "/", target, True))
                        else:
                            self.add_file(path, root, relpath, target, True, st)
                        continue
                    st = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    self.errors.append(LoadError(str(path), _os_reason(exc)))
                    continue
                resolved = os.path.join(resolved_dir, entry.name)
                if stat.S_ISDIR(st.st_mode):
                    if resolved not in self.visited:
                        self.visited.add(resolved)
                        subdirs.append((path, relpath + "/", resolved, through_link))
                else:
                    self.add_file(path, root, relpath, resolved, through_link, st)
            # Reversed so the stack pops directories in name order.
            pending.extend(reversed(subdirs))

    def _follow(self, link: Path, root_str: str) -> str | None:
        """Resolved target of ``link`` if it may be followed; records why not otherwise."""
        try:
            target = os.path.realpath(link, strict=True)
        except FileNotFoundError:
            self.skipped.append((str(link), "broken symlink: target does not exist"))
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self.skipped.append((str(link), "symlink loop"))
            else:
                self.errors.append(LoadError(str(link), _os_reason(exc)))
            return None
        except RuntimeError:  # older pathlib-style loop reporting
            self.skipped.append((str(link), "symlink loop"))
            return None
        if not self.follow_symlinks and not _is_within(target, root_str):
            if os.path.isdir(target) or _kind_for(link) is not None:
                self.skipped.append((str(link), _OUTSIDE_ROOT))
            else:
                self.skipped_unsupported += 1  # would be skipped anyway: no notice
            return None
        return target


def discover(paths: list[Path], follow_symlinks: bool = False) -> Discovery:
    """Collect supported files under ``paths`` (directories recurse).

    Hidden entries and unsupported suffixes are skipped and counted; a path
    named directly is never treated as hidden.  Symlinks are followed when
    their target lies inside the root they were found under, or anywhere when
    ``follow_symlinks`` is set.  The same file reached twice (overlapping
    arguments, aliases) is listed once, preferring a path without symlinks.
    """
    walker = _Walker(follow_symlinks)
    for given in paths:
        absolute = Path(os.path.abspath(given))
        if not os.path.lexists(absolute):
            walker.errors.append(LoadError(str(given), "no such file or directory"))
            continue
        try:
            resolved = os.path.realpath(absolute, strict=True)
            st = os.stat(absolute)
        except FileNotFoundError:
            walker.errors.append(LoadError(str(given), "broken symlink: target does not exist"))
            continue
        except (OSError, RuntimeError) as exc:
            reason = _os_reason(exc) if isinstance(exc, OSError) else "symlink loop"
            walker.errors.append(LoadError(str(given), reason))
            continue
        if stat.S_ISDIR(st.st_mode):
            if resolved in walker.visited:
                continue
            walker.walk(Path(resolved))
        else:
            root = Path(os.path.realpath(absolute.parent))
            walker.add_file(absolute, root, absolute.name, resolved, absolute.is_symlink(), st)

    chosen: dict[str, _Candidate] = {}
    for cand in sorted(walker.candidates, key=lambda c: (c.via_symlink, c.relpath, str(c.root))):
        chosen.setdefault(cand.resolved, cand)
    files = [FoundFile(c.path, c.root, c.relpath) for c in chosen.values()]
    files.sort(key=lambda f: (f.relpath, str(f.root)))
    return Discovery(files, walker.skipped_hidden, walker.skipped_unsupported, walker.errors, walker.skipped)


# --------------------------------------------------------------------------- loading


def load_file(path: Path) -> LoadedDocument:
    """Read one file into text; every per-file failure is a ``LoadError``."""
    kind = _kind_for(path)
    if kind is None:
        raise LoadError(str(path), f"unsupported file type {path.suffix or '(no suffix)'!r}")
    data = _read_bytes(path)
    try:
        if kind == "pdf":
            return _load_pdf(path, data)
        return _load_text(path, data, kind)
    except LoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - the contract is "only LoadError escapes"
        raise LoadError(str(path), _one_line(f"unexpected error: {type(exc).__name__}: {exc}")) from exc


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
        raise LoadError(str(path), _os_reason(exc)) from exc


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
    title = (_markdown_title(text) if kind == "markdown" else None) or _first_line_title(text) or path.stem
    return LoadedDocument(text=text, page_starts=[], title=title, kind=kind, warnings=warnings)


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
    return LoadError(str(path), _one_line(reason))


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
                warnings.append(_one_line(f"page {number}: text extraction failed ({type(exc).__name__}: {exc})"))
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
    title = _pdf_metadata_title(reader) or _first_line_title(text) or path.stem
    return LoadedDocument(text=text, page_starts=page_starts, title=title, kind="pdf", warnings=warnings)
