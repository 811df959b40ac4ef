"""The offline engine: deterministic, no network, no model weights.

It implements the LLM interface by doing each prompt's *job* on the prompt's
variables (the query, the context, the existing answer, the numbered candidates)
rather than by reading rendered text. Everything it writes is sentences copied
from the documents, so docsum labels its answers as extractive.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from typing import Any, AsyncIterator

import numpy as np

from docsum.lexical import LEXICAL_EMBED_MODEL, key_dates, key_terms, lexical_vectors, sentences, terms
from docsum.models.llm import DEFAULT_CONTEXT_WINDOW, DEFAULT_NUM_OUTPUT, LLM, LLMMetadata
from docsum.models.localembed import LOCAL_EMBED_MODEL, embed_locally
from docsum.models.prompts import (
    KIND_CHOICE_SELECT,
    KIND_COMPRESS,
    KIND_JUDGE,
    KIND_POLISH,
    KIND_REFINE,
    KIND_RERANK,
    KIND_SUMMARY,
    NO_OUTPUT,
    PromptTemplate,
)
from docsum.models.tokens import tokenizer_for_model
from docsum.schema import CallRecord
from docsum.settings import DEFAULT_LIMITS, Limits

EXTRACTIVE_MODEL = "docsum-extractive"
_DOC_BLOCK = re.compile(r"^Document (\d+):\s*$", re.MULTILINE)


class ExtractiveLLM(LLM):
    # Part of the summary fingerprint: bump it when summaries would come out
    # differently, so stores re-summarize instead of keeping stale ones.
    version = "8"

    def __init__(
        self, context_window: int | None = None, num_output: int | None = None, limits: Limits = DEFAULT_LIMITS,
        embed_model: str = LEXICAL_EMBED_MODEL,
    ) -> None:
        metadata = LLMMetadata(
            model=EXTRACTIVE_MODEL,
            context_window=context_window or DEFAULT_CONTEXT_WINDOW,
            num_output=num_output or DEFAULT_NUM_OUTPUT,
            tokenizer=tokenizer_for_model("gpt-4"),
            engine="extractive",
            embed_model=embed_model,  # lexical vectors, or the local embedder
        )
        super().__init__(metadata, limits)

    def __repr__(self) -> str:
        return "ExtractiveLLM()"

    # -- the interface ------------------------------------------------------
    async def apredict(self, template: PromptTemplate, *, json_mode: bool = False, **values: Any) -> str:
        started = time.monotonic()
        filled = template.values(**{k: v for k, v in values.items() if k in template.template_vars})
        text = self._answer(template, filled, values, json_mode)
        tok = self.metadata.tokenizer
        prompt_tokens = self.count_messages(template.format_messages(**filled))
        self.record(
            CallRecord(template.kind, self.metadata.model, prompt_tokens, tok.count(text), time.monotonic() - started, counted_locally=True)
        )
        return text

    async def astream(self, template: PromptTemplate, **values: Any) -> AsyncIterator[str]:
        text = await self.apredict(template, **values)
        for i, word in enumerate(text.split(" ")):
            yield word if i == 0 else " " + word

    async def aembed(self, texts: list[str]) -> np.ndarray:
        if self.metadata.embed_model == LOCAL_EMBED_MODEL:
            return await embed_locally(texts)
        return lexical_vectors(texts)

    # -- one job per prompt kind --------------------------------------------
    def _answer(self, template: PromptTemplate, filled: dict[str, str], raw: dict[str, Any], json_mode: bool) -> str:
        kind = template.kind
        query = filled.get("query_str", "")
        if kind in (KIND_CHOICE_SELECT, KIND_RERANK):
            candidates = raw.get("candidates")
            if candidates is None:
                candidates = _split_numbered(filled.get("context_str", ""))
            return json.dumps({"choices": self.rate(query, [str(c) for c in candidates])})
        if kind == KIND_COMPRESS:
            return self.compress(query, filled.get("context_str", ""))
        if kind == KIND_JUDGE:
            correct, reason = judge_by_overlap(filled.get("answer", ""), filled.get("reference", ""))
            return json.dumps({"correct": correct, "reason": reason})
        if kind in (KIND_REFINE, KIND_POLISH):
            existing = filled.get("existing_answer", "")
            context = filled.get("context_msg", filled.get("context_str", ""))
            answer = self.refine(query, existing, context)
            satisfied = _relevance_of(query, answer) > 0
        else:
            context = filled.get("context_str") or _longest_value(filled, exclude={"query_str"})
            order = "document" if kind == KIND_SUMMARY else "score"
            answer = self.extract(query, context, order=order)
            satisfied = bool(answer) and _relevance_of(query, context) > 0
        if json_mode:
            return json.dumps({"answer": answer, "query_satisfied": satisfied})
        return answer

    def extract(self, query: str, context: str, order: str = "score") -> str:
        budget = self.metadata.num_output
        names = ""
        if order == "document":
            # A summary should say what the document is about by name, which
            # central sentences alone often do not ("net sales increased...").
            found, dates = key_terms(context), key_dates(context)
            if found:
                names = "Key names: " + ", ".join(found) + "."
            if dates:
                names = (names + " " if names else "") + "Key dates: " + "; ".join(dates) + "."
            if names:
                budget -= self.metadata.tokenizer.count(names) + 1
        units = sentences(context)
        lead: list[tuple[int, str]] = []
        if order == "document":
            # The opening lines usually say what a document is (a title page,
            # a heading, who wrote it and when): keep them, as a lead-based
            # summary would, within a fifth of the budget.
            lead_budget, used = budget // 5, 0
            for i, unit in enumerate(units[:8]):
                cost = self.metadata.tokenizer.count(unit) + 1
                if used + cost > lead_budget:
                    break
                lead.append((i, unit))
                used += cost
            budget -= used
            units = units[len(lead):]
        chosen = _select(query, units, max(16, budget), self.metadata.tokenizer, focused=order == "score")
        if order == "document":
            chosen = lead + sorted((pos + len(lead), text) for pos, text in chosen)
        body = _join(text for _, text in chosen)
        return f"{names}\n{body}" if names else body

    def refine(self, query: str, existing: str, context: str) -> str:
        old = sentences(existing)
        new = [s for s in sentences(context) if s not in old]
        q = set(terms(query))
        if q and old:
            # Only material about the question can improve an answer. Without
            # this, off-topic sentences won on centrality alone and were
            # appended, so "refine" changed answers the new context did not
            # touch. (A query with no content words, such as the summary
            # query, still refines by centrality.)
            new = [s for s in new if q & set(terms(s))]
            if not new:
                return existing
        chosen = _select(query, old + new, self.metadata.num_output, self.metadata.tokenizer, prefer=len(old), focused=True)
        if {text for _, text in chosen} <= set(old):
            return existing  # the new material adds nothing better: keep the answer as it was
        return _join(text for _, text in chosen)

    def rate(self, query: str, candidates: list[str]) -> list[dict[str, int]]:
        """Relevance 1-10 for each candidate sharing content with the query."""
        q = set(terms(query))
        if not q or not candidates:
            return []
        docs = [Counter(terms(c)) for c in candidates]
        idf = _idf(docs)
        total = sum(idf.get(t, 1.0) for t in q) or 1.0
        rated = []
        for number, bag in enumerate(docs, start=1):
            covered = sum(idf.get(t, 1.0) for t in q if t in bag)
            if covered <= 0:
                continue
            # Coverage of the query's weight, damped by length so long texts do not win by size.
            depth = sum(math.log1p(bag[t]) for t in q if t in bag) / max(1, len(q))
            strength = 0.8 * covered / total + 0.2 * min(1.0, depth)
            rated.append({"doc": number, "relevance": max(1, min(10, round(1 + 9 * strength)))})
        rated.sort(key=lambda r: (-r["relevance"], r["doc"]))
        return rated

    def compress(self, query: str, passage: str) -> str:
        q = set(terms(query))
        kept = [s for s in sentences(passage) if q & set(terms(s))]
        return " ".join(kept) if kept else NO_OUTPUT


def _split_numbered(context: str) -> list[str]:
    pieces = _DOC_BLOCK.split(context)
    # split gives [prefix, n1, text1, n2, text2, ...]
    return [pieces[i + 1].strip() for i in range(1, len(pieces) - 1, 2)]


def _longest_value(values: dict[str, str], exclude: set[str]) -> str:
    rest = [v for k, v in values.items() if k not in exclude]
    return max(rest, key=len) if rest else ""


def _idf(bags: list[Counter[str]]) -> dict[str, float]:
    df: Counter[str] = Counter()
    for bag in bags:
        df.update(bag.keys())
    n = len(bags)
    return {t: math.log((n + 1) / (c + 1)) + 1.0 for t, c in df.items()}


def _relevance_of(query: str, text: str) -> float:
    q = set(terms(query))
    return len(q & set(terms(text))) / len(q) if q else 0.0


_WANTS_NUMBER = re.compile(
    r"\bhow (?:much|many|long|far|old|tall|high|big|large|often)\b|\bwhen\b|\bwhat (?:year|date|day|time|price|cost|amount|percentage)\b"
    r"|\b(?:price|cost|paid|pay|amount|total|number|percent|rate|date|year)\b",
    re.IGNORECASE,
)
_HAS_NUMBER = re.compile(r"\d")
# An answer is a few good sentences, not a page: stop at this many, and skip
# sentences scoring below this share of the best one.
MAX_ANSWER_SENTENCES = 6
RELATIVE_FLOOR = 0.4


_MARKUP = re.compile(r"^\s*(?:#{1,6}|>|[-*•])\s+")


def _join(units: Any) -> str:
    """Quoted sentences joined into prose, without the Markdown markers
    (headings, quotes, bullets) that would read as noise mid-paragraph."""
    return " ".join(_MARKUP.sub("", text) for text in units)


def _select(
    query: str, candidates: list[str], budget: int, tokenizer: Any, prefer: int = 0, focused: bool = False
) -> list[tuple[int, str]]:
    """Pick sentences by query relevance plus centrality, without near-repeats,
    until the output budget is used. Returns (position, sentence) pairs, best first.
    The first `prefer` candidates (an existing answer) win ties. `focused` is for
    answers: sentences with figures rank up for how-much/when questions, and the
    answer stops at a few sentences close to the best one."""
    seen: set[str] = set()
    unique: list[tuple[int, str]] = []
    for i, s in enumerate(candidates):
        if s not in seen:
            seen.add(s)
            unique.append((i, s))
    if not unique:
        return []
    bags = [Counter(terms(s)) for _, s in unique]
    idf = _idf(bags)
    q = set(terms(query))
    q_weight = sum(idf.get(t, 1.0) for t in q) or 1.0
    centroid: Counter[str] = Counter()
    for bag in bags:
        centroid.update({t: idf[t] for t in bag})
    c_norm = math.sqrt(sum(v * v for v in centroid.values())) or 1.0
    any_overlap = any(q & bag.keys() for bag in bags)
    wants_number = bool(_WANTS_NUMBER.search(query))

    scored = []
    for (pos, text), bag in zip(unique, bags):
        if focused and _MARKUP.match(text) and text.lstrip().startswith("#"):
            continue  # a heading names a topic; it does not answer a question
        vec = {t: idf[t] * (1 + math.log(c)) for t, c in bag.items()}
        norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        central = sum(v * centroid[t] for t, v in vec.items()) / (norm * c_norm)
        relevance = sum(idf.get(t, 1.0) for t in q if t in bag) / q_weight
        score = (0.75 * relevance + 0.25 * central) if any_overlap else central
        if focused and wants_number and relevance > 0 and _HAS_NUMBER.search(text):
            score += 0.2
        if len(bag) < 3:
            score *= 0.5  # fragments such as headings rarely answer anything
        if pos < prefer:
            score += 1e-6
        scored.append((score, pos, text, set(bag)))
    scored.sort(key=lambda item: (-item[0], item[1]))

    chosen: list[tuple[int, str]] = []
    chosen_terms: list[set[str]] = []
    used = 0
    best = scored[0][0] if scored else 0.0
    for score, pos, text, bag in scored:
        if any_overlap and score <= 0:
            break
        if focused and chosen and (len(chosen) >= MAX_ANSWER_SENTENCES or score < RELATIVE_FLOOR * best):
            break
        if any(bag and len(bag & other) / len(bag | other) > 0.6 for other in chosen_terms):
            continue
        cost = tokenizer.count(text) + 1
        if used + cost > budget:
            if not chosen:
                # A single over-long sentence: keep its head so the answer is not
                # empty. Cut by tokens, not words (a word can be several tokens),
                # so the answer never exceeds the output budget.
                head = _head_within(text, max(1, budget * 3 // 4), tokenizer)
                chosen.append((pos, head))
                chosen_terms.append(bag)
                used = tokenizer.count(head) + 1
            continue
        chosen.append((pos, text))
        chosen_terms.append(bag)
        used += cost
    return chosen


def _head_within(text: str, budget: int, tokenizer: Any) -> str:
    words = text.split()
    lo, hi = 1, len(words)
    # the longest word prefix that fits (at least one word, as before)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tokenizer.count(" ".join(words[:mid])) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo])


def judge_by_overlap(answer: str, reference: str) -> tuple[bool, str]:
    """Token F1 and containment of the reference's content words in the answer."""
    a, r = Counter(terms(answer)), Counter(terms(reference))
    if not r:
        return False, "the reference answer has no content words"
    common = sum((a & r).values())
    containment = common / sum(r.values())
    precision = common / sum(a.values()) if a else 0.0
    f1 = 2 * precision * containment / (precision + containment) if common else 0.0
    correct = containment >= 0.6 or f1 >= 0.5
    return correct, f"token F1 {f1:.2f}, reference words found {containment:.0%}"
