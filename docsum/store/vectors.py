"""Summary vectors kept in one file beside the store, so a question scans a
matrix instead of loading every document.

Why a file of our own and not a vector index (sqlite-vec, usearch): a question
needs the exact cosine of every summary (the lexical engine even re-weights
every row by IDF), 100,000 rows are scanned in a fraction of a second, and the
file needs no extra dependency, works the same beside SQLite and beside a
remote store, and is trivially crash-safe (see below).

How it stays consistent with the store. Any store implements one method,
`vector_changes(since)`: the store's identity, its current *generation* (a
counter that grows with every change to a document's vector, insertion or
removal), and the documents whose vector changed after generation `since`.
The file records the store identity and generation it reflects. Before each
scan the reader asks the store what changed since that generation:

* nothing: the file is used as it is;
* a few documents (a build running, a crashed build): their current vectors
  are fetched and laid over the file in memory for this question only;
* many, a different store, or no file: a new file is written from the old one
  plus the changes (the old file, not the store, supplies the unchanged rows, so
  a remote store sends only what changed) to a temporary name and renamed over
  the old one. A reader never sees a half-written file, a crash leaves at
  worst a stale one that the next reader catches up, and when the folder is
  not writable the changes simply stay in memory.

Rows are scanned a block at a time, each block mapped on its own and unmapped
when the next one is reached: a mapping of the whole file would count every
page read against the process's resident memory, one block's does not stay.
Mapping, not reading into a buffer, spares the copy of every row out of the
page cache, which was most of a 100,000-document scan (0.08 s of CPU against
0.045 s for 600 MB of 1,536-dimension vectors; the scores are bit for bit the
same, a mapped block starting on a page boundary as the aligned read buffer
did).

Layout (little-endian): a 4 KiB header (magic, length, JSON), then the float32
matrix (count x dim), then the doc ids (count x id_width bytes, NUL padded),
then, for lexical vectors only, the per-bucket document frequencies (int64 x
dim) that turn cosine into TF-IDF cosine.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol

from docsum.paths import replaced_atomically

if TYPE_CHECKING:  # numpy is imported when vectors are touched, not before
    import numpy as np

log = logging.getLogger("docsum")

MAGIC = b"DSVEC001"
HEADER_BYTES = 4096
# Rows scanned per block: 2,048 x 1,536 float32 is a 12 MB mapping.
BLOCK_ROWS = 2048
# Up to this many changed documents are laid over the file in memory; more
# and the file is rewritten (if the folder is writable).
OVERLAY_LIMIT = 1000


@dataclass
class VectorChange:
    """One document's vector as the store holds it now. `vector` None: the
    document is gone (`removed`) or has no embedding."""

    doc_id: str
    vector: np.ndarray | None
    model: str | None
    removed: bool = False


@dataclass
class VectorChanges:
    """What a store reports: who it is, its generation, and the documents
    whose vector changed after the generation asked about."""

    store_id: str
    generation: int
    count: int  # documents in `batches` (known before they are fetched)
    batches: Iterable[list[VectorChange]]


class VectorSource(Protocol):
    """The one method every store implements for the vector file."""

    def vector_changes(self, since: int) -> VectorChanges:
        """Changes after generation `since` (0: every document). A `since`
        beyond the current generation also reports every document."""
        ...


@dataclass
class _Header:
    store_id: str
    generation: int
    count: int
    dim: int
    model: str | None
    id_width: int
    # False when the store's vectors cannot be scanned as one matrix (a
    # document without an embedding, two models, two sizes): no matrix then.
    uniform: bool
    lexical: bool

    def to_bytes(self) -> bytes:
        body = json.dumps(self.__dict__, sort_keys=True).encode("utf-8")
        if len(body) + 12 > HEADER_BYTES:
            raise ValueError("vector file header too long")
        return (MAGIC + struct.pack("<I", len(body)) + body).ljust(HEADER_BYTES, b" ")

    @classmethod
    def read(cls, fh: BinaryIO) -> _Header:
        head = fh.read(HEADER_BYTES)
        if len(head) < 12 or head[:8] != MAGIC:
            raise ValueError("not a docsum vector file")
        (length,) = struct.unpack("<I", head[8:12])
        data = json.loads(head[12 : 12 + length].decode("utf-8"))
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})

    @classmethod
    def peek(cls, path: Path) -> _Header | None:
        """The header of the file at `path`; None when there is none usable."""
        try:
            with open(path, "rb") as fh:
                return cls.read(fh)
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError, json.JSONDecodeError):
            return None

    @property
    def matrix_bytes(self) -> int:
        return self.count * self.dim * 4 if self.uniform else 0


def _lexical_model(model: str | None) -> bool:
    from docsum.lexical import LEXICAL_EMBED_MODEL

    return model == LEXICAL_EMBED_MODEL


@dataclass
class _Base:
    """A vector file as read from disk: its header and doc ids (the matrix
    stays on disk and is read block by block)."""

    path: Path
    header: _Header
    ids: list[str]
    df: np.ndarray | None  # lexical vectors: documents with a non-zero value, per bucket

    @classmethod
    def read(cls, path: Path) -> _Base | None:
        """None when there is no usable file (missing, truncated, foreign):
        the caller writes a new one."""
        import numpy as np

        try:
            with open(path, "rb") as fh:
                header = _Header.read(fh)
                fh.seek(HEADER_BYTES + header.matrix_bytes)
                width = header.id_width
                raw = fh.read(header.count * width)
                if len(raw) != header.count * width:
                    raise ValueError("truncated id table")
                # numpy drops the NUL padding of fixed-width bytes.
                ids = (
                    [d.decode("utf-8") for d in np.frombuffer(raw, dtype=f"S{width}").tolist()]
                    if width
                    else [""] * header.count
                )
                df = None
                if header.lexical and header.uniform:
                    blob = fh.read(header.dim * 8)
                    if len(blob) != header.dim * 8:
                        raise ValueError("truncated frequency table")
                    df = np.frombuffer(blob, dtype="<i8").copy()
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            log.debug("%s: unusable vector file, writing a new one (%s)", path, exc)
            return None
        return cls(path, header, ids, df)

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, rows) for the whole matrix, a read-only mapped block
        at a time (unmapped once the caller lets go of it)."""
        import numpy as np

        count, dim = self.header.count, self.header.dim
        if not self.header.uniform or not count or not dim:
            return
        with open(self.path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size < HEADER_BYTES + count * dim * 4:
                raise ValueError(f"{self.path}: vector file is truncated")
            for start in range(0, count, BLOCK_ROWS):
                rows = min(BLOCK_ROWS, count - start)
                # Offsets are page multiples: the header is a page, a block
                # BLOCK_ROWS (a multiple of 1,024) rows of 4-byte values.
                mapped = mmap.mmap(
                    fh.fileno(), rows * dim * 4, offset=HEADER_BYTES + start * dim * 4, access=mmap.ACCESS_READ
                )
                # The array holds the map; freeing it unmaps the block.
                yield start, np.frombuffer(mapped, dtype="<f4").reshape(rows, dim)

    def rows(self, indexes: list[int]) -> Iterator[np.ndarray]:
        import numpy as np

        dim = self.header.dim
        with open(self.path, "rb") as fh:
            for i in indexes:
                fh.seek(HEADER_BYTES + i * dim * 4)
                yield np.frombuffer(fh.read(dim * 4), dtype="<f4")


@dataclass
class VectorView:
    """The vectors as of one generation: the file's rows, less the documents
    changed since it was written, plus their current vectors (the overlay)."""

    store_id: str
    generation: int
    base: _Base | None
    overlay: dict[str, VectorChange] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ids = self.base.ids if self.base is not None else []
        self._hidden = [i for i, doc_id in enumerate(ids) if doc_id in self.overlay]
        self._live = [c for c in self.overlay.values() if not c.removed]

    def doc_count(self) -> int:
        ids = self.base.ids if self.base is not None else []
        return len(ids) - len(self._hidden) + len(self._live)

    def shape(self) -> tuple[str | None, int | None, bool]:
        """(model, dim, uniform). Uniform: every document has a vector of one
        model and one size, which is what a matrix scan needs. The model is
        the one model all vectors share, else None."""
        kinds: set[tuple[str | None, int]] = set()
        missing = False
        if self.base is not None and len(self.base.ids) > len(self._hidden):
            header = self.base.header
            if not header.uniform:
                return header.model, None, False
            kinds.add((header.model, header.dim))
        for change in self._live:
            if change.vector is None:
                missing = True
            else:
                kinds.add((change.model, int(change.vector.shape[-1])))
        models = {m for m, _ in kinds}
        model = next(iter(models)) if len(models) == 1 else None
        if missing or len(kinds) > 1:
            return model, None, False
        return (model, kinds.pop()[1], True) if kinds else (None, None, True)

    def scores(self, query: np.ndarray) -> tuple[list[str], np.ndarray]:
        """Cosine similarity of `query` to every document (TF-IDF cosine for
        lexical vectors) as (doc_ids, scores). Needs a uniform shape()."""
        import numpy as np

        model, dim, uniform = self.shape()
        if not uniform:
            raise ValueError("the stored vectors are not one uniform matrix")
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        weights = self._idf(dim or q.shape[0]) if _lexical_model(model) else None

        def score(matrix: np.ndarray) -> np.ndarray:
            if weights is None:
                return matrix @ q
            weighted = matrix * weights
            norms = np.linalg.norm(weighted, axis=1)
            norms[norms == 0] = 1.0
            wq = q * weights
            return (weighted @ wq) / (norms * (float(np.linalg.norm(wq)) or 1.0))

        ids: list[str] = []
        parts: list[np.ndarray] = []
        if self.base is not None and len(self.base.ids) > len(self._hidden):
            base_scores = np.empty(len(self.base.ids), dtype=np.float32)
            for start, block in self.base.blocks():
                base_scores[start : start + len(block)] = score(block)
            if self._hidden:
                keep = np.ones(len(self.base.ids), dtype=bool)
                keep[self._hidden] = False
                parts.append(base_scores[keep])
                ids.extend(doc_id for doc_id, k in zip(self.base.ids, keep) if k)
            else:
                parts.append(base_scores)
                ids.extend(self.base.ids)
        if self._live:
            parts.append(score(np.vstack([c.vector for c in self._live]).astype(np.float32)))  # type: ignore[misc]
            ids.extend(c.doc_id for c in self._live)
        return ids, (np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, dtype=np.float32))

    def _idf(self, dim: int) -> np.ndarray:
        """IDF weights over every document's vector (as lexical.idf_weights
        computes them over the full matrix), from the file's frequencies
        adjusted for the overlay."""
        import numpy as np

        df = np.zeros(dim, dtype=np.int64)
        if self.base is not None and self.base.df is not None:
            df += self.base.df
            for row in self.base.rows(self._hidden):
                df -= row > 0
        for change in self._live:
            df += np.asarray(change.vector).reshape(-1) > 0
        n = max(1, self.doc_count())
        return (np.log((n + 1.0) / (df.astype(np.float32) + 1.0)) + 1.0).astype(np.float32)


