"""A BM25 index written to disk in bounded memory, and updated from its
previous version.

`bm25s` (docsum.store.bm25) indexes a list of texts held in memory: every
text's terms, then a matrix of every (term, text) pair. For the summaries
and nodes of 100,000 documents that peaked at 2 GB. `IndexWriter` produces
the same matrix (same arithmetic, same files as `BM25Index.save`) without
holding it:

1. Postings (term, row, term frequency) are collected as texts come, and
   every `RUN_POSTINGS` of them are sorted by term and written to a scratch
   file (a *run*). Only the vocabulary, one length per row and the number of
   rows holding each term stay in memory.
2. The matrix is then written column range by column range, each range small
   enough to hold (`PART_POSTINGS`): the range's slice of every run is read,
   ordered, scored and appended to the output files, which are therefore
   written front to back.

BM25 scores depend on every text (IDF, average length), so a changed
document changes every score; but a text's postings (its terms and their
counts) do not. The index therefore keeps each posting's term frequency and
each row's length beside the scores, and a new index can take the postings of
unchanged rows from the previous one (`old_postings`) instead of reading and
cutting their text into terms again, which is most of the cost.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from docsum.store.bm25 import BM25_B, BM25_K1, SortedTerms, staged_index

# Postings held before they are sorted into a run on disk (12 bytes each).
RUN_POSTINGS = 1 << 20
# Postings scored and written at once (about 40 bytes each while sorted).
PART_POSTINGS = 1 << 20
# Postings read at once from a previous index.
READ_POSTINGS = 1 << 20


def _npy_layout(path: Path) -> tuple[np.dtype, tuple[int, ...], int]:
    """dtype, shape and data offset of a .npy file (its data read with np.fromfile)."""
    with open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(fh)
        if fortran:
            raise ValueError(f"{path}: Fortran-ordered array")
        return dtype, shape, fh.tell()


def read_slice(path: Path, start: int, stop: int) -> np.ndarray:
    """Elements start..stop of a one-dimensional .npy file, read (not mapped:
    mapped pages would stay in the process's resident memory)."""
    dtype, shape, offset = _npy_layout(path)
    if len(shape) != 1 or not 0 <= start <= stop <= shape[0]:
        raise ValueError(f"{path}: no elements {start}..{stop}")
    return np.fromfile(path, dtype=dtype, count=stop - start, offset=offset + start * dtype.itemsize)


def read_all(path: Path) -> np.ndarray:
    dtype, shape, _ = _npy_layout(path)
    return read_slice(path, 0, shape[0]) if len(shape) == 1 else np.load(path, allow_pickle=False)


class _ArrayFile:
    """A one-dimensional .npy file written front to back, its length known first."""

    def __init__(self, path: Path, dtype: str, length: int) -> None:
        self.dtype = np.dtype(dtype)
        self.fh = open(path, "wb")  # noqa: SIM115 - closed by close()
        np.lib.format.write_array_header_1_0(
            self.fh, {"descr": self.dtype.str, "fortran_order": False, "shape": (length,)}
        )

    def write(self, values: np.ndarray) -> None:
        self.fh.write(np.ascontiguousarray(values, dtype=self.dtype).tobytes())

    def close(self) -> None:
        self.fh.close()


class IndexWriter:
    """Collects the postings of one index's rows, then writes the index.

    `terms` seeds the vocabulary (term ids 0, 1, ... in that order), so that
    postings taken from a previous index keep their term ids (its columns)."""

    def __init__(self, scratch: Path, terms: list[str] | None = None) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="bm25-runs-", dir=scratch))
        self.terms: list[str] = list(terms or [])
        self.ids: dict[str, int] = {t: i for i, t in enumerate(self.terms)}
        self.df = np.zeros(len(self.terms), dtype=np.int64)  # rows holding each term
        self.lengths = np.zeros(0, dtype=np.int64)  # terms per row, duplicates counted
        self._buffer: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._buffered = 0
        self._runs: list[Path] = []

    # -- collecting -----------------------------------------------------
    def add_text(self, row: int, words: list[str]) -> None:
        """Row `row` holds `words` (a text cut into terms)."""
        counts = Counter(words)
        ids = np.fromiter((self._term_id(w) for w in counts), dtype=np.int64, count=len(counts))
        self.set_lengths(np.asarray([row]), np.asarray([len(words)]))
        self.add_postings(
            ids, np.full(ids.size, row, dtype=np.int64), np.fromiter(counts.values(), dtype=np.int64, count=len(counts))
        )

    def _term_id(self, word: str) -> int:
        found = self.ids.get(word)
        if found is None:
            found = self.ids[word] = len(self.terms)
            self.terms.append(word)
        return found

    def set_lengths(self, rows: np.ndarray, lengths: np.ndarray) -> None:
        if rows.size and int(rows.max()) >= self.lengths.size:
            grown = np.zeros(max(int(rows.max()) + 1, 2 * self.lengths.size), dtype=np.int64)
            grown[: self.lengths.size] = self.lengths
            self.lengths = grown
        self.lengths[rows] = lengths

    def add_postings(self, term_ids: np.ndarray, rows: np.ndarray, tfs: np.ndarray) -> None:
        """Postings of rows whose lengths are set (each (term, row) once)."""
        if not term_ids.size:
            return
        self._buffer.append((term_ids.astype(np.int32), rows.astype(np.int32), tfs.astype(np.int32)))
        self._buffered += term_ids.size
        if self._buffered >= RUN_POSTINGS:
            self._spill()

    def _spill(self) -> None:
        if not self._buffer:
            return
        terms, rows, tfs = (np.concatenate(parts) for parts in zip(*self._buffer))
        self._buffer, self._buffered = [], 0
        counts = np.bincount(terms, minlength=len(self.terms))
        if counts.size > self.df.size:
            self.df = np.concatenate([self.df, np.zeros(counts.size - self.df.size, dtype=np.int64)])
        self.df[: counts.size] += counts
        order = np.argsort(terms, kind="stable")
        run = self.scratch / f"run{len(self._runs)}"
        run.mkdir()
        for name, values in (("terms", terms), ("rows", rows), ("tfs", tfs)):
            np.save(run / f"{name}.npy", values[order], allow_pickle=False)
        self._runs.append(run)

    # -- writing --------------------------------------------------------
    def write(self, directory: Path, fingerprint: str, size: int, extra: dict[str, np.ndarray]) -> None:
        """Write the index of `size` rows to `directory` (replacing it as a
        whole, as BM25Index.save does), with the term frequencies and row
        lengths a later update starts from, and the `extra` arrays."""
        try:
            self._spill()
            with staged_index(directory, fingerprint, size) as staging:
                self._write_matrix(staging, size)
                for name, array in extra.items():
                    np.save(staging / f"{name}.npy", np.asarray(array), allow_pickle=False)
        finally:
            self.discard()

    def discard(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)

    def _write_matrix(self, out: Path, size: int) -> None:
        lengths = np.zeros(size, dtype=np.int64)
        lengths[: min(size, self.lengths.size)] = self.lengths[:size]
        df = np.zeros(len(self.terms), dtype=np.int64)
        df[: self.df.size] = self.df
        kept = df > 0
        column_of = np.cumsum(kept) - 1  # term id -> column (for kept terms)
        total = int(df.sum())
        indptr = np.zeros(int(kept.sum()) + 1, dtype=np.int64)
        np.cumsum(df[kept], out=indptr[1:])
        # Lucene's IDF and length normalisation, as bm25s computes them.
        idf = np.log1p((size - df + 0.5) / (df + 0.5)).astype(np.float32)
        average = float(lengths.mean()) if size else 1.0
        norm = BM25_K1 * ((1 - BM25_B) + BM25_B * lengths / (average or 1.0))

        parts = self._parts(df)
        cuts = self._run_cuts([start for start, _ in parts] + [len(df)])
        files = {
            name: _ArrayFile(out / f"{name}.npy", dtype, total)
            for name, dtype in (("data", "<f4"), ("indices", "<i4"), ("tf", "<i4"))
        }
        try:
            for p in range(len(parts)):
                terms, rows, tfs = self._part(cuts, p)
                order = np.lexsort((rows, terms))
                terms, rows, tfs = terms[order], rows[order], tfs[order]
                tf = tfs.astype(np.float64)
                files["data"].write(idf[terms] * (tf / (norm[rows] + tf)))
                files["indices"].write(rows)
                files["tf"].write(tfs)
        finally:
            for f in files.values():
                f.close()
        vocab = SortedTerms.from_vocab({t: int(column_of[i]) for i, t in enumerate(self.terms) if kept[i]})
        for name, array in (
            ("indptr", indptr),
            ("vocab_bytes", vocab.blob),
            ("vocab_offsets", vocab.offsets),
            ("vocab_columns", vocab.columns),
            ("lengths", lengths.astype(np.int32)),
        ):
            np.save(out / f"{name}.npy", array, allow_pickle=False)

    @staticmethod
    def _parts(df: np.ndarray) -> list[tuple[int, int]]:
        """Term id ranges of at most PART_POSTINGS postings each (a term with
        more is a range of its own)."""
        parts: list[tuple[int, int]] = []
        ends = np.cumsum(df)
        start, base = 0, 0
        while start < df.size:
            stop = max(int(np.searchsorted(ends, base + PART_POSTINGS, side="right")), start + 1)
            parts.append((start, stop))
            base = int(ends[stop - 1])
            start = stop
        return parts

    def _run_cuts(self, bounds: list[int]) -> list[np.ndarray]:
        """Per run, where each part's terms start in it (runs are sorted by term)."""
        return [np.searchsorted(read_all(run / "terms.npy"), bounds) for run in self._runs]

    def _part(self, cuts: list[np.ndarray], p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pieces = []
        for run, cut in zip(self._runs, cuts):
            start, stop = int(cut[p]), int(cut[p + 1])
            if stop > start:
                pieces.append(tuple(read_slice(run / f"{name}.npy", start, stop) for name in ("terms", "rows", "tfs")))
        if not pieces:
            empty = np.zeros(0, dtype=np.int32)
            return empty, empty, empty
        return tuple(np.concatenate(arrays) for arrays in zip(*pieces))  # type: ignore[return-value]


def index_terms(directory: Path) -> list[str]:
    """The terms of a written index in column order (to seed an IndexWriter)."""
    blob = read_all(directory / "vocab_bytes.npy").tobytes()
    offsets = read_all(directory / "vocab_offsets.npy")
    columns = read_all(directory / "vocab_columns.npy")
    terms = [""] * columns.size
    for position, column in enumerate(columns.tolist()):
        terms[column] = blob[int(offsets[position]) : int(offsets[position + 1])].decode("utf-8")
    return terms


def old_postings(directory: Path) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(columns, rows, term frequencies) of every posting of a written index,
    a block at a time."""
    indptr = read_all(directory / "indptr.npy")
    total = int(indptr[-1]) if indptr.size else 0
    for start in range(0, total, READ_POSTINGS):
        stop = min(total, start + READ_POSTINGS)
        positions = np.arange(start, stop, dtype=np.int64)
        columns = np.searchsorted(indptr, positions, side="right") - 1
        yield columns, read_slice(directory / "indices.npy", start, stop), read_slice(directory / "tf.npy", start, stop)


def can_update_from(directory: Path) -> bool:
    """Whether a written index keeps what an update needs (an index written
    by bm25s in memory does not)."""
    return all((directory / f"{name}.npy").exists() for name in ("tf", "lengths", "indptr", "indices", "vocab_bytes"))


__all__ = ["IndexWriter", "can_update_from", "index_terms", "old_postings", "read_all", "read_slice"]
