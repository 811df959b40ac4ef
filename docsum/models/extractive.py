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
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any

import numpy as np

from docsum.citations import cited_pieces, markers_in, split_numbered, strip_markers, with_marker
from docsum.layout import answer_units
from docsum.lexical import LEXICAL_EMBED_MODEL, lexical_vectors, sentences, terms
from docsum.models.abstain import says_cannot_answer
from docsum.models.answerrank import answer_terms, spelled_out
from docsum.models.hops import MAX_REMEMBERED, SeenPassages, hop_answer, is_chained, sources
from docsum.models.llm import DEFAULT_CONTEXT_WINDOW, DEFAULT_NUM_OUTPUT, LLM, LLMMetadata
from docsum.models.localembed import LOCAL_EMBED_MODEL, embed_locally
from docsum.models.prompts import (
    ABSTENTION_TEXT,
    KIND_CHOICE_SELECT,
    KIND_COMPRESS,
    KIND_DOCUMENT_SUMMARY,
    KIND_JUDGE,
    KIND_POLISH,
    KIND_REFINE,
    KIND_RERANK,
    NO_OUTPUT,
    PromptTemplate,
)
from docsum.models.prose import is_opening, is_reference, opening, without_figures_and_tables
from docsum.models.selection import ANSWER_COVERAGE_FLOOR, answer_strength, asked_terms, join_units, select_units
from docsum.models.tokens import tokenizer_for_model
from docsum.models.unitscore import document_prior, idf_weights
from docsum.models.unitweights import ANSWER_SCORE_FLOOR
from docsum.schema import CallRecord
from docsum.settings import DEFAULT_LIMITS, Limits, default

EXTRACTIVE_MODEL = "docsum-extractive"
_DOC_BLOCK = re.compile(r"^Document (\d+):\s*$", re.MULTILINE)