def cache_path_for(store_path: Path) -> Path:
    """Where a store file's vector file lives: beside it."""
    return store_path.with_name(store_path.name + ".vectors")


def _current(source: VectorSource, base: _Base | None) -> tuple[_Base | None, VectorChanges]:
    """The changes since `base` was written, or since the beginning when
    `base` belongs to another store or to a later state of this one."""
    changes = source.vector_changes(base.header.generation if base is not None else 0)
    if base is not None and (
        base.header.store_id != changes.store_id
        or base.header.generation > changes.generation
        or not base.header.uniform  # it holds no vectors to build on
    ):
        return None, source.vector_changes(0)
    return base, changes


def load_vectors(source: VectorSource, path: Path | None) -> VectorView:
    """The store's vectors as of now (see the module docstring). `path` None:
    nothing is read or written, every vector is held in memory."""
    base = _Base.read(path) if path is not None else None
    base, changes = _current(source, base)
    if base is not None and changes.count <= OVERLAY_LIMIT:
        return VectorView(changes.store_id, changes.generation, base, _collect(changes))
    if path is not None:
        try:
            fresh = write_vectors(path, base, changes)
        except OSError as exc:
            log.debug("%s: cannot write the vector file (%s); keeping the vectors in memory", path, exc)
        else:
            return VectorView(changes.store_id, changes.generation, fresh)
        # The changes were consumed by the failed write: ask again.
        base, changes = _current(source, base)
    # Without a file `changes` runs from the beginning: every vector, in memory.
    return VectorView(changes.store_id, changes.generation, base, _collect(changes))


