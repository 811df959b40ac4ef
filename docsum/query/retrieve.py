"""Pick documents by their summaries: embedding similarity, LLM choice, or both.

Scores are always carried onto the chosen documents (cosine similarity for the
embedding retriever, the LLM's relevance / 10 for LLM choice) so that cutoffs,
rerank and reorder have something to work with.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from docsum.errors import ConfigError
from docsum.lexical import LEXICAL_EMBED_MODEL, lexical_scores, lexical_vectors
from docsum.models.llm import LLM
from docsum.models.prompts import CHOICE_SELECT_PROMPT, PromptTemplate
from docsum.query.rating import planned_rating_calls, rate_in_batches
from docsum.settings import RETRIEVERS, default
from docsum.store.records import summary_index_text

if TYPE_CHECKING:
    from docsum.store.evidence import DocumentEvidence
    from docsum.store.records import DocumentRecord

log = logging.getLogger("docsum")


@dataclass
class SummaryEntry:
    doc_id: str
    path: str
    summary: str
    embedding: np.ndarray | None = None
    embedding_model: str | None = None
    title: str = ""

    @property
    def index_text(self) -> str:
        return summary_index_text(self.path, self.title, self.summary)

    @classmethod
    def from_record(cls, doc: DocumentRecord) -> SummaryEntry:
        return cls(doc.doc_id, doc.path, doc.summary, doc.embedding, doc.embedding_model, doc.title)


@dataclass
class Candidate:
    doc_id: str
    path: str
    summary: str
    score: float | None = None
    chosen: bool = False
    via: str = ""  # which retriever scored it
    # The fused retriever's raw evidence, by name (see FUSED_SIGNALS).
    signals: dict[str, float] = field(default_factory=dict)
    # What a relevance floor is compared with: the cosine for the embedding
    # retriever, the question's share held by the document for bm25 and fused
    # (docsum.evidence.DocumentEvidence.coverage). None: no floor applies.
    relevance: float | None = None


@dataclass
class Retrieval:
    retriever: str
    chosen: list[Candidate]  # best first
    candidates: list[Candidate]  # everything that was scored, best first
    notes: list[str] = field(default_factory=list)
    parse_failed: bool = False


# ---------------------------------------------------------------------------
# Retrievers.


def default_retriever(llm: LLM) -> str:
    """`fused` unless the summaries are embedded by a server's model: offline
    vectors (lexical, or the small local model) rank worse alone than fused
    with BM25 node evidence, while a server's embedding model on its own is the
    reference system's retriever."""
    from docsum.models.localembed import LOCAL_EMBED_MODEL

    if llm.metadata.extractive or llm.metadata.embed_model in (LEXICAL_EMBED_MODEL, LOCAL_EMBED_MODEL):
        return "fused"
    return "embedding"


async def query_vector(llm: LLM, query: str, model: str | None) -> np.ndarray:
    if model == LEXICAL_EMBED_MODEL or model is None:
        return lexical_vectors([query])[0]
    if model != llm.metadata.embed_model:
        raise ConfigError(
            f"the store's summaries were embedded with {model!r} but the configured embedding model is "
            f"{llm.metadata.embed_model!r}; pass --embed-model {model} or rebuild"
        )
    return (await llm.aembed([query]))[0]


class SummaryCorpus(Protocol):
    """What the retrievers read summaries from. The rule that keeps a question's
    cost flat as the store grows: score every document from its vector, then
    read summaries only for the documents kept (`entries`); only LLM choice over
    the whole store needs `all_entries`."""

    def size(self) -> int: ...

    async def embedding_scores(
        self, llm: LLM, query: str, limit: int | None = None
    ) -> tuple[list[str], np.ndarray, list[str]]:
        """(doc_ids, cosine scores, notes) for every document, or at least
        for the `limit` best (a store that searches its own vectors returns
        only those)."""
        ...

    def entries(self, doc_ids: list[str]) -> list[SummaryEntry]:
        """The named documents' summaries, in that order (unknown ids left out)."""
        ...

    def all_entries(self) -> list[SummaryEntry]: ...

    def embedding_model(self) -> str | None:
        """The one model every summary vector comes from, else None."""
        ...

    def bm25_evidence(self) -> DocumentEvidence:
        """BM25 over every document's summary and nodes (see docsum.store.evidence)."""
        ...


