"""Which units an offline answer or summary quotes (`select_units`).

An answer's units are ranked by one score (docsum.models.unitscore: named
features, fitted weights), and the answer stops at the few close to the best
one. A summary's sentences by relevance to its query (rarer words count
more) and centrality, prose with names and figures first. Both skip
near-repeats and keep within a budget."""

from __future__ import annotations

import math
import re
from collections.abc import Set
from dataclasses import dataclass
from typing import Any

from docsum.lexical import terms
from docsum.models.abstain import name_terms
from docsum.models.answerrank import (
    answer_terms,
    defined_labels,
    folded,
    frame_terms,
    rows_before_definitions,
    spelled_out,
)
from docsum.models.prose import informative_bonus
from docsum.models.unitscore import Context, centrality, features_of, lowered_terms, read_question, score
from docsum.models.unitweights import NEAR_GAP, STOP_GAP
from docsum.settings import default

# An answer is a few good sentences, not a page: stop at --answer-sentences,
# or once about this many words a sentence are quoted (the first sentence is
# always kept).
WORDS_PER_ANSWER_SENTENCE = 27  # 80 words at the default 3 sentences
# Besides the score's threshold, the offline engine declines when no unit
# holds this share of the question's terms, unless a unit is a table row the
# question names: a score can be made of centrality and a figure in a
# sentence that shares one word with the question.
ANSWER_COVERAGE_FLOOR = 0.15
_MARKUP = re.compile(r"^\s*(?:#{1,6}|>|[-*•])\s+")


def asked_terms(query: str, units: list[str]) -> set[str]:
    """The terms an answer's unit must hold to be about `query`, as
    select_units reads them: the question's own ("R&D" meets "research"),
    and the words of row labels that `units` define with them
    (answerrank.defined_labels: "Technology and content" for R&D)."""
    question = answer_terms(spelled_out(query))
    where = frame_terms(query) | {folded(t) for t in name_terms(query)}
    return set(question) | defined_labels(units, question, dict.fromkeys(question, 1.0), where)[0].keys()


def join_units(units: Any) -> str:
    """Quoted sentences joined into prose, without the Markdown markers
    (headings, quotes, bullets) that would read as noise mid-paragraph."""
    return " ".join(_MARKUP.sub("", text) for text in units)


# (score, position, text, terms) of one candidate unit
Scored = tuple[float, int, str, set[str]]


def _answer_scores(
    query: str,
    unique: list[tuple[int, str]],
    background: list[str],
    prefer: int,
    documents: list[float] | None = None,
) -> tuple[list[Scored], frozenset[str], set[str], set[int]]:
    """An answer's candidates by the scorer's one score, the row labels the
    context defines (their definitions follow the rows they explain), the
    question's terms other than its names, as the units' terms are read, and the positions of the
    table rows the question names (each is a fact of its own)."""
    texts = [text for _, text in unique]
    ctx = Context.of(texts, background)
    view = read_question(query, texts, ctx.idf)
    scored: list[Scored] = []
    named_rows: set[int] = set()
    for i, (pos, text) in enumerate(unique):
        found = features_of(view, ctx, i, documents[pos] if documents is not None else 0.0)
        if found is None:
            continue  # a heading, a form's words or half a sentence
        scored.append((score(found) + (1e-6 if pos < prefer else 0.0), pos, text, set(ctx.bags[i])))
        if found["row_label"] > 0:
            named_rows.add(pos)
    # The question's names say which document, not which part of the question
    # a unit answers.
    return scored, view.definitions, view.terms - view.names, named_rows


@dataclass(frozen=True)
class AnswerStrength:
    """How well the best units of a context answer a question: what the
    offline engine's decline is decided on."""

    score: float  # the scorer's best score (compared with --answer-floor)
    coverage: float  # the largest share of the question's terms one unit holds
    named_row: bool  # some unit is a table row the question names


def answer_strength(query: str, units: list[str]) -> AnswerStrength | None:
    """The strength of `units` as an answer to `query` (None when no unit
    could be quoted)."""
    texts = list(dict.fromkeys(units))
    ctx = Context.of(texts)
    view = read_question(query, texts, ctx.idf)
    found = [(i, f) for i, f in ((i, features_of(view, ctx, i)) for i in range(len(texts))) if f is not None]
    if not found:
        return None
    # Every term counts the same here: the weighted coverage of the score
    # gives a name's one word (the oven of "… a swallow near the oven?") too much.
    shares = [
        len((view.terms & ctx.bags[i].keys()) - lowered_terms(view.one_word_names, texts[i])) / max(1, len(view.terms))
        for i, _ in found
    ]
    return AnswerStrength(max(score(f) for _, f in found), max(shares), any(f["row_label"] > 0 for _, f in found))