def refresh_vectors(source: VectorSource, path: Path) -> None:
    """Bring the file up to the store's generation; a build calls this when it
    ends. A folder that cannot be written is not an error: readers catch up."""
    header = _Header.peek(path)
    if header is not None and header.uniform:
        # Nothing changed since the file was written (an unchanged rebuild):
        # its header says so, its 100,000 doc ids need not be read.
        now = source.vector_changes(header.generation)
        if now.count == 0 and now.store_id == header.store_id and now.generation == header.generation:
            return
    base, changes = _current(source, _Base.read(path))
    if base is not None and changes.count == 0:
        return
    try:
        write_vectors(path, base, changes)
    except OSError as exc:
        log.debug("%s: cannot write the vector file (%s)", path, exc)


def _collect(changes: VectorChanges) -> dict[str, VectorChange]:
    return {c.doc_id: c for batch in changes.batches for c in batch}


def write_vectors(path: Path, base: _Base | None, changes: VectorChanges) -> _Base:
    """Write the file for `changes.generation`: the changed documents' current
    vectors, then the rows of `base` whose documents did not change.

    Streamed: the changes are consumed batch by batch as the store hands them
    over and each batch is written before the next is fetched, then the kept
    rows are copied block by block, so memory holds one batch or block (plus
    the doc ids) at any size; the first file of a 100,000-document store
    once held every vector at once (900 MiB). Written to a temporary file and
    renamed, so the old file stays whole until the new one is complete.
    Returns the new file as read back."""
    import numpy as np

    if base is not None and not base.header.uniform:
        raise ValueError("a vector file without a matrix cannot be built on")
    path.parent.mkdir(parents=True, exist_ok=True)
    with replaced_atomically(path) as out:  # 0600, like the store
        out.write(b"\0" * HEADER_BYTES)  # the real header goes in last
        matrix = _MatrixWriter(out)
        seen: set[str] = set()
        live_ids: list[str] = []
        for batch in changes.batches:
            # The log may name a document more than once; every entry carries
            # its current vector, so the first one seen stands for all.
            fresh = [c for c in batch if c.doc_id not in seen]
            seen.update(c.doc_id for c in fresh)
            live = [c for c in fresh if not c.removed]
            live_ids += [c.doc_id for c in live]
            matrix.add_changes(live)
        kept = [i for i, doc_id in enumerate(base.ids) if doc_id not in seen] if base is not None else []
        if base is not None and kept:
            matrix.kind(base.header.model, base.header.dim)
            wanted = np.asarray(kept, dtype=np.int64)
            for start, block in base.blocks():
                if not matrix.uniform:
                    break
                lo, hi = np.searchsorted(wanted, [start, start + len(block)])
                if hi > lo:
                    matrix.write(block[wanted[lo:hi] - start])
        ids = live_ids + [base.ids[i] for i in kept] if base is not None else live_ids
        matrix.finish(len(ids))
        width = max([len(d.encode("utf-8")) for d in ids] + [1])
        out.write(b"".join(d.encode("utf-8").ljust(width, b"\0") for d in ids))
        if matrix.df is not None:
            out.write(matrix.df.astype("<i8").tobytes())
        header = _Header(
            changes.store_id,
            changes.generation,
            len(ids),
            matrix.dim,
            matrix.model,
            width,
            matrix.uniform,
            matrix.df is not None,
        )
        out.seek(0)
        out.write(header.to_bytes())
        out.flush()
        os.fsync(out.fileno())
    return _Base(path, header, ids, matrix.df)