class EntryCorpus:
    """A corpus held in memory as a list (the library's and eval's way)."""

    def __init__(self, entries: list[SummaryEntry]) -> None:
        self._entries = entries
        self._by_id = {e.doc_id: e for e in entries}
        self._evidence: DocumentEvidence | None = None

    def size(self) -> int:
        return len(self._entries)

    async def embedding_scores(
        self, llm: LLM, query: str, limit: int | None = None
    ) -> tuple[list[str], np.ndarray, list[str]]:
        scores, notes = await score_by_embedding(llm, query, self._entries)
        return [e.doc_id for e in self._entries], scores, notes

    def entries(self, doc_ids: list[str]) -> list[SummaryEntry]:
        return [self._by_id[d] for d in doc_ids if d in self._by_id]

    def all_entries(self) -> list[SummaryEntry]:
        return list(self._entries)

    def embedding_model(self) -> str | None:
        models = {e.embedding_model for e in self._entries if e.embedding is not None}
        have_all = all(e.embedding is not None for e in self._entries)
        return models.pop() if have_all and len(models) == 1 else None

    def bm25_evidence(self) -> DocumentEvidence:
        """Entries carry no nodes: the evidence is their summaries alone."""
        from docsum.store.evidence import DocumentEvidence

        if self._evidence is None:
            self._evidence = DocumentEvidence.from_texts(
                [e.doc_id for e in self._entries], [e.index_text for e in self._entries], [[] for _ in self._entries]
            )
        return self._evidence


def as_corpus(entries: list[SummaryEntry] | SummaryCorpus) -> SummaryCorpus:
    return EntryCorpus(entries) if isinstance(entries, list) else entries


def planned_choice_calls(retriever: str, documents: int, batch_size: int, candidates: int) -> int:
    """LLM calls the retriever will make over `documents` summaries (at least:
    a batch also closes early when the next summary would not fit the window)."""
    if retriever == "llm":
        return planned_rating_calls(documents, batch_size)
    if retriever == "hybrid":
        return planned_rating_calls(min(documents, candidates), batch_size)
    return 0


async def score_by_embedding(llm: LLM, query: str, entries: list[SummaryEntry]) -> tuple[np.ndarray, list[str]]:
    """Cosine similarity of the question to every summary, in one matrix product."""
    notes: list[str] = []
    if not entries:
        return np.zeros(0, dtype=np.float32), notes
    models = {e.embedding_model for e in entries}
    have_all = all(e.embedding is not None for e in entries)
    dims = {e.embedding.shape[-1] for e in entries if e.embedding is not None}
    if not have_all or len(models) != 1 or len(dims) != 1:
        why = (
            "some summaries have no stored embedding"
            if not have_all
            else ("the stored summary embeddings come from different models or differ in size")
        )
        notes.append(f"{why}; scored all summaries with lexical vectors instead")
        matrix = lexical_vectors([e.index_text for e in entries])
        return lexical_scores(lexical_vectors([query])[0], matrix), notes
    model = models.pop()
    matrix = np.vstack([e.embedding for e in entries]).astype(np.float32)  # type: ignore[misc]
    q = await query_vector(llm, query, model)
    if model == LEXICAL_EMBED_MODEL:
        return lexical_scores(q, matrix), notes
    if q.shape[-1] != matrix.shape[1]:
        raise ConfigError(
            f"the embedding model returned {q.shape[-1]} dimensions but the store holds {matrix.shape[1]}; rebuild the store"
        )
    return matrix @ q, notes


