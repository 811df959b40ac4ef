"""Reading and splitting one file: the work a parse worker does (``parse_file``),
and the cache of extracted text (``TextCache``), keyed by the hash of the file's
bytes, so a ``--dry-run`` followed by a build parses each file once. The
worker processes that run it are docsum.ingest.parsepool's."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from docsum.ingest.formats import kind_for
from docsum.ingest.load import load_content, read_once
from docsum.ingest.loaded import LoadedDocument
from docsum.ingest.ocr import MODE_OFF, PAGED_KINDS, effective_mode, set_threads
from docsum.ingest.split import Chunk, split_document
from docsum.ingest.tables import find_tables
from docsum.models.tokens import Tokenizer, get_encoding
from docsum.settings import default

# The extracted-text cache is trimmed to this size (least recently used first)
# after each build.
CACHE_MAX_BYTES = 512 << 20
# Bump when extraction changes what text a file yields: older cache entries
# are then ignored (and age out).
EXTRACTION_VERSION = "7"  # 2: titles set over two or three lines are whole; 3: a filing is titled by its registrant; 4: a PDF with unreadable pages keeps the readable ones; 5: page origins (OCR); 6: PDF tables are rebuilt from the page layout, one row per line, cells apart; 7: PDFium's line-end hyphen (U+FFFE) is a hyphen


@dataclass(frozen=True)
class ParseRequest:
    path: str
    inside: str | None  # the opened file must lie under this folder (None: no check)
    encoding: str  # tokenizer encoding name for splitting
    margin: float  # tokenizer count margin
    chunk_size: int
    chunk_overlap: int
    cache_dir: str | None  # extracted-text cache (None: no cache)
    ocr: str = default("ocr")  # docsum.ingest.ocr.MODES: which pages OCR reads
    ocr_threads: int = 0  # onnxruntime threads of one worker's OCR (0: every core it may use)


@dataclass
class Parsed:
    """One file read and split; text, hash, size and mtime from one read."""

    loaded: LoadedDocument
    chunks: list[Chunk]
    sha256: str
    size: int
    mtime_ns: int
    cached: bool = False  # the text came from the cache (nothing was extracted)


# --------------------------------------------------------------------------- the work itself


def parse_file(request: ParseRequest) -> Parsed:
    """Read, extract (or take from the cache) and split one file.

    Runs in a worker process; callable in-process too. Only ``LoadError``
    escapes for a problem with the file."""
    path = Path(request.path)
    content = read_once(path, Path(request.inside) if request.inside else None)
    cache = TextCache(Path(request.cache_dir), effective_mode(request.ocr)) if request.cache_dir else None
    loaded = cache.get(content.sha256, path) if cache is not None else None
    cached = loaded is not None
    if loaded is None:
        if request.ocr_threads:
            set_threads(request.ocr_threads)
        loaded = load_content(path, content, request.ocr)
        if cache is not None:
            cache.put(content.sha256, path, loaded)
    tokenizer = Tokenizer(get_encoding(request.encoding), request.margin)
    # Table headings are repeated for PDFs, whose tables the reader rebuilt;
    # not for text files, where measuring cost recall (docs/tables.md).
    tables = find_tables(loaded.text) if loaded.kind == "pdf" else ()
    chunks = split_document(
        loaded.text, tokenizer, request.chunk_size, request.chunk_overlap, loaded.page_starts or None, tables
    )
    return Parsed(loaded, chunks, content.sha256, content.size, content.mtime_ns, cached)


# --------------------------------------------------------------------------- cache


class TextCache:
    """Extracted text keyed by the SHA-256 of the file's bytes.

    An entry is a gzipped JSON file readable only by its owner (it holds the
    documents' text). Entries are written atomically; anything unreadable or
    malformed is treated as absent, never trusted. For PDFs and images the
    OCR mode in effect is part of the key: switching it (or installing the
    extra) reads the file again."""

    def __init__(self, directory: Path, ocr: str = MODE_OFF) -> None:
        self.directory = directory
        self.ocr = ocr

    def _entry(self, sha256: str, path: Path) -> Path:
        # The suffix is part of the key: the same bytes named .txt and .md
        # are read differently.
        kind = path.suffix.lower().lstrip(".") or "none"
        if kind_for(path) in PAGED_KINDS:
            kind += f".ocr-{self.ocr}"
        return self.directory / sha256[:2] / f"{sha256}.{kind}.v{EXTRACTION_VERSION}.json.gz"

    def get(self, sha256: str, path: Path) -> LoadedDocument | None:
        try:
            raw = json.loads(gzip.decompress(self._entry(sha256, path).read_bytes()))
            doc = LoadedDocument(
                text=raw["text"],
                page_starts=raw["page_starts"],
                title=raw["title"],
                kind=raw["kind"],
                warnings=raw["warnings"],
                extractor=raw["extractor"],
                page_origins=raw["page_origins"],
            )
        except (OSError, ValueError, KeyError, TypeError, EOFError):
            return None
        if not (
            isinstance(doc.text, str)
            and isinstance(doc.title, str)
            and isinstance(doc.kind, str)
            and isinstance(doc.extractor, str)
            and isinstance(doc.page_origins, str)
            and isinstance(doc.page_starts, list)
            and all(type(p) is int for p in doc.page_starts)
            and isinstance(doc.warnings, list)
            and all(isinstance(w, str) for w in doc.warnings)
        ):
            return None
        with contextlib.suppress(OSError):
            os.utime(self._entry(sha256, path))  # recently used: pruned last
        return doc

    def prune(self, max_bytes: int = CACHE_MAX_BYTES) -> None:
        """Delete the least recently used entries until the cache holds at most ``max_bytes``."""
        entries: list[tuple[float, int, Path]] = []
        try:
            for entry in self.directory.glob("*/*.json.gz"):
                with contextlib.suppress(OSError):
                    st = entry.stat()
                    entries.append((st.st_mtime, st.st_size, entry))
        except OSError:
            return
        total = sum(size for _, size, _ in entries)
        for _, size, entry in sorted(entries):
            if total <= max_bytes:
                break
            with contextlib.suppress(OSError):
                entry.unlink()
                total -= size

    def put(self, sha256: str, path: Path, doc: LoadedDocument) -> None:
        entry = self._entry(sha256, path)
        try:
            entry.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            with contextlib.suppress(OSError):
                os.chmod(self.directory, 0o700)
            fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(gzip.compress(json.dumps(asdict(doc)).encode("utf-8"), compresslevel=1))
                os.replace(tmp, entry)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError:
            pass  # a cache that cannot be written only costs a re-parse later


def unexpected_reason(exc: BaseException) -> str:
    """One line for an error nobody foresaw (a bug, or a library's surprise)."""
    text = " ".join(str(exc).split())
    if len(text) > 160:
        text = text[:159] + "…"
    return f"unexpected error: {type(exc).__name__}: {text}" if text else f"unexpected error: {type(exc).__name__}"


# A worker's own clock on a file runs this much longer than the build's, so
# the build (when alive) is the one that reports it; the worker's ends it
# when the build cannot (see docsum.ingest.parseworker): its alarm (SIGALRM)
# ends it.
WORKER_GRACE_S = 2.0