class _MatrixWriter:
    """The matrix part of a vector file, written row block by row block while
    its rows are one model and one size. The first row that is not (another
    model or size, a document without a vector) makes the file matrix-less:
    what was written is cut off and nothing more is written."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.uniform = True
        self.model: str | None = None
        self.dim = 0
        self._kinds: set[tuple[str | None, int]] = set()
        self.df: np.ndarray | None = None  # lexical vectors: per-bucket document frequencies

    def kind(self, model: str | None, dim: int) -> None:
        """Rows of `model` and size `dim` are about to be written."""
        self._kinds.add((model, dim))
        if len(self._kinds) > 1:
            self._discard()
        elif self.uniform and not self.dim:
            import numpy as np

            self.model, self.dim = model, dim
            if _lexical_model(model):
                self.df = np.zeros(dim, dtype=np.int64)

    def add_changes(self, live: list[VectorChange]) -> None:
        import numpy as np

        if any(c.vector is None for c in live):
            self._discard()
        for c in live:
            if c.vector is not None:
                self.kind(c.model, int(c.vector.shape[-1]))
        if self.uniform and live:
            self.write(np.vstack([c.vector for c in live]))  # type: ignore[misc]

    def write(self, block: np.ndarray) -> None:
        import numpy as np

        if not self.uniform:
            return
        self.out.write(np.ascontiguousarray(block, dtype="<f4").tobytes())
        if self.df is not None:
            self.df += np.count_nonzero(block > 0, axis=0)

    def _discard(self) -> None:
        if self.uniform:
            self.uniform = False
            self.out.seek(HEADER_BYTES)
            self.out.truncate()

    def finish(self, rows: int) -> None:
        """No matrix without rows: an empty store's file is uniform and has
        no model or size, as before."""
        if not self.uniform:
            # The model all rows share (None when they differ), as before.
            models = {m for m, _ in self._kinds}
            self.model = next(iter(models)) if len(models) == 1 else None
            self.dim, self.df = 0, None
        elif not rows:
            self.model, self.dim, self.df = None, 0, None