def _candidates(entries: list[SummaryEntry], scores: np.ndarray | list[float | None], via: str) -> list[Candidate]:
    out = [
        Candidate(e.doc_id, e.path, e.summary, None if s is None else float(s), via=via)
        for e, s in zip(entries, scores)
    ]
    out.sort(key=lambda c: -(c.score if c.score is not None else -1.0))
    return out


async def retrieve_by_embedding(
    llm: LLM,
    query: str,
    entries: list[SummaryEntry] | SummaryCorpus,
    top_k: int,
    keep: int | None = None,
    floor: float | None = None,
) -> Retrieval:
    """The `top_k` best-scored documents that score above zero and reach
    `floor` (see docsum.models.abstain.relevance_floor): top_k is a maximum, not a
    quota. Summaries are read for the `keep` best only (None: all), which are
    the candidates reported."""
    corpus = as_corpus(entries)
    limit = None if keep is None else max(keep, top_k)
    ids, scores, notes = await corpus.embedding_scores(llm, query, limit)
    # Equal scores are cut by id, which is the same in every store of the same
    # folder: the store's own listing order (or a server's index scan) is not.
    order = np.lexsort((np.asarray(ids, dtype=object), -np.asarray(scores, dtype=np.float64)))
    if keep is not None:
        order = order[: max(keep, top_k)]
    score_of = {ids[i]: float(scores[i]) for i in order}
    kept = corpus.entries([ids[i] for i in order])
    # Equal scores rank by path, as they did when every summary was listed.
    kept.sort(key=lambda e: (-score_of[e.doc_id], e.path))
    ranked = _candidates(kept, [score_of[e.doc_id] for e in kept], "embedding")
    for c in ranked:
        c.relevance = c.score
    return _choose("embedding", ranked, top_k, notes, floor)


def passes_floor(candidate: Candidate, floor: float | None) -> bool:
    """Scored above zero, and at or above the relevance floor (if any)."""
    if (candidate.score or 0) <= 0:
        return False
    return floor is None or candidate.relevance is None or candidate.relevance >= floor


def _choose(
    retriever: str,
    ranked: list[Candidate],
    top_k: int,
    notes: list[str],
    floor: float | None = None,
    relative: float | None = None,
) -> Retrieval:
    """The best `top_k` that pass the floor: a maximum, never a quota. With
    `relative`, a document must also hold at least that share of the best
    chosen document's relevance."""
    chosen = [c for c in ranked[:top_k] if passes_floor(c, floor)]
    if relative is not None and chosen:
        best = max(c.relevance or 0.0 for c in chosen)
        chosen = [c for c in chosen if (c.relevance or 0.0) >= relative * best]
    if not chosen and ranked:
        top = max((c.relevance for c in ranked[:top_k] if c.relevance is not None), default=None)
        if floor is not None and (ranked[0].score or 0) > 0 and top is not None:
            notes.append(f"no document reaches the relevance floor of {floor:g} (best {top:.3f})")
        else:
            notes.append("no summary shares anything with the question")
    for c in chosen:
        c.chosen = True
    return Retrieval(retriever, chosen, ranked, notes)


# Reciprocal-rank fusion constant: the usual 60 (Cormack et al., 2009). A
# large k keeps one signal's first place from outvoting the others' agreement.
RRF_K = 60


def reciprocal_rank_fusion(signals: list[np.ndarray], k: int = RRF_K) -> np.ndarray:
    """Each document's reciprocal-rank fusion over `signals` (score arrays
    aligned with the documents), scaled to [0, 1]: 1.0 means ranked first by
    every signal, 0 means no signal found anything in it. A document a signal
    scores 0 (nothing shared with the question) gets no share of that signal."""
    if not signals or signals[0].size == 0:
        return np.zeros(0 if not signals else signals[0].size, dtype=np.float32)
    fused = np.zeros(signals[0].size, dtype=np.float64)
    for scores in signals:
        order = np.argsort(-scores, kind="stable")
        ranks = np.empty(scores.size, dtype=np.float64)
        ranks[order] = np.arange(1, scores.size + 1)
        fused += np.where(scores > 0, 1.0 / (k + ranks), 0.0)
    return (fused / (len(signals) / (k + 1.0))).astype(np.float32)


