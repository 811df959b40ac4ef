"""The store as the retrievers see it: vectors from the vector file beside the
store (or searched by the store itself, pgvector), summaries read only for
the documents a retriever keeps.

This is what keeps a question's cost flat as the store grows: one block-wise
scan of the vectors (docsum.store.vectors), then a handful of rows by id. Only LLM
choice over the whole store (`--retriever llm`) reads every summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from docsum.errors import ConfigError
from docsum.query.retrieve import SummaryCorpus, SummaryEntry, query_vector, score_by_embedding
from docsum.store.evidence import DocumentEvidence, DocumentScores, load_evidence
from docsum.store.vectors import VectorView, load_vectors

if TYPE_CHECKING:
    import numpy as np

    from docsum.models.llm import LLM
    from docsum.store.base import DocumentStore
    from docsum.store.pgvector import ServerSearch


class StoreCorpus:
    """A SummaryCorpus over an open store. `vectors_path` None: no vector
    file is read or written (every vector is fetched into memory)."""

    def __init__(self, store: DocumentStore, vectors_path: Path | None) -> None:
        self.store = store
        self.vectors_path = vectors_path
        self._view: VectorView | None = None
        self._size: int | None = None
        self._evidence: DocumentEvidence | None = None
        self._server: ServerSearch | None | bool = False  # False: not asked yet

    @classmethod
    def beside(cls, store: DocumentStore) -> StoreCorpus:
        """The corpus of a store, with its vector file (beside a store file;
        in the data directory for a PostgreSQL store)."""
        return cls(store, store.vectors_file)

    def size(self) -> int:
        if self._size is None:
            self._size = self.store.document_count()
        return self._size

    def vectors(self) -> VectorView:
        if self._view is None:
            self._view = load_vectors(self.store, self.vectors_path)
        return self._view

    def server_search(self) -> ServerSearch | None:
        """What the store searches itself (asked once per corpus), else None."""
        if self._server is False:
            self._server = self.store.server_search()
        return self._server  # type: ignore[return-value]

    async def embedding_scores(
        self, llm: LLM, query: str, limit: int | None = None
    ) -> tuple[list[str], np.ndarray, list[str]]:
        server = self.server_search()
        if server is not None:
            # The store finds the `limit` nearest itself: no vector leaves it.
            q = await query_vector(llm, query, server.model)
            _check_dim(q.shape[-1], server.dim)
            ids, scores = self.store.nearest_summaries(q, limit)
            return ids, scores, []
        view = self.vectors()
        model, dim, uniform = view.shape()
        if not uniform:
            # Some summaries lack a vector, or two models were mixed: the old
            # whole-store path, which says so in its notes.
            entries = [SummaryEntry.from_record(d) for d in self.store.list_documents(with_embeddings=True)]
            scores, notes = await score_by_embedding(llm, query, entries)
            return [e.doc_id for e in entries], scores, notes
        if view.doc_count() == 0:
            import numpy as np

            return [], np.zeros(0, dtype=np.float32), []
        q = await query_vector(llm, query, model)
        _check_dim(q.shape[-1], dim)
        ids, scores = view.scores(q)
        return ids, scores, []

    def entries(self, doc_ids: list[str]) -> list[SummaryEntry]:
        return [SummaryEntry.from_record(d) for d in self.store.get_documents(doc_ids)]

    def embedding_model(self) -> str | None:
        server = self.server_search()
        if server is not None:
            return server.model
        model, _, uniform = self.vectors().shape()
        return model if uniform else None

    def bm25_evidence(self) -> DocumentEvidence:
        """BM25 over summaries and nodes, kept beside the store (docsum.store.evidence)."""
        if self._evidence is None:
            self._evidence = load_evidence(self.store)
        return self._evidence

    def all_entries(self) -> list[SummaryEntry]:
        return [SummaryEntry.from_record(d) for d in self.store.list_documents()]


def _check_dim(got: int, stored: int | None) -> None:
    if got != stored:
        raise ConfigError(
            f"the embedding model returned {got} dimensions but the store holds {stored}; rebuild the store"
        )


class HiddenDocuments:
    """A corpus with some documents left out of retrieval (docsum eval
    --unanswerable hides a question's gold documents this way)."""

    def __init__(self, corpus: SummaryCorpus, hidden: frozenset[str]) -> None:
        self.corpus = corpus
        self.hidden = hidden

    def size(self) -> int:
        return self.corpus.size()

    async def embedding_scores(
        self, llm: LLM, query: str, limit: int | None = None
    ) -> tuple[list[str], np.ndarray, list[str]]:
        # Asked for `limit` nearest, the hidden ones may be among them.
        wider = None if limit is None else limit + len(self.hidden)
        ids, scores, notes = await self.corpus.embedding_scores(llm, query, wider)
        keep = [i for i, doc_id in enumerate(ids) if doc_id not in self.hidden]
        return [ids[i] for i in keep], scores[keep], notes

    def entries(self, doc_ids: list[str]) -> list[SummaryEntry]:
        return self.corpus.entries([d for d in doc_ids if d not in self.hidden])

    def all_entries(self) -> list[SummaryEntry]:
        return [e for e in self.corpus.all_entries() if e.doc_id not in self.hidden]

    def embedding_model(self) -> str | None:
        return self.corpus.embedding_model()

    def bm25_evidence(self) -> DocumentEvidence:
        return HiddenEvidence(self.corpus.bm25_evidence(), self.hidden)


class HiddenEvidence(DocumentEvidence):
    """BM25 evidence in which hidden documents score nothing (summary, nodes
    and whole text alike), so the fused and bm25 retrievers never see them either,
    and count for nothing in the question's word weights (`counted`)."""

    def __init__(self, evidence: DocumentEvidence, hidden: frozenset[str]) -> None:
        super().__init__(evidence.doc_ids, evidence.summaries, evidence.nodes, evidence.node_owner, evidence.documents)
        import numpy as np

        self.hidden_rows = np.asarray([doc_id in hidden for doc_id in evidence.doc_ids], dtype=bool)

    def score(self, question: str) -> DocumentScores:
        found = super().score(question)
        found.summary[self.hidden_rows] = 0.0
        found.best_nodes[self.hidden_rows] = 0.0
        found.whole[self.hidden_rows] = 0.0
        return found

    def counted(self) -> np.ndarray:
        # The store as if the hidden documents were not in it: a word only
        # they hold is a word no document holds.
        return ~self.hidden_rows

    def node_scores(self, question: str) -> np.ndarray:
        scores = super().node_scores(question)
        if scores.size:
            scores[self.hidden_rows[self.node_owner]] = 0.0
        return scores
