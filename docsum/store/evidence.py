"""Lexical evidence for ranking documents: BM25 over each document's summary,
over its nodes (the passages answers are built from), and over its whole
text.

A summary says what a document is about; its nodes hold the details a
question may name (a figure, a quarter, a side character); the whole text
weighs a word a document states once against how often the others do (the
plain method a retriever must never lose to: on the SEC filings it found more
gold documents than summaries and nodes fused). `DocumentEvidence` scores
all three for a question, per document (the summary, the sum of the best
three nodes, the whole text), for the `bm25` and `fused` retrievers; every
node's score serves the chunk baseline of `docsum eval`.

Building the node index reads and tokenizes every node of the store, which
takes seconds on a large store, so it is kept on disk beside the store
(`NAME.sqlite.bm25/`, private like the store) and reused by every later question
until the stored documents change, and a build brings it up to date when it
ends (`refresh_evidence`), so the first question after a build costs what
every later one does. It is written in bounded memory, and an update takes
the postings of unchanged documents from the kept index instead of cutting
their text into terms again (docsum.store.bm25disk). The store reports each document's version
(content hash, split and summary settings, update time) without reading any
text, and the index records the versions it was built from. When that
directory cannot be written (a read-only folder) the index is built in memory
for the one command.

Checking those versions means reading a row per document, seconds at 100,000
documents, so a question first asks the store something cheaper: the index
also records the store's identity and the generation of its change log (the
one the vector file follows, `vector_changes`, which moves with every write
or removal of a document, its summary, nodes and path included). When the
store reports no change since that generation, the kept index is used without
reading a row; otherwise the versions decide, as before.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from docsum.lexical import terms
from docsum.paths import replaced_atomically
from docsum.store.bm25 import BM25_B, BM25_K1, BM25_METHOD, INDEX_META_FILE, BM25Index
from docsum.store.bm25disk import IndexWriter, can_update_from, index_terms, old_postings, read_all
from docsum.store.records import summary_index_text

if TYPE_CHECKING:
    from docsum.store.base import DocumentStore

log = logging.getLogger("docsum")

# Bump when what is indexed, or how it is cut into terms, changes: a kept
# index from another version is then rebuilt instead of trusted. (3: the
# index keeps its document ids, for the check that reads no rows; 4: it
# keeps each document's version, its postings' term frequencies and its
# rows' lengths, which an update starts from; 5: an index of whole documents.)
EVIDENCE_VERSION = 5

# A document's node evidence is the BM25 of its best few passages, summed: a
# document that answers a question usually does so in more than one passage,
# so one stray passage that happens to share the question's words should not
# outweigh a document that discusses the subject. Only a few, or long
# documents would win by length alone.
NODES_PER_DOCUMENT = 3


def node_index_text(path: str, title: str, node_text: str) -> str:
    """A node is indexed with its document's file name and title, as the
    summary is (`summary_index_text`): a passage about "net sales" in
    `2023_Q1_ACME.txt` belongs to Acme's first quarter of 2023 even when the
    passage itself never says so."""
    head = f"File: {path}"
    if title and title.strip():
        head += f"\nTitle: {title.strip()}"
    return f"{head}\n{node_text}"


@dataclass
class DocumentScores:
    """BM25 of one question against every document (rows aligned with
    `DocumentEvidence.doc_ids`): its summary's score, the summed score of
    its best nodes, and its whole text's score."""

    summary: np.ndarray
    best_nodes: np.ndarray
    whole: np.ndarray


def sum_of_best(scores: np.ndarray, owners: np.ndarray, count: int, per_owner: int) -> np.ndarray:
    """For each of `count` owners, the sum of its `per_owner` highest positive
    `scores` (rows of `scores` belong to `owners[row]`)."""
    out = np.zeros(count, dtype=np.float32)
    hit = np.flatnonzero(scores > 0)
    if hit.size == 0:
        return out
    values, groups = scores[hit], owners[hit]
    order = np.lexsort((-values, groups))  # by owner, best first within each
    values, groups = values[order], groups[order]
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    sizes = np.diff(np.r_[starts, groups.size])
    position = np.arange(groups.size) - np.repeat(starts, sizes)
    keep = position < per_owner
    np.add.at(out, groups[keep], values[keep])
    return out