def _kept_candidates(
    corpus: SummaryCorpus,
    ids: list[str],
    order: np.ndarray,
    score: np.ndarray,
    signals: dict[str, np.ndarray],
    via: str,
    keep: int | None,
    top_k: int,
) -> list[Candidate]:
    """Candidates for the best documents in `order` (the `keep` best, None:
    all): only their summaries are read."""
    if keep is not None:
        order = order[: max(keep, top_k)]
    rows = {ids[i]: int(i) for i in order}  # in rank order
    position = {doc_id: p for p, doc_id in enumerate(rows)}
    out = []
    for e in corpus.entries(list(rows)):
        i = rows[e.doc_id]
        out.append(
            Candidate(
                e.doc_id,
                e.path,
                e.summary,
                float(score[i]),
                via=via,
                signals={name: round(float(values[i]), 4) for name, values in signals.items()},
            )
        )
    out.sort(key=lambda c: position[c.doc_id])
    return out


def documents_about(corpus: SummaryCorpus, name: str, limit: int) -> list[Candidate]:
    """The `limit` documents whose summaries BM25 ranks best for `name` alone,
    from the whole store: a hop's document ("Veldra" for "a town of
    Veldra") shares too few of the question's own words to be among the
    question's candidates."""
    evidence = corpus.bm25_evidence()
    scores = evidence.score(name).summary
    # The best few of a large store without sorting all of it.
    best = np.argpartition(-scores, limit)[:limit] if scores.size > limit else np.arange(scores.size)
    order = best[np.argsort(-scores[best], kind="stable")]
    order = order[scores[order] > 0]
    return _kept_candidates(corpus, evidence.doc_ids, order, scores, {}, "bm25", None, limit)


def _relative(floor: float | None) -> float | None:
    """The relative floor that goes with a share floor (none without a floor)."""
    from docsum.models.abstain import RELATIVE_COVERAGE_FLOOR

    return None if floor is None else RELATIVE_COVERAGE_FLOOR


def _held_together(found: Retrieval, evidence: DocumentEvidence, query: str, floor: float | None) -> Retrieval:
    """Nothing chosen when the chosen documents together hold less of the
    question than the joint floor that goes with `floor`
    (docsum.models.abstain.joint_floor): each may pass the floor on a word or
    two while none holds what the question is about."""
    from docsum.models.abstain import joint_floor

    least = joint_floor(floor)
    if least is None or not found.chosen:
        return found
    row = {doc_id: i for i, doc_id in enumerate(evidence.doc_ids)}
    share = evidence.joint_coverage(query, np.asarray([row[c.doc_id] for c in found.chosen], dtype=np.int64))
    if share >= least:
        return found
    for c in found.chosen:
        c.chosen = False
    found.notes.append(f"the chosen documents together hold {share:.3f} of the question, below {least:g}")
    found.chosen = []
    return found


def _with_coverage(evidence: DocumentEvidence, query: str, ranked: list[Candidate]) -> list[Candidate]:
    """Each candidate's share of the question (its relevance for the floor)."""
    row = {doc_id: i for i, doc_id in enumerate(evidence.doc_ids)}
    shares = evidence.coverage(query, np.asarray([row[c.doc_id] for c in ranked], dtype=np.int64))
    for c, share in zip(ranked, shares):
        c.relevance = round(float(share), 4)
    return ranked


async def retrieve_by_bm25(
    query: str, corpus: SummaryCorpus, top_k: int, keep: int | None = None, floor: float | None = None
) -> Retrieval:
    """Summaries only, scored by BM25 (raw score: 0 shares nothing, higher is
    better); `floor` applies to the question's share each document holds."""
    evidence = corpus.bm25_evidence()
    scores = evidence.score(query).summary
    order = np.argsort(-scores, kind="stable")
    ranked = _kept_candidates(corpus, evidence.doc_ids, order, scores, {}, "bm25", keep, top_k)
    found = _choose("bm25", _with_coverage(evidence, query, ranked), top_k, [], floor, _relative(floor))
    return _held_together(found, evidence, query, floor)