def _summary_scores(
    query: str, unique: list[tuple[int, str]], background: list[str], prefer: int, informative: bool
) -> tuple[list[Scored], bool]:
    """A summary's candidates by relevance to its query and centrality, prose
    with names and figures ranked up (`informative`); and whether any shares
    a word with the query."""
    ctx = Context.of([text for _, text in unique], background, term_of=terms)
    q = set(terms(query))
    q_weight = sum(ctx.idf.get(t, 1.0) for t in q) or 1.0
    any_overlap = any(q & bag.keys() for bag in ctx.bags)
    scored: list[Scored] = []
    for i, (pos, text) in enumerate(unique):
        bonus = informative_bonus(text) if informative else 0.0
        if bonus is None:
            continue  # not prose: a heading, formula debris, a row of figures
        bag = ctx.bags[i]
        central = centrality(ctx, i)
        relevance = sum(ctx.idf.get(t, 1.0) for t in q if t in bag) / q_weight
        value = ((0.75 * relevance + 0.25 * central) if any_overlap else central) + bonus
        if len(bag) < 3:
            value *= 0.5  # fragments such as headings rarely answer anything
        scored.append((value + (1e-6 if pos < prefer else 0.0), pos, text, set(bag)))
    return scored, any_overlap


def select_units(
    query: str,
    candidates: list[str],
    budget: int,
    tokenizer: Any,
    prefer: int = 0,
    focused: bool = False,
    informative: bool = False,
    most: int = default("answer_sentences"),
    background: list[str] | None = None,
    documents: list[float] | None = None,
) -> list[tuple[int, str]]:
    """The units to quote, as (position, text) pairs, best first, within the
    output budget. `focused` is for answers: ranked by the scorer, at most
    `most` units, each further one only within STOP_GAP of the best.
    `informative` is for summaries: only prose, names and figures first.
    The first `prefer` candidates (an existing answer) win ties;
    `background`: further units read beside the candidates, counted in the
    word weights only; `documents`: each candidate's `document` feature
    (its document's retrieval rank, docsum.models.unitscore.document_prior)."""
    seen: set[str] = set()
    unique: list[tuple[int, str]] = []
    for i, s in enumerate(candidates):
        if s not in seen:
            seen.add(s)
            unique.append((i, s))
    if not unique:
        return []
    definitions: frozenset[str] = frozenset()
    asked: set[str] = set()
    named_rows: set[int] = set()
    if focused:
        scored, definitions, asked, named_rows = _answer_scores(query, unique, background or [], prefer, documents)
        floor = -math.inf
    else:
        scored, any_overlap = _summary_scores(query, unique, background or [], prefer, informative)
        floor = 0.0 if any_overlap else -math.inf
    scored.sort(key=lambda item: (-item[0], item[1]))
    chosen = _pick(scored, budget, tokenizer, floor, most if focused else None, asked, named_rows)
    return rows_before_definitions(chosen, definitions)


def _near_repeat(words: set[str], chosen: list[set[str]]) -> bool:
    """A near repeat of a chosen unit, or one a chosen unit holds nearly whole
    ("Key changes were: • R&D expenses increased …" beside "R&D expenses increased …")."""
    return any(
        words
        and (
            len(words & other) / len(words | other) > 0.6
            or len(words & other) / max(1, min(len(words), len(other))) > 0.85
        )
        for other in chosen
    )


def adds_to_answer(words: Set[str], asked: Set[str], covered: Set[str]) -> bool:
    """A further unit holds some term of the question the units already
    chosen do not: it answers another part of the question ("how much … and
    when …"). One that only repeats what they hold is the unrelated sentence
    that used to end almost every answer."""
    return not asked or bool((words & asked) - covered)


def _pick(
    scored: list[Scored],
    budget: int,
    tokenizer: Any,
    floor: float,
    most: int | None,
    asked: Set[str] = frozenset(),
    named_rows: Set[int] = frozenset(),
) -> list[tuple[int, str]]:
    """The best units in order, within `budget` tokens; for an answer (`most`
    set) at most `most` units, about WORDS_PER_ANSWER_SENTENCE words each,
    each within STOP_GAP of the best, and one further than NEAR_GAP only when
    it holds a term of the question `asked` that those before it lack or is a
    table row the question names (`named_rows`, by position)."""
    chosen: list[tuple[int, str]] = []
    chosen_terms: list[set[str]] = []
    covered: set[str] = set()
    used = quoted = 0
    best = scored[0][0] if scored else 0.0
    for value, pos, text, words in scored:
        if value <= floor:
            break
        if most is not None and chosen and (len(chosen) >= most or value < best - STOP_GAP):
            break
        if _near_repeat(words, chosen_terms):
            continue
        if most is not None and chosen and quoted + len(text.split()) > WORDS_PER_ANSWER_SENTENCE * most:
            continue
        far = value < best - NEAR_GAP and pos not in named_rows
        if most is not None and chosen and far and not adds_to_answer(words, asked, covered):
            continue
        quoted += len(text.split())
        cost = tokenizer.count(text) + 1
        if used + cost > budget:
            if not chosen:
                # A single over-long sentence: keep its head so the answer is not
                # empty. Cut by tokens, not words (a word can be several tokens),
                # so the answer never exceeds the output budget.
                head = _head_within(text, max(1, budget * 3 // 4), tokenizer)
                chosen.append((pos, head))
                chosen_terms.append(words)
                covered |= words & asked
                used = tokenizer.count(head) + 1
            continue
        chosen.append((pos, text))
        chosen_terms.append(words)
        covered |= words & asked
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
