"""BM25 scoring of texts against a question, computed by `bm25s`.

BM25 is the offline lexical scorer: for summaries, for nodes, and for the
chunk baseline of `docsum eval`. Texts are cut into the same stemmed content
words as everywhere else in docsum (`docsum.lexical.terms`), so a question and
a document meet on equal terms.

bm25s does the BM25 arithmetic once, at indexing time: it turns the texts into
a sparse matrix holding every (term, text) pair's score share (IDF, saturated
term frequency, length normalisation). A question's scores are then the sum
of its terms' columns. docsum keeps that matrix and its vocabulary as plain
numpy arrays, so answering a question needs neither bm25s nor its imports
(tqdm among them): `docsum ask` starts as fast as before. The kept vocabulary
is a sorted table searched by bisection (`SortedTerms`), memory-mapped like
the matrix: a question looks up its few terms instead of parsing every term of
the store (at 100,000 documents the JSON vocabulary took a tenth of a second).

Scores are BM25 (Lucene variant, k1 1.5, b 0.75): 0 when a text shares no
term with the question, otherwise positive and unbounded; they compare texts
of one index for one question, not across indexes or questions.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from docsum.lexical import terms

log = logging.getLogger("docsum")

# Lucene's BM25 with bm25s's defaults: the variant search engines use.
BM25_METHOD = "lucene"
BM25_K1 = 1.5
BM25_B = 0.75

INDEX_META_FILE = "docsum.json"
_ARRAYS = ("data", "indices", "indptr")
_VOCAB_ARRAYS = ("vocab_bytes", "vocab_offsets", "vocab_columns")


class SortedTerms:
    """A vocabulary kept on disk: every term's UTF-8 bytes, sorted, one after
    the other (`blob`), where each starts (`offsets`, one more than terms),
    and each term's column. `get` bisects, reading about log2(terms) terms."""

    def __init__(self, blob: np.ndarray, offsets: np.ndarray, columns: np.ndarray) -> None:
        self.blob = blob
        self.offsets = offsets
        self.columns = columns

    @classmethod
    def from_vocab(cls, vocab: dict[str, int]) -> SortedTerms:
        encoded = sorted((term.encode("utf-8"), column) for term, column in vocab.items())
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(term) for term, _ in encoded])
        blob = np.frombuffer(b"".join(term for term, _ in encoded), dtype=np.uint8)
        return cls(blob, offsets, np.asarray([column for _, column in encoded], dtype=np.int64))

    def valid(self, columns: int) -> bool:
        """Consistent with itself and with a matrix of `columns` columns."""
        offsets = self.offsets
        return (
            self.blob.ndim == 1
            and offsets.ndim == 1
            and self.columns.shape == (offsets.size - 1,)
            and offsets.size >= 1
            and int(offsets[0]) == 0
            and int(offsets[-1]) == self.blob.size
            and bool(np.all(np.diff(offsets) >= 0))
            and (self.columns.size == 0 or (int(self.columns.min()) >= 0 and int(self.columns.max()) < columns))
        )

    def _term(self, i: int) -> bytes:
        return self.blob[int(self.offsets[i]) : int(self.offsets[i + 1])].tobytes()

    def get(self, term: str) -> int | None:
        key = term.encode("utf-8")
        lo, hi = 0, int(self.columns.size)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._term(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        return int(self.columns[lo]) if lo < self.columns.size and self._term(lo) == key else None


class BM25Index:
    """BM25 over a fixed list of texts; `scores(question)` gives one score per text.

    `data`, `indices`, `indptr` are the score matrix in compressed sparse
    column form (one column per vocabulary term, rows are texts); `vocab` maps
    a term to its column."""

    def __init__(
        self, vocab: dict[str, int] | SortedTerms, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, size: int
    ) -> None:
        self.vocab = vocab
        self.data = data
        self.indices = indices
        self.indptr = indptr
        self.size = size

    @classmethod
    def from_texts(cls, texts: list[str]) -> BM25Index:
        return cls.from_terms([terms(t) for t in texts])

    @classmethod
    def from_terms(cls, term_lists: list[list[str]]) -> BM25Index:
        if not any(term_lists):
            empty = np.zeros(0, dtype=np.float32)
            return cls({}, empty, np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64), len(term_lists))
        # bm25s shows tqdm progress bars when tqdm is importable; docsum's
        # progress is its own.
        os.environ.setdefault("DISABLE_TQDM", "1")
        import bm25s

        engine = bm25s.BM25(method=BM25_METHOD, k1=BM25_K1, b=BM25_B)
        engine.index(term_lists, show_progress=False, create_empty_token=False)
        matrix = engine.scores
        return cls(
            {str(term): int(column) for term, column in engine.vocab_dict.items()},
            np.asarray(matrix["data"], dtype=np.float32),
            np.asarray(matrix["indices"]),
            np.asarray(matrix["indptr"]),
            len(term_lists),
        )

    def scores(self, question: str) -> np.ndarray:
        """One BM25 score per indexed text (float32, >= 0)."""
        return self.scores_for_terms(terms(question))

    def scores_for_terms(self, query_terms: list[str]) -> np.ndarray:
        out = np.zeros(self.size, dtype=np.float32)
        # Each distinct question term counts once, as bm25s scores a query;
        # unknown words score nothing.
        for term in dict.fromkeys(query_terms):
            column = self.vocab.get(term)
            if column is None:
                continue
            start, end = int(self.indptr[column]), int(self.indptr[column + 1])
            # Rows are unique within a column, so plain fancy-index addition is exact.
            out[self.indices[start:end]] += self.data[start:end]
        return out

    def rows_with(self, term: str) -> np.ndarray:
        """The rows (texts) that contain `term`."""
        column = self.vocab.get(term)
        if column is None:
            return np.zeros(0, dtype=np.int64)
        return np.asarray(self.indices[int(self.indptr[column]) : int(self.indptr[column + 1])], dtype=np.int64)

    # -- persistence -------------------------------------------------------
    def save(self, directory: Path, fingerprint: str, extra: dict[str, np.ndarray] | None = None) -> None:
        """Write the index (and `extra` arrays, as NAME.npy) to `directory`
        atomically: a reader sees the old index or the new one, never half of
        one. Files are private (0600): the vocabulary is the documents' words."""
        with staged_index(Path(directory), fingerprint, self.size) as staging:
            vocab = self.vocab if isinstance(self.vocab, SortedTerms) else SortedTerms.from_vocab(self.vocab)
            arrays = {
                "data": self.data,
                "indices": self.indices,
                "indptr": self.indptr,
                "vocab_bytes": vocab.blob,
                "vocab_offsets": vocab.offsets,
                "vocab_columns": vocab.columns,
                **(extra or {}),
            }
            for name, array in arrays.items():
                np.save(staging / f"{name}.npy", np.asarray(array), allow_pickle=False)

    @classmethod
    def load(cls, directory: Path, fingerprint: str) -> tuple[BM25Index, dict[str, np.ndarray]] | None:
        """The index saved in `directory`, with the extra arrays named in the
        directory, if it was built from the same texts (same fingerprint); else
        None. The arrays are memory-mapped; anything damaged means None."""
        directory = Path(directory)
        try:
            meta = json.loads((directory / INDEX_META_FILE).read_text())
            if not isinstance(meta, dict) or meta.get("fingerprint") != fingerprint:
                return None
            size = int(meta["size"])
            arrays = {p.stem: np.load(p, mmap_mode="r", allow_pickle=False) for p in directory.glob("*.npy")}
            data, indices, indptr = (arrays.pop(name) for name in _ARRAYS)
            vocab = SortedTerms(*(arrays.pop(name) for name in _VOCAB_ARRAYS))
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            log.debug("BM25 index in %s not usable (%s); rebuilding it", directory, exc)
            return None
        columns = indptr.size - 1
        valid = (
            vocab.valid(columns)
            and data.shape == indices.shape
            and (
                columns < 0
                or (int(indptr[0]) == 0 and int(indptr[-1]) == data.size and bool(np.all(np.diff(indptr) >= 0)))
            )
            and (indices.size == 0 or (int(indices.min()) >= 0 and int(indices.max()) < size))
        )
        if not valid:
            log.debug("BM25 index in %s is inconsistent; rebuilding it", directory)
            return None
        return cls(vocab, data, indices, indptr, size), arrays


@contextlib.contextmanager
def staged_index(directory: Path, fingerprint: str, size: int) -> Iterator[Path]:
    """A private staging directory beside `directory` for an index of `size`
    rows: the caller writes its arrays into it; when the block ends the
    index's fingerprint is added and the staging directory takes the place of
    `directory` (a reader sees the old index or the new one, never a mix; at
    worst, after a crash between the two renames, none: then it is built
    again). On any error the staging directory is removed."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))  # 0700
    try:
        yield staging
        (staging / INDEX_META_FILE).write_text(json.dumps({"fingerprint": fingerprint, "size": size}))
        for written in staging.iterdir():
            os.chmod(written, 0o600)  # the vocabulary is the documents' words
        _replace_directory(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _replace_directory(staging: Path, directory: Path) -> None:
    old = directory.with_name(directory.name + ".old")
    if directory.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(directory, old)
    os.replace(staging, directory)
    shutil.rmtree(old, ignore_errors=True)