async def retrieve_fused(
    llm: LLM, query: str, corpus: SummaryCorpus, top_k: int, keep: int | None = None, floor: float | None = None
) -> Retrieval:
    """Each document scored from its summary and its best nodes together:
    reciprocal-rank fusion of BM25 over summaries, BM25 of the best three
    nodes summed, BM25 of the whole text, and, when the summaries carry real embeddings (a server's or
    the local embedder's, not the offline lexical vectors), cosine similarity
    of the summary embedding. The score is the fusion in [0, 1]; each
    candidate also carries the raw signals (`summary_bm25`, `node_bm25`,
    `document_bm25`, `summary_cosine`). Fusion is by rank, so it says nothing about how well
    the best document matches: `floor` applies to the question's share each
    document holds (its `relevance`) instead."""
    notes: list[str] = []
    evidence = corpus.bm25_evidence()
    found = evidence.score(query)
    signals = {"summary_bm25": found.summary, "node_bm25": found.best_nodes, "document_bm25": found.whole}
    if corpus.embedding_model() not in (None, LEXICAL_EMBED_MODEL):
        ids, cosine, notes = await corpus.embedding_scores(llm, query)
        if not notes:  # a note means the vectors were unusable and lexical stood in
            signals["summary_cosine"] = aligned_scores(evidence.doc_ids, ids, cosine)
    fused = reciprocal_rank_fusion(list(signals.values()))
    # Ties in the fusion (first by one signal, second by the other) go to the
    # document whose best passages match best: answers are read from nodes.
    order = np.lexsort((-found.summary, -found.best_nodes, -fused))
    ranked = _kept_candidates(corpus, evidence.doc_ids, order, fused, signals, "fused", keep, top_k)
    chosen = _choose("fused", _with_coverage(evidence, query, ranked), top_k, notes, floor, _relative(floor))
    return _held_together(chosen, evidence, query, floor)


def aligned_scores(doc_ids: list[str], ids: list[str], scores: np.ndarray) -> np.ndarray:
    """`scores` (one per `ids`) reordered to follow `doc_ids`; -1 for a
    document `ids` lacks. Vectorised: at 100,000 documents a Python loop
    assigning scores one by one costs a noticeable share of a question."""
    if ids == doc_ids:
        return np.asarray(scores, dtype=np.float32)
    row = {doc_id: i for i, doc_id in enumerate(ids)}
    where = np.fromiter((row.get(d, -1) for d in doc_ids), dtype=np.int64, count=len(doc_ids))
    found = (
        np.asarray(scores, dtype=np.float32)[np.maximum(where, 0)]
        if len(ids)
        else np.zeros(len(doc_ids), dtype=np.float32)
    )
    return np.where(where >= 0, found, np.float32(-1.0)).astype(np.float32)


async def choose_with_llm(
    llm: LLM,
    query: str,
    entries: list[SummaryEntry],
    batch_size: int,
    template: PromptTemplate = CHOICE_SELECT_PROMPT,
) -> tuple[dict[str, float | None], int, int]:
    """Ask the LLM to pick from batches of numbered summaries, all batches at
    once. Returns the picks (doc_id → relevance 0..1), and how many batches'
    answers parsed / were sent."""
    batches = await rate_in_batches(llm, template, query, [e.index_text for e in entries], batch_size)
    picks: dict[str, float | None] = {}
    for batch in batches:
        for index, relevance in batch.ratings:
            picks[entries[index].doc_id] = None if relevance is None else relevance / 10.0
    return picks, sum(1 for batch in batches if batch.parsed), len(batches)