class ExtractiveLLM(LLM):
    # Part of the summary fingerprint: bump it when summaries would come out
    # differently, so stores re-summarize instead of keeping stale ones.
    version = "11"

    def __init__(
        self,
        context_window: int | None = None,
        num_output: int | None = None,
        limits: Limits = DEFAULT_LIMITS,
        embed_model: str = LEXICAL_EMBED_MODEL,
        answer_sentences: int = default("answer_sentences"),
        answer_floor: float | None = None,
    ) -> None:
        self.answer_sentences = answer_sentences
        self.answer_floor = ANSWER_SCORE_FLOOR if answer_floor is None else answer_floor
        # Refine's steps show one passage each: a chained question's hops meet
        # only in the passages seen so far (docsum.models.hops).
        self._seen_passages = SeenPassages()
        self._documents = DocumentOrder()
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
        self.admit(template.kind)  # free, but counted as calls are, so a limit means the same offline
        started = time.monotonic()
        filled = template.values(**{k: v for k, v in values.items() if k in template.template_vars})
        text = self._answer(template, filled, values, json_mode)
        tok = self.metadata.tokenizer
        prompt_tokens = self.count_messages(template.format_messages(**filled))
        self.record(
            CallRecord(
                template.kind,
                self.metadata.model,
                prompt_tokens,
                tok.count(text),
                time.monotonic() - started,
                counted_locally=True,
            )
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
            if says_cannot_answer(existing):
                answer = self.answer(query, context)  # nothing to refine yet
            else:
                answer = self.refine(query, existing, context)
            satisfied = _relevance_of(query, answer) > 0 and answer != ABSTENTION_TEXT
        elif kind == KIND_DOCUMENT_SUMMARY:
            context = filled.get("context_str") or _longest_value(filled, exclude={"query_str"})
            answer = self.summarize(query, context)
            satisfied = bool(answer)
        else:
            # A question (tree_summarize included): a focused answer, never a
            # document-style summary opening with lists of names.
            context = filled.get("context_str") or _longest_value(filled, exclude={"query_str"})
            answer = self.answer(query, context)
            satisfied = bool(answer) and answer != ABSTENTION_TEXT and _relevance_of(query, context) > 0
        if json_mode:
            return json.dumps({"answer": answer, "query_satisfied": satisfied})
        return answer

    def extract(self, query: str, context: str) -> str:
        """The sentences of `context` that answer `query` best, each with the
        number of the passage it came from."""
        units, marks = _units_of(context)
        chosen = select_units(
            query,
            units,
            max(16, self.metadata.num_output),
            self.metadata.tokenizer,
            focused=True,
            most=self.answer_sentences,
            documents=self._documents.priors(query, context, marks),
        )
        return join_units(with_marker(text, marks[pos]) for pos, text in chosen)

    def summarize(self, query: str, context: str) -> str:
        """A document's summary as prose: an opening naming the document (its
        whole title) and its kind when its head says so (docsum.models.prose), then
        its most informative sentences in document order: central ones, with
        names and figures preferred. No word lists: capitalised words taken
        for names were mostly sentence openers ("Thus", "Sei")."""
        budget = self.metadata.num_output
        tokenizer = self.metadata.tokenizer
        first, body = opening(context)
        if first is not None:
            budget -= tokenizer.count(first) + 1
        # Openings of the parts below the first (a tree level up) name no new
        # document: never quoted again.
        units = [u for u in sentences(body) if not is_opening(u)]
        # Figures, tables and references are no summary's sentences; when
        # nothing else is left, the most central lines still are (below).
        # Read line by line (docsum.layout): a PDF's table headings,
        # contents lines and cover boilerplate are no summary's sentences.
        prose = [
            u
            for u in answer_units(without_figures_and_tables(body), rows=False)
            if not is_opening(u) and not is_reference(u)
        ]
        lead: list[str] = []
        if first is None:
            # Without a recognisable title block, the opening lines still
            # usually say what a document is (a heading, who wrote it and
            # when): kept, as a lead-based summary would, within a fifth of
            # the budget.
            lead_budget, used = budget // 5, 0
            for unit in prose[:8]:
                cost = tokenizer.count(unit) + 1
                if used + cost > lead_budget:
                    break
                lead.append(unit)
                used += cost
            budget -= used
            prose = [u for u in prose if u not in lead]
        chosen = select_units(query, prose, max(16, budget), tokenizer, informative=True)
        if not chosen and not lead:
            # Nothing reads as prose (a form, a table, a list of figures):
            # the most central lines still say more than an empty summary.
            chosen = select_units(query, units, max(16, budget), tokenizer)
        body = join_units(lead + [text for _, text in sorted(chosen)])
        # The opening on a line of its own: a tree level above finds it there.
        return f"{first}\n{body}" if first else body

    def answer(self, query: str, context: str) -> str:
        """`extract` for a question, or the abstention text when no unit of
        the context scores `answer_floor` on the answer scorer
        (docsum.models.unitscore; the floor is fitted with its weights) or
        covers ANSWER_COVERAGE_FLOOR of the question:
        quoting the closest sentences of unrelated text is how the offline
        engine used to answer everything. A question that reaches its answer
        through something it does not name is answered by a chain of
        sentences across documents, or declined (docsum.models.hops)."""
        if not answer_terms(spelled_out(query)):
            return self.extract(query, context)
        if is_chained(query):
            context = self._seen_passages.context(query, context)
        units, marks = _units_of(context)
        hops = hop_answer(query, units, marks, context)
        if hops:
            return self._chain(units, marks, hops)
        # No chain (or no chain shape): scored as any question, and declined
        # only below the floor. Declining every unchained question declined a
        # third of the answerable multi-hop ones; their nearest hop, quoted
        # and cited, is where a reader goes on from.
        strength = answer_strength(query, units)
        if strength is None:
            return ABSTENTION_TEXT
        if strength.coverage < ANSWER_COVERAGE_FLOOR and not strength.named_row:
            return ABSTENTION_TEXT
        scores = ANSWER_SCORES.get()
        if scores is not None:
            scores.append(strength.score)
        return self.extract(query, context) if strength.score >= self.answer_floor else ABSTENTION_TEXT

    def _chain(self, units: list[str], marks: list[int | None], hops: list[int]) -> str:
        """A chain's sentences (docsum.models.hops), each with its passage."""
        return join_units(with_marker(units[i], marks[i]) for i in hops[: self.answer_sentences])

    def refine(self, query: str, existing: str, context: str) -> str:
        if is_chained(query):
            # A chained question's answer is a chain (see `answer`): the
            # new passage may complete a better one with those seen before.
            seen = self._seen_passages.context(query, context)
            seen_units, seen_marks = _units_of(seen)
            hops = hop_answer(query, seen_units, seen_marks, seen)
            if hops:
                return self._chain(seen_units, seen_marks, hops)  # the best chain of every passage seen so far
            # No chain: refined as any other question, so a later passage
            # can still answer better than the first one read.
        old, old_marks = _units_of(existing)
        fresh, fresh_marks = _units_of(context)
        marks = dict(zip(fresh, fresh_marks))
        marks.update((s, m) for s, m in zip(old, old_marks) if m is not None)
        new = [s for s in fresh if s not in old]
        # As select_units reads it: "R&D" meets "research", and the row the
        # documents define as R&D ("Technology and content") comes in too.
        q = asked_terms(query, old + fresh)
        if q and old:
            # Only material about the question can improve an answer. Without
            # this, off-topic sentences won on centrality alone and were
            # appended, so "refine" changed answers the new context did not
            # touch. (A query with no content words, such as the summary
            # query, still refines by centrality.)
            new = [s for s in new if q & set(answer_terms(s))]
            if not new:
                return existing
        pool = old + new
        chosen = select_units(
            query,
            pool,
            self.metadata.num_output,
            self.metadata.tokenizer,
            prefer=len(old),
            focused=True,
            most=self.answer_sentences,
            background=fresh,
            documents=self._documents.priors(query, context, [marks.get(u) for u in pool]),
        )
        if {text for _, text in chosen} <= set(old):
            return existing  # the new material adds nothing better: keep the answer as it was
        # By position: a unit too long for the answer is quoted by its head.
        return join_units(with_marker(text, marks.get(pool[pos])) for pos, text in chosen)

    def rate(self, query: str, candidates: list[str]) -> list[dict[str, int]]:
        """Relevance 1-10 for each candidate sharing content with the query."""
        q = set(terms(query))
        if not q or not candidates:
            return []
        docs = [Counter(terms(c)) for c in candidates]
        idf = idf_weights(docs)
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


class DocumentOrder:
    """Which document each numbered passage of one question's contexts came
    from, and each document's rank. Passages are numbered in retrieval
    order, best document first, so a document's rank is the order of its
    first passage among those seen. Refine and compact show them a part at a
    time, and an earlier answer's sentences carry only their markers: the
    labels of every part seen for the question are kept. A context holding
    passage 1 starts afresh (the same question asked again)."""

    def __init__(self) -> None:
        self._seen: OrderedDict[str, dict[int, str]] = OrderedDict()

    def priors(self, question: str, context: str, marks: list[int | None]) -> list[float]:
        """The `document` feature (docsum.models.unitscore.document_prior)
        of each unit, by the passage it came from (`marks`)."""
        found = sources(context)
        named = {} if 1 in found else self._seen.pop(question, {})
        named.update(found)
        self._seen[question] = named
        if len(self._seen) > MAX_REMEMBERED:
            self._seen.popitem(last=False)
        first: dict[str, int] = {}
        for number, name in sorted(named.items()):
            first.setdefault(name, number)
        rank = {name: i for i, name in enumerate(sorted(first, key=first.__getitem__))}
        return [document_prior(rank.get(named.get(m, ""))) if m is not None else 0.0 for m in marks]


# The best score of every answer the offline engine weighed in this context
# (an evaluation sets a list per question to print the decline threshold's
# trade-off; None: not recorded).
ANSWER_SCORES: ContextVar[list[float] | None] = ContextVar("answer_scores", default=None)


def _units_of(context: str) -> tuple[list[str], list[int | None]]:
    """The sentences of a context without citation markup, and for each the
    passage it came from: the numbered passage it sits in, or the marker it
    already carries (an earlier answer's sentence, in refine or a tree level)."""
    units: list[str] = []
    marks: list[int | None] = []
    for marker, text in split_numbered(context):
        # An earlier answer is read unit by unit as its markers close them
        # (see cited_pieces), so each unit keeps its own passage.
        pieces = cited_pieces(text) if marker is None else [text]
        # Whole sentences and table rows with their headings, never a cover
        # page, a contents line or a heading (docsum.layout).
        for sentence in (unit for piece in pieces for unit in answer_units(piece)):
            carried = markers_in(sentence)
            # Bracketed numbers inside a passage are the document's own
            # ("as shown in [12]"): dropped, so they cannot pass for markers.
            plain = strip_markers(sentence) if carried else sentence
            if plain:
                units.append(plain)
                marks.append(carried[0] if carried and marker is None else marker)
    return units, marks


def _split_numbered(context: str) -> list[str]:
    pieces = _DOC_BLOCK.split(context)
    # split gives [prefix, n1, text1, n2, text2, ...]
    return [pieces[i + 1].strip() for i in range(1, len(pieces) - 1, 2)]


def _longest_value(values: dict[str, str], exclude: set[str]) -> str:
    rest = [v for k, v in values.items() if k not in exclude]
    return max(rest, key=len) if rest else ""


def _relevance_of(query: str, text: str) -> float:
    q = set(terms(query))
    return len(q & set(terms(text))) / len(q) if q else 0.0


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
