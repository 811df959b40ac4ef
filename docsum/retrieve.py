"""Pick documents by their summaries: embedding similarity, LLM choice, or both.

Scores are always carried onto the chosen documents (cosine similarity for the
embedding retriever, the LLM's relevance / 10 for LLM choice) so that cutoffs,
rerank and reorder have something to work with.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from dataclasses import dataclass, field

import numpy as np

from docsum.errors import ConfigError
from docsum.lexical import LEXICAL_EMBED_MODEL, lexical_scores, lexical_vectors
from docsum.llm import LLM
from docsum.prompts import CHOICE_SELECT_PROMPT, PromptTemplate

log = logging.getLogger("docsum")

RETRIEVERS = ("embedding", "llm", "hybrid")


@dataclass
class SummaryEntry:
    doc_id: str
    path: str
    summary: str
    embedding: np.ndarray | None = None
    embedding_model: str | None = None


@dataclass
class Candidate:
    doc_id: str
    path: str
    summary: str
    score: float | None = None
    chosen: bool = False
    via: str = ""  # which retriever scored it


@dataclass
class Retrieval:
    retriever: str
    chosen: list[Candidate]  # best first
    candidates: list[Candidate]  # everything that was scored, best first
    notes: list[str] = field(default_factory=list)
    parse_failed: bool = False


# ---------------------------------------------------------------------------
# Parsing LLM choice answers.

_DOC_WORDS = r"(?:doc(?:ument)?s?|documento|dokument|passage|item|文档|文件|文書|ドキュメント|#)"
_REL_WORDS = r"(?:relevance|relevancia|relevância|pertinence|pertinencia|relevanz|score|rating|相关度|相关性|相關度|関連度|评分|得分|分数)"
_NUM = r"(\d+(?:\.\d+)?)"
_DOC_THEN_NUM = re.compile(_DOC_WORDS + r"\s*(?:no\.?|number|nr\.?|n[°º])?\s*[:：#]?\s*(\d+)", re.IGNORECASE)
_REL_THEN_NUM = re.compile(_REL_WORDS + r"[^\d\n]{0,20}?" + _NUM, re.IGNORECASE)
_LEADING_NUM = re.compile(r"^\s*(?:[-*•]\s*)?\(?(\d+)[.)\]:：]?(?=\s|$|[,，(])")
_ANY_NUM = re.compile(_NUM)


def parse_choices(answer: str, num_choices: int) -> list[tuple[int, float | None]]:
    """(document number, relevance) pairs from an LLM choice answer.

    Accepts JSON (an object with a list of {doc, relevance}, a bare list, or a
    number→score map), `Doc: 2, Relevance: 9`, `Document 2, relevance score: 9`,
    numbered lists, `8/10` scores and common non-English labels. Numbers outside
    1..num_choices are dropped; each number keeps its own score; a repeated
    number keeps its best score. Order: by relevance, then first mention.
    """
    found: dict[int, float | None] = {}
    order: list[int] = []

    def add(doc: int, rel: float | None) -> None:
        if not 1 <= doc <= num_choices:
            return
        if doc not in found:
            order.append(doc)
            found[doc] = rel
        elif rel is not None and (found[doc] is None or rel > found[doc]):  # type: ignore[operator]
            found[doc] = rel

    parsed_json = _parse_json_choices(answer)
    if parsed_json is not None:
        for doc, rel in parsed_json:
            add(doc, rel)
    else:
        for line in answer.splitlines():
            pair = _parse_line(line)
            if pair is not None:
                add(*pair)
    ranked = sorted(order, key=lambda d: (-(found[d] if found[d] is not None else -1.0), order.index(d)))
    return [(d, found[d]) for d in ranked]


def _clean_score(value: object) -> float | None:
    try:
        score = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        match = _ANY_NUM.search(str(value))
        if not match:
            return None
        score = float(match.group(1))
    return max(0.0, min(10.0, score))


def _parse_json_choices(answer: str) -> list[tuple[int, float | None]] | None:
    text = answer.strip()
    if "```" in text:
        text = re.sub(r"```(?:json)?", "", text)
    start = min([i for i in (text.find("{"), text.find("[")) if i >= 0], default=-1)
    if start < 0:
        return None
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError:
        return None
    if isinstance(data, dict):
        for key in ("choices", "documents", "docs", "results", "selected", "answer"):
            if isinstance(data.get(key), list):
                data = data[key]
                break
        else:
            if all(str(k).strip().isdigit() for k in data):
                return [(int(k), _clean_score(v)) for k, v in data.items()]
            if any(k in data for k in ("doc", "document", "id")):
                data = [data]
            else:
                return None
    if not isinstance(data, list):
        return None
    out: list[tuple[int, float | None]] = []
    for item in data:
        if isinstance(item, dict):
            doc = next((item[k] for k in ("doc", "document", "doc_id", "id", "number", "index") if k in item), None)
            rel = next((item[k] for k in ("relevance", "score", "relevance_score", "rating") if k in item), None)
            try:
                out.append((int(str(doc).strip().split()[-1].lstrip("#")), _clean_score(rel) if rel is not None else None))
            except (ValueError, IndexError):
                continue
        elif isinstance(item, (int, float)) or (isinstance(item, str) and item.strip().isdigit()):
            out.append((int(item), None))
        elif isinstance(item, list) and len(item) >= 1:
            try:
                out.append((int(item[0]), _clean_score(item[1]) if len(item) > 1 else None))
            except (ValueError, TypeError):
                continue
    return out


def _parse_line(line: str) -> tuple[int, float | None] | None:
    if not line.strip() or line.lstrip().lower().startswith(("question", "answer:")):
        return None
    doc_match = _DOC_THEN_NUM.search(line)
    if doc_match:
        doc, after = int(doc_match.group(1)), doc_match.end()
    else:
        lead = _LEADING_NUM.match(line)
        if not lead:
            return None
        doc, after = int(lead.group(1)), lead.end()
    rest = line[after:]
    rel_match = _REL_THEN_NUM.search(rest)
    rel: float | None
    if rel_match:
        rel = float(rel_match.group(1))
    else:
        # "Doc 3 - 8/10" or "3. (9)": the next number after the document number.
        nums = _ANY_NUM.findall(rest)
        rel = float(nums[0]) if nums else None
    if rel is not None:
        rel = max(0.0, min(10.0, rel))
    return doc, rel


def format_batch(texts: list[str]) -> str:
    return "\n\n".join(f"Document {i}:\n{t}" for i, t in enumerate(texts, start=1))


# ---------------------------------------------------------------------------
# Retrievers.

async def query_vector(llm: LLM, query: str, model: str | None) -> np.ndarray:
    if model == LEXICAL_EMBED_MODEL or model is None:
        return lexical_vectors([query])[0]
    if model != llm.metadata.embed_model:
        raise ConfigError(
            f"the store's summaries were embedded with {model!r} but the configured embedding model is "
            f"{llm.metadata.embed_model!r}; pass --embed-model {model} or rebuild"
        )
    return (await llm.aembed([query]))[0]


async def score_by_embedding(llm: LLM, query: str, entries: list[SummaryEntry]) -> tuple[np.ndarray, list[str]]:
    """Cosine similarity of the question to every summary, in one matrix product."""
    notes: list[str] = []
    if not entries:
        return np.zeros(0, dtype=np.float32), notes
    models = {e.embedding_model for e in entries}
    have_all = all(e.embedding is not None for e in entries)
    dims = {e.embedding.shape[-1] for e in entries if e.embedding is not None}
    if not have_all or len(models) != 1 or len(dims) != 1:
        notes.append("some summaries have no stored embedding; scored all summaries with lexical vectors instead")
        matrix = lexical_vectors([e.summary for e in entries])
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
    out = [Candidate(e.doc_id, e.path, e.summary, None if s is None else float(s), via=via) for e, s in zip(entries, scores)]
    out.sort(key=lambda c: -(c.score if c.score is not None else -1.0))
    return out


async def retrieve_by_embedding(llm: LLM, query: str, entries: list[SummaryEntry], top_k: int) -> Retrieval:
    scores, notes = await score_by_embedding(llm, query, entries)
    ranked = _candidates(entries, scores, "embedding")
    chosen = [c for c in ranked[:top_k] if (c.score or 0) > 0]
    if not chosen and ranked:
        notes.append("no summary shares anything with the question")
    for c in chosen:
        c.chosen = True
    return Retrieval("embedding", chosen, ranked, notes)


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
    batches = [entries[i : i + batch_size] for i in range(0, len(entries), batch_size)]
    base = template.partial_format(query_str=query)

    async def ask(batch: list[SummaryEntry]) -> str:
        texts = [e.summary for e in batch]
        return await llm.apredict(base, json_mode=True, context_str=format_batch(texts), candidates=texts)

    answers = await asyncio.gather(*(ask(b) for b in batches))
    picks: dict[str, float | None] = {}
    parsed = 0
    for batch, answer in zip(batches, answers):
        choices = parse_choices(answer, len(batch))
        if choices or _says_none(answer):
            parsed += 1
        for number, relevance in choices:
            picks[batch[number - 1].doc_id] = None if relevance is None else relevance / 10.0
    return picks, parsed, len(batches)


def _says_none(answer: str) -> bool:
    """An explicit empty choice ({"choices": []}) is an answer, not a parse failure."""
    parsed = _parse_json_choices(answer)
    return parsed == []


async def retrieve_by_llm(
    llm: LLM, query: str, entries: list[SummaryEntry], top_k: int, batch_size: int, via: str = "llm"
) -> Retrieval:
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
    llm: LLM, query: str, entries: list[SummaryEntry], top_k: int, batch_size: int, candidates: int
) -> Retrieval:
    first = await retrieve_by_embedding(llm, query, entries, candidates)
    shortlist_ids = {c.doc_id for c in first.candidates[:candidates]}
    shortlist = [e for e in entries if e.doc_id in shortlist_ids]
    # Hand the shortlist to the LLM in embedding order, best first.
    order = {c.doc_id: i for i, c in enumerate(first.candidates)}
    shortlist.sort(key=lambda e: order[e.doc_id])
    second = await retrieve_by_llm(llm, query, shortlist, top_k, batch_size, via="hybrid")
    second.notes = first.notes + [f"embedding shortlist of {len(shortlist)} for LLM choice"] + second.notes
    return second


async def retrieve(
    retriever: str,
    llm: LLM,
    query: str,
    entries: list[SummaryEntry],
    *,
    top_k: int,
    batch_size: int = 10,
    candidates: int = 20,
) -> Retrieval:
    if retriever == "embedding":
        return await retrieve_by_embedding(llm, query, entries, top_k)
    if retriever == "llm":
        return await retrieve_by_llm(llm, query, entries, top_k, batch_size)
    if retriever == "hybrid":
        return await retrieve_hybrid(llm, query, entries, top_k, batch_size, candidates)
    raise ConfigError(f"unknown retriever {retriever!r}; choose one of {', '.join(RETRIEVERS)}")