async def retrieve_by_llm(
    llm: LLM, query: str, corpus: list[SummaryEntry] | SummaryCorpus, top_k: int, batch_size: int, via: str = "llm"
) -> Retrieval:
    entries = as_corpus(corpus).all_entries()
    picks, parsed, sent = await choose_with_llm(llm, query, entries, batch_size)
    notes: list[str] = []
    if sent and parsed == 0:
        notes.append(f"the LLM's choices could not be parsed in any of {sent} batch(es); fell back to embedding order")
        fallback = await retrieve_by_embedding(llm, query, entries, top_k)
        fallback.retriever = via
        fallback.notes = notes + fallback.notes
        fallback.parse_failed = True
        return fallback
    if parsed < sent:
        notes.append(f"{sent - parsed} of {sent} choice batches could not be parsed; their documents were not chosen")
    scored = [picks.get(e.doc_id) if e.doc_id in picks else None for e in entries]
    ranked = _candidates(entries, scored, via)
    # Documents the LLM did not pick stay as unscored candidates (for --explain).
    chosen_pool = [c for c in ranked if c.doc_id in picks]
    chosen_pool.sort(key=lambda c: -(c.score if c.score is not None else 0.0))
    chosen = chosen_pool[:top_k]
    for c in chosen:
        c.chosen = True
    if not chosen:
        notes.append("the LLM judged no summary relevant to the question")
    return Retrieval(via, chosen, ranked, notes)


async def retrieve_hybrid(
    llm: LLM,
    query: str,
    corpus: list[SummaryEntry] | SummaryCorpus,
    top_k: int,
    batch_size: int,
    candidates: int,
    keep: int | None = None,
) -> Retrieval:
    # The shortlist is the best `candidates` whatever they score: the LLM
    # judges them, and its "none of these" is the abstention here (a summary
    # sharing no word with the question may still be the one to read).
    corpus = as_corpus(corpus)
    first = await retrieve_by_embedding(llm, query, corpus, candidates, None if keep is None else max(keep, candidates))
    shortlist_ids = {c.doc_id for c in first.candidates[:candidates]}
    # Hand the shortlist to the LLM in embedding order, best first.
    shortlist = corpus.entries([c.doc_id for c in first.candidates[:candidates]])
    second = await retrieve_by_llm(llm, query, shortlist, top_k, batch_size, via="hybrid")
    second.notes = first.notes + [f"embedding shortlist of {len(shortlist)} for LLM choice"] + second.notes
    # Documents left off the shortlist are still candidates (for --explain),
    # with their embedding score and never chosen.
    for c in first.candidates:
        if c.doc_id not in shortlist_ids:
            second.candidates.append(Candidate(c.doc_id, c.path, c.summary, c.score, False, "embedding"))
    return second


async def retrieve(
    retriever: str,
    llm: LLM,
    query: str,
    entries: list[SummaryEntry] | SummaryCorpus,
    *,
    top_k: int,
    batch_size: int = default("choice_batch_size"),
    candidates: int = default("candidates"),
    keep: int | None = None,
    floor: float | None = None,
) -> Retrieval:
    """Pick documents. `keep` bounds the candidates whose summaries are read
    and reported (None: all); LLM choice over the whole store reads them all.
    The `fused` and `bm25` retrievers read the corpus's BM25 evidence.
    `floor` is the relevance floor of the fused, bm25 and embedding
    retrievers (see Candidate.relevance); LLM choice (and hybrid's) has its
    own "none of these"."""
    if retriever == "fused":
        return await retrieve_fused(llm, query, as_corpus(entries), top_k, keep, floor)
    if retriever == "bm25":
        return await retrieve_by_bm25(query, as_corpus(entries), top_k, keep, floor)
    if retriever == "embedding":
        return await retrieve_by_embedding(llm, query, entries, top_k, keep, floor)
    if retriever == "llm":
        return await retrieve_by_llm(llm, query, entries, top_k, batch_size)
    if retriever == "hybrid":
        return await retrieve_hybrid(llm, query, entries, top_k, batch_size, candidates, keep)
    raise ConfigError(f"unknown retriever {retriever!r}; choose one of {', '.join(RETRIEVERS)}")