class DocumentEvidence:
    """BM25 indexes over the summaries, the nodes and the whole texts of the documents `doc_ids`."""

    def __init__(
        self, doc_ids: list[str], summaries: BM25Index, nodes: BM25Index, node_owner: np.ndarray, documents: BM25Index
    ) -> None:
        self.doc_ids = doc_ids
        self.summaries = summaries
        self.nodes = nodes
        self.node_owner = node_owner  # node row -> index into doc_ids
        self.documents = documents  # one row per document: its nodes' terms together

    @classmethod
    def from_texts(cls, doc_ids: list[str], summary_texts: list[str], node_texts: list[list[str]]) -> DocumentEvidence:
        """Indexes built in memory: `node_texts[i]` are the nodes of document i."""
        owners = np.asarray([i for i, texts in enumerate(node_texts) for _ in texts], dtype=np.int64)
        node_terms = [[terms(t) for t in texts] for texts in node_texts]
        whole = [[w for words in doc for w in words] for doc in node_terms]
        return cls(
            list(doc_ids),
            BM25Index.from_texts(summary_texts),
            BM25Index.from_terms([words for doc in node_terms for words in doc]),
            owners,
            BM25Index.from_terms(whole),
        )

    def score(self, question: str) -> DocumentScores:
        words = terms(question)
        summary = self.summaries.scores_for_terms(words)
        nodes = sum_of_best(self.nodes.scores_for_terms(words), self.node_owner, len(self.doc_ids), NODES_PER_DOCUMENT)
        return DocumentScores(summary, nodes, self.documents.scores_for_terms(words))

    def coverage(self, question: str, rows: np.ndarray) -> np.ndarray:
        """For the documents at `rows`, the share of the question's content
        words (each weighted by its IDF over the documents) that occur in the
        document's summary or nodes: 1.0 holds every word, 0 none. Unlike a
        BM25 score this is comparable across questions, which is what a
        relevance floor needs (docsum.models.abstain). A word no document holds
        ("unladen swallow") weighs as much as the rarest word and lowers every
        document's share.
        A question without content words covers everything (1.0)."""
        rows = np.asarray(rows, dtype=np.int64)
        weights, held = self._question_words(question, rows)
        if weights.size == 0:
            return np.ones(rows.size, dtype=np.float32)
        return (weights @ held / (weights.sum() or 1.0)).astype(np.float32)

    def joint_coverage(self, question: str, rows: np.ndarray) -> float:
        """The share of the question (weighted as in `coverage`) that the
        documents at `rows` hold between them: a word counts when any of them
        holds it. 1.0 for a question without content words, 0 for no rows."""
        rows = np.asarray(rows, dtype=np.int64)
        weights, held = self._question_words(question, rows)
        if weights.size == 0:
            return 1.0
        if rows.size == 0:
            return 0.0
        return float(weights @ held.any(axis=1) / (weights.sum() or 1.0))

    def counted(self) -> np.ndarray | None:
        """Which documents the IDF weights of `coverage` count (None: all).
        Documents hidden from a question count as absent from the store."""
        return None

    def _question_words(self, question: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The IDF weight of each distinct content word of the question, and
        whether each document at `rows` holds it (words × rows)."""
        words = list(dict.fromkeys(terms(question)))
        counted = self.counted()
        count = len(self.doc_ids) if counted is None else int(counted.sum())
        held = np.zeros((len(words), rows.size), dtype=bool)
        weights = np.zeros(len(words), dtype=np.float64)
        for w, word in enumerate(words):
            present = np.zeros(len(self.doc_ids), dtype=bool)
            present[self.summaries.rows_with(word)] = True
            present[self.node_owner[self.nodes.rows_with(word)]] = True
            df = int(present.sum() if counted is None else (present & counted).sum())
            # An IDF that stays positive for a word every document holds and
            # weighs a word no document holds like the rarest one: in a small
            # store the usual BM25 IDF would weigh it tenfold.
            weights[w] = math.log(1.0 + count / max(df, 1))
            held[w] = present[rows]
        return weights, held

    def node_scores(self, question: str) -> np.ndarray:
        """Every node's score (owners in `node_owner`), for the chunk baseline."""
        return self.nodes.scores_for_terms(terms(question))


def cache_dir(vectors_file: Path) -> Path:
    """Where the BM25 index is kept: beside the store's vector file
    (`NAME.sqlite.vectors` → `NAME.sqlite.bm25/`; for a PostgreSQL store, in
    the local cache directory with its vector file)."""
    return Path(vectors_file).with_suffix(".bm25")


def load_evidence(store: DocumentStore) -> DocumentEvidence:
    """The BM25 evidence of every document in `store`: from the index kept
    beside the store when it is current, else brought up to date now (and
    kept; see `refresh_evidence`)."""
    where = cache_dir(store.vectors_file)
    state = _State.read(store, where)
    if state.cached is not None:
        return state.cached
    try:
        _update(store, where, state)
    except (OSError, _StoreMoved) as exc:
        # A folder docsum cannot write to, or a store that changed while it
        # was read: this command builds the index in memory.
        log.debug("BM25 index in %s not updated (%s); indexing in memory", where, exc)
    else:
        cached = _load_cached(where, state.stamp.fingerprint, state.doc_ids)
        if cached is not None:
            return cached
    return _in_memory(store, state.doc_ids)


def refresh_evidence(store: DocumentStore) -> None:
    """Bring the index kept beside the store up to date; a build calls this
    when it ends, so that its first question reads the index like every
    later one. Best effort, like the index itself: what cannot be written
    now is caught up by the next question."""
    where = cache_dir(store.vectors_file)
    stamp = _read_stamp(where)
    if stamp is not None and _stamped_current(store, where, stamp):
        return
    state = _State.read(store, where)
    if state.cached is not None:
        return
    try:
        _update(store, where, state)
    except (OSError, _StoreMoved) as exc:
        log.debug("BM25 index in %s not updated (%s)", where, exc)


def _stamped_current(store: DocumentStore, where: Path, stamp: _Stamp) -> bool:
    """Whether the store reports no change since the stamp and both kept
    indexes carry its fingerprint: current, known without reading their
    document ids (an unchanged rebuild of 100,000 documents checks this)."""
    changes = store.vector_changes(stamp.generation)
    if changes.count or changes.store_id != stamp.store_id:
        return False
    try:
        return all(
            json.loads((where / part / INDEX_META_FILE).read_text()).get("fingerprint") == stamp.fingerprint
            for part in INDEX_PARTS
        )
    except (OSError, ValueError, AttributeError, UnicodeDecodeError):
        return False


# The kept indexes, each a folder of the index directory.
INDEX_PARTS = ("summaries", "nodes", "documents")


class _StoreMoved(Exception):
    """A document listed at the start of an update was gone when its text was read."""


@dataclass
class _State:
    """What the store holds now, as far as the index is concerned, and the
    kept index when it is current (`cached`)."""

    stamp: _Stamp
    versions: list[tuple[str, str]]
    cached: DocumentEvidence | None

    @property
    def doc_ids(self) -> list[str]:
        return [d for d, _ in self.versions]

    @classmethod
    def read(cls, store: DocumentStore, where: Path) -> _State:
        stamp = _read_stamp(where)
        # Read before any document, so that a stamp written later is never
        # newer than what the index holds (an older one only costs a check).
        changes = store.vector_changes(stamp.generation if stamp is not None else 0)
        now = _Stamp(changes.store_id, changes.generation, "")
        if stamp is not None and changes.count == 0 and changes.store_id == stamp.store_id:
            cached = _load_cached(where, stamp.fingerprint, None)
            if cached is not None:
                return cls(stamp, [], cached)
        versions = store.document_versions()
        digest = hashlib.sha256(f"v{EVIDENCE_VERSION} {BM25_METHOD} {BM25_K1} {BM25_B}\n".encode())
        for doc_id, version in versions:
            digest.update(f"{doc_id}\0{version}\n".encode())
        now.fingerprint = digest.hexdigest()
        cached = _load_cached(where, now.fingerprint, [d for d, _ in versions])
        if cached is not None:
            _write_stamp(where, now)  # the next question need not read the versions
        return cls(now, versions, cached)


def _version_digest(doc_id: str, version: str) -> bytes:
    """A document's version as kept in the index: a changed version (or
    another EVIDENCE_VERSION) means its postings are made again."""
    return hashlib.sha256(f"v{EVIDENCE_VERSION}\0{doc_id}\0{version}".encode()).hexdigest()[:32].encode()


# Documents whose summaries and nodes are read from the store at once.
READ_DOCUMENTS = 500


# What reading a damaged index file raises (a truncated .npy, a flipped byte
# in a header or an offset): such an index is not carried over but made anew.
_DAMAGED_INDEX = (OSError, ValueError, IndexError, KeyError, TypeError, UnicodeDecodeError)


def _update(store: DocumentStore, where: Path, state: _State, reuse: bool = True) -> None:
    """Write the index for `state` in bounded memory (docsum.store.bm25disk):
    the postings of documents whose version the kept index already holds
    are taken from it, the others' summaries and nodes are read and cut into
    terms, a few hundred documents at a time. A kept index whose files are
    damaged is not used: the index is made anew from the store."""
    ids = state.doc_ids
    digests = np.asarray([_version_digest(d, v) for d, v in state.versions], dtype="S32")
    where.mkdir(mode=0o700, parents=True, exist_ok=True)  # a pgvector store may have no cache folder yet
    os.chmod(where, 0o700)  # the vocabulary of private documents
    previous = _Previous.open(where, ids, digests) if reuse else None
    writers: list[IndexWriter] = []
    try:
        for k in range(len(INDEX_PARTS)):
            writers.append(IndexWriter(where, previous.part_terms[k] if previous else None))
        summaries, nodes, documents = writers
        owners: list[np.ndarray] = []
        try:
            next_node = previous.carry_over(summaries, nodes, documents, owners) if previous else 0
        except _DAMAGED_INDEX as exc:
            log.debug("BM25 index in %s is damaged (%s); making it anew", where, exc)
            for writer in writers:
                writer.discard()
            return _update(store, where, state, reuse=False)
        reused = previous.reused_rows() if previous else set()
        changed = [i for i in range(len(ids)) if i not in reused]
        new_owners: list[int] = []
        for start in range(0, len(changed), READ_DOCUMENTS):
            rows = changed[start : start + READ_DOCUMENTS]
            wanted = [ids[i] for i in rows]
            docs = store.get_documents(wanted)
            if [d.doc_id for d in docs] != wanted:
                raise _StoreMoved("a document was removed while the index was made")
            doc_nodes = store.nodes_for(wanted)
            for row, doc in zip(rows, docs):
                summaries.add_text(row, terms(summary_index_text(doc.path, doc.title, doc.summary)))
                whole: list[str] = []
                for node in doc_nodes[doc.doc_id]:
                    words = terms(node_index_text(doc.path, doc.title, node.text))
                    nodes.add_text(next_node, words)
                    whole += words
                    new_owners.append(row)
                    next_node += 1
                documents.add_text(row, whole)
        owners.append(np.asarray(new_owners, dtype=np.int64))
        fingerprint = state.stamp.fingerprint
        doc_ids = np.asarray([d.encode("utf-8") for d in ids], dtype=bytes) if ids else np.zeros(0, dtype="S1")
        summaries.write(where / "summaries", fingerprint, len(ids), {"versions": digests})
        nodes.write(where / "nodes", fingerprint, next_node, {"owners": np.concatenate(owners), "doc_ids": doc_ids})
        documents.write(where / "documents", fingerprint, len(ids), {})
    finally:
        for writer in writers:
            writer.discard()
    _write_stamp(where, state.stamp)


@dataclass
class _Previous:
    """The kept index as the start of an update: which of its documents are
    unchanged (`new_row[j]`: the row now of its document j, -1 when that
    document changed or is gone)."""

    where: Path
    new_row: np.ndarray
    part_terms: list[list[str]]  # each INDEX_PARTS index's vocabulary

    @classmethod
    def open(cls, where: Path, ids: list[str], digests: np.ndarray) -> _Previous | None:
        parts = [where / part for part in INDEX_PARTS]
        summaries, nodes = parts[0], parts[1]
        try:
            if not all(can_update_from(d) for d in parts):
                return None
            metas = [json.loads((d / INDEX_META_FILE).read_text()) for d in parts]
            if len({m.get("fingerprint") for m in metas}) != 1:
                return None  # written by different updates (one interrupted)
            old_ids = [raw.decode("utf-8") for raw in read_all(nodes / "doc_ids.npy").tolist()]
            old_digests = read_all(summaries / "versions.npy")
            if old_digests.shape != (len(old_ids),) or int(metas[0]["size"]) != len(old_ids):
                return None
            row_now = {d: i for i, d in enumerate(ids)}
            new_row = np.full(len(old_ids), -1, dtype=np.int64)
            for j, (doc_id, digest) in enumerate(zip(old_ids, old_digests.tolist())):
                i = row_now.get(doc_id)
                if i is not None and digests[i] == digest:
                    new_row[j] = i
            return cls(where, new_row, [index_terms(d) for d in parts])
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            log.debug("BM25 index in %s cannot be updated (%s); making it anew", where, exc)
            return None

    def reused_rows(self) -> set[int]:
        return set(self.new_row[self.new_row >= 0].tolist())

    def carry_over(
        self, summaries: IndexWriter, nodes: IndexWriter, documents: IndexWriter, owners: list[np.ndarray]
    ) -> int:
        """Hand the unchanged documents' postings to the writers; their nodes
        become the first node rows. Returns how many nodes that is."""
        old_nodes = self.where / "nodes"
        keep = self.new_row >= 0
        for writer, part in ((summaries, "summaries"), (documents, "documents")):  # one row per document
            writer.set_lengths(self.new_row[keep], read_all(self.where / part / "lengths.npy")[keep])
            for columns, rows, tfs in old_postings(self.where / part):
                now = self.new_row[rows]
                moved = now >= 0
                writer.add_postings(columns[moved], now[moved], tfs[moved])
        old_owners = read_all(old_nodes / "owners.npy").astype(np.int64)
        kept_nodes = self.new_row[old_owners] >= 0
        node_row = np.cumsum(kept_nodes) - 1
        node_row[~kept_nodes] = -1
        owners.append(self.new_row[old_owners[kept_nodes]])
        nodes.set_lengths(node_row[kept_nodes], read_all(old_nodes / "lengths.npy")[kept_nodes])
        for columns, rows, tfs in old_postings(old_nodes):
            now = node_row[rows]
            moved = now >= 0
            nodes.add_postings(columns[moved], now[moved], tfs[moved])
        return int(kept_nodes.sum())


def _in_memory(store: DocumentStore, ids: list[str]) -> DocumentEvidence:
    """The index of the documents `ids`, built in memory for one command."""
    docs = {d.doc_id: d for d in store.get_documents(ids)}
    ids = [d for d in ids if d in docs]
    nodes = store.nodes_for(ids)
    return DocumentEvidence.from_texts(
        ids,
        [summary_index_text(docs[d].path, docs[d].title, docs[d].summary) for d in ids],
        [[node_index_text(docs[d].path, docs[d].title, n.text) for n in nodes[d]] for d in ids],
    )


@dataclass
class _Stamp:
    """Which index (`fingerprint`) was current at which state of which store."""

    store_id: str
    generation: int
    fingerprint: str


_STAMP_FILE = "stamp.json"


def _read_stamp(where: Path) -> _Stamp | None:
    try:
        data = json.loads((where / _STAMP_FILE).read_text())
        return _Stamp(str(data["store_id"]), int(data["generation"]), str(data["fingerprint"]))
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


def _write_stamp(where: Path, stamp: _Stamp) -> None:
    """Best effort, like the index itself."""
    try:
        with replaced_atomically(where / _STAMP_FILE) as out:
            out.write(json.dumps(stamp.__dict__).encode())
    except OSError as exc:
        log.debug("could not record the BM25 index's stamp in %s (%s)", where, exc)


def _load_cached(where: Path, fingerprint: str, doc_ids: list[str] | None) -> DocumentEvidence | None:
    """The kept index built with `fingerprint`; its documents are `doc_ids`
    (None: the ones it recorded)."""
    summaries = BM25Index.load(where / "summaries", fingerprint)
    nodes = BM25Index.load(where / "nodes", fingerprint)
    documents = BM25Index.load(where / "documents", fingerprint)
    if summaries is None or nodes is None or documents is None:
        return None
    if doc_ids is None:
        kept = nodes[1].get("doc_ids")
        if kept is None or kept.ndim != 1 or kept.dtype.kind != "S":
            return None
        try:
            doc_ids = [raw.decode("utf-8") for raw in kept.tolist()]
        except UnicodeDecodeError:
            return None
    if summaries[0].size != len(doc_ids) or documents[0].size != len(doc_ids):
        return None
    owners = nodes[1].get("owners")
    if (
        owners is None
        or owners.shape != (nodes[0].size,)
        or (owners.size and (owners.min() < 0 or owners.max() >= len(doc_ids)))
    ):
        return None
    return DocumentEvidence(doc_ids, summaries[0], nodes[0], np.asarray(owners, dtype=np.int64), documents[0])
