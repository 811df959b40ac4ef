"""Which units an offline answer or summary quotes (`select_units`): by
relevance to the question (rarer words count more, the question's names
half) and centrality, without near-repeats, within a budget; for answers,
units holding the kind of fact asked for (an amount, a date, a person, a
place) and table rows named by the question rank up (docsum.models.answerrank),
and the answer stops at a few units close to the best one."""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

from docsum.lexical import MONTH_PATTERN, terms
from docsum.models.abstain import lower_only, name_terms, phrase_key, question_names
from docsum.models.answerrank import (
    FRAME_WEIGHT,
    LONG_UNIT_WORDS,
    answer_terms,
    asks_level,
    asks_one_quarter,
    asks_share,
    defined_labels,
    folded,
    frame_terms,
    is_quotable,
    period_factor,
    row_label_bonus,
    rows_before_definitions,
    spelled_out,
)
from docsum.models.prose import informative_bonus
from docsum.settings import default


def idf_weights(bags: list[Counter[str]]) -> dict[str, float]:
    df: Counter[str] = Counter()
    for bag in bags:
        df.update(bag.keys())
    n = len(bags)
    return {t: math.log((n + 1) / (c + 1)) + 1.0 for t, c in df.items()}


_WANTS_NUMBER = re.compile(
    r"\bhow (?:much|many|long|far|old|tall|high|big|large|often)\b|\bwhen\b|\bwhat (?:year|date|day|time|price|cost|amount|percentage)\b"
    r"|\b(?:price|cost|paid|pay|amount|total|number|percent|rate|date|year)\b",
    re.IGNORECASE,
)
_HAS_NUMBER = re.compile(r"\d")
# Kinds of fact a question asks for: how the question says so, and how a
# sentence holding one looks.
_ANSWER_TYPES: dict[str, tuple[re.Pattern[str], re.Pattern[str]]] = {
    "amount": (
        re.compile(r"\bhow much\b|\b(?:price|cost|costs|paid|pay|spend|spent|fee|worth)\b", re.IGNORECASE),
        re.compile(r"[$€£¥]\s?\d|\b\d[\d,.]*\s?(?:dollars|euros|pounds|million|billion|USD|EUR|GBP)\b"),
    ),
    "date": (
        re.compile(r"\bwhen\b|\bwhat (?:year|date|day|month)\b|\bwhich (?:year|date|day|month)\b", re.IGNORECASE),
        re.compile(
            rf"\b(?:{MONTH_PATTERN})\b[^.]*\b\d{{4}}\b|\b\d{{1,2}}\s+(?:{MONTH_PATTERN})\b|\b(?:1[5-9]|20)\d\d\b"
        ),
    ),
    # "What effective tax rate …": "Our effective tax rate was 19% and 17% …",
    # not "The increase in our effective tax rate … was primarily due to a
    # $3.3 billion net income tax benefit" (see _holds for whose rate). A
    # currency's exchange rate asks for no percentage.
    "percentage": (
        re.compile(r"(?<!exchange )\brates?\b", re.IGNORECASE),
        re.compile(r"\d%|\d\s?(?:percent|per cent)\b"),
    ),
    "count": (
        re.compile(r"\bhow many\b", re.IGNORECASE),
        re.compile(r"\b\d[\d,]*\b"),
    ),
    "person": (
        re.compile(r"^\W*(?:who|whom|whose)\b|\bby whom\b", re.IGNORECASE),
        # Two or more capitalised words ("Mara Quinn", "G. Stanley Hall") not the question's own.
        re.compile(r"\b[A-Z][a-z]+(?:\s+(?:[A-Z]\.\s*)*[A-Z][a-z]+)+|\b[A-Z]\.\s*[A-Z][a-z]+(?:\s+[A-Z][a-z]+)+"),
    ),
    "place": (
        re.compile(
            r"\bwhere\b|\b(?:what|which|in what|in which) (?:country|city|state|continent|region|town)\b", re.IGNORECASE
        ),
        # "in North Dakota", "near Paris", "across the Andes": a preposition of place before a name.
        re.compile(r"\b(?:in|at|near|from|across) (?:the )?[A-Z][\w'’-]+"),
    ),
}
ANSWER_TYPE_BONUS = 0.25
SPECIFIC_BONUS = 0.1
NAME_WEIGHT = 0.5
# An answer is a few good sentences, not a page: stop at --answer-sentences,
# or once about this many words a sentence are quoted (the first sentence is
# always kept), and
# skip sentences scoring below this share of the best one.
WORDS_PER_ANSWER_SENTENCE = 27  # 80 words at the default 3 sentences
RELATIVE_FLOOR = 0.4
# The offline engine answers only when some sentence of the passages holds at
# least this share of the question's content words; otherwise it declines.
# Set on both evaluation corpora at once (bench/RESULTS.md, "Abstention"):
# from 0.1 to 0.2 the rates barely move, above 0.25 multi-hop questions
# (whose words spread over several sentences) stop being answered.
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


# The rate a question asks for, by the word before it ("tax rate").
_RATE = re.compile(r"\b([a-z]+) rates?\b", re.IGNORECASE)


def _holds(kind: str, text: str, asked_names: set[str], rate: str | None = None) -> bool:
    """`text` holds a fact of the kind asked for (see _ANSWER_TYPES) other
    than the question's own names: "Mara Quinn" for "Who directed Glass
    Harbor?", not "Glass Harbor". A percentage answers for the rate asked
    (`rate`, "tax rate"), not for another one ("a weighted average interest
    rate of 5.4%" for a question on the tax rate)."""
    if kind == "percentage" and rate is not None and rate not in text.lower():
        return False
    return any(phrase_key(m.group(0)) not in asked_names for m in _ANSWER_TYPES[kind][1].finditer(text))


def one_word_names(query: str) -> list[str]:
    """The question's names of one word ("Taken" in "Who directed Taken?"),
    as keys (docsum.models.abstain.question_names)."""
    return [name for name in question_names(query) if name.isalpha()]


def lowered_names(names: list[str], unit: str) -> set[str]:
    """The answer terms of the one-word `names` that `unit` writes only in
    lower case: "The name was taken from the Niger River" does not name the
    film the question writes as "Taken"."""
    if not names:
        return set()
    quiet = lower_only(unit)
    return {t for name in names if name in quiet for t in answer_terms(name)}


def join_units(units: Any) -> str:
    """Quoted sentences joined into prose, without the Markdown markers
    (headings, quotes, bullets) that would read as noise mid-paragraph."""
    return " ".join(_MARKUP.sub("", text) for text in units)


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
) -> list[tuple[int, str]]:
    """Pick sentences by query relevance plus centrality, without near-repeats,
    until the output budget is used. Returns (position, sentence) pairs, best first.
    The first `prefer` candidates (an existing answer) win ties. `focused` is for
    answers: sentences with figures rank up for how-much/when questions, and the
    answer stops at a few sentences close to the best one. `informative` is for
    summaries: only prose is quoted, sentences with names and figures first
    (docsum.models.prose.informative_bonus). `background`: further units read
    beside the candidates, counted in the word weights only."""
    seen: set[str] = set()
    unique: list[tuple[int, str]] = []
    for i, s in enumerate(candidates):
        if s not in seen:
            seen.add(s)
            unique.append((i, s))
    if not unique:
        return []
    term_of = answer_terms if focused else terms
    bags = [Counter(term_of(s)) for _, s in unique]
    # Word weights from every unit read, not only the candidates: refine
    # hands over the earlier answer and the few new units on the question,
    # and in a pool that small "revenue" in every unit weighed next to nothing.
    idf = idf_weights(bags + [Counter(term_of(s)) for s in background or [] if s not in seen])
    q = set(term_of(spelled_out(query) if focused else query))
    # The question's names say which document, not which sentence: grounding
    # has already kept documents that mention them, so in an answer they
    # count half, and the sentence with the asked-for fact wins.
    names = {folded(t) for t in name_terms(query)} if focused else set()
    frame = frame_terms(query) if focused else frozenset()
    weight = {t: idf.get(t, 1.0) * (NAME_WEIGHT if t in names else FRAME_WEIGHT if t in frame else 1.0) for t in q}
    q_weight = sum(weight.values()) or 1.0
    centroid: Counter[str] = Counter()
    for bag in bags:
        centroid.update({t: idf[t] for t in bag})
    c_norm = math.sqrt(sum(v * v for v in centroid.values())) or 1.0
    any_overlap = any(q & bag.keys() for bag in bags)
    wants_number = bool(_WANTS_NUMBER.search(query))
    wanted = [kind for kind, (asks, _) in _ANSWER_TYPES.items() if asks.search(query)]
    rate = next((f"{m.group(1).lower()} rate" for m in _RATE.finditer(query)), None)
    asked_names = set(question_names(query)) if focused else set()
    capitalised = one_word_names(query) if focused else []
    shares = asks_share(query)
    one_quarter = focused and asks_one_quarter(query)
    level = focused and asks_level(query)
    # A row's label may be one of the question's names (the "Personal
    # Computing" segment): there they count in full, not at NAME_WEIGHT.
    label_weights = {t: idf.get(t, 1.0) for t in q}
    # A label the document defines with the question's words ("Technology
    # and content costs include … research and development") is named too.
    aliases, definitions = (
        defined_labels(
            [text for _, text in unique], term_of(spelled_out(query)), label_weights, frozenset(names | frame)
        )
        if focused
        else ({}, frozenset())
    )
    label_weights.update(aliases)

    scored = []
    for (pos, text), bag in zip(unique, bags):
        if focused and _MARKUP.match(text) and text.lstrip().startswith("#"):
            continue  # a heading names a topic; it does not answer a question
        if focused and not is_quotable(text):
            continue  # a heading, a form's words or half a sentence
        bonus = informative_bonus(text) if informative else 0.0
        if bonus is None:
            continue  # not prose: a heading, formula debris, a row of figures
        vec = {t: idf[t] * (1 + math.log(c)) for t, c in bag.items()}
        norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        central = sum(v * centroid[t] for t, v in vec.items()) / (norm * c_norm)
        lowered = lowered_names(capitalised, text)
        relevance = sum(weight[t] for t in q if t in bag and t not in lowered) / q_weight
        score = (0.75 * relevance + 0.25 * central) if any_overlap else central
        if focused and wants_number and relevance > 0 and _HAS_NUMBER.search(text):
            score += 0.2
        elif focused and relevance > 0 and _ANSWER_TYPES["amount"][1].search(text):
            score += SPECIFIC_BONUS
        if focused and any(t in bag for t in q - names):  # about the thing asked, not only its names
            # "How much … and when …": a sentence holding the kind of fact
            # asked for (an amount, a date) beats one that repeats the names.
            score += ANSWER_TYPE_BONUS * sum(1 for kind in wanted if _holds(kind, text, asked_names, rate))
        if focused:
            score += row_label_bonus(text, label_weights, shares, definitions)
            score *= period_factor(text, one_quarter, level)
            length = len(text.split())
            if length > LONG_UNIT_WORDS:
                score *= LONG_UNIT_WORDS / length
        score += bonus
        if len(bag) < 3:
            score *= 0.5  # fragments such as headings rarely answer anything
        if pos < prefer:
            score += 1e-6
        scored.append((score, pos, text, set(bag)))
    scored.sort(key=lambda item: (-item[0], item[1]))

    chosen: list[tuple[int, str]] = []
    chosen_terms: list[set[str]] = []
    used = quoted = 0
    best = scored[0][0] if scored else 0.0
    for score, pos, text, words in scored:
        if any_overlap and score <= 0:
            break
        if focused and chosen and (len(chosen) >= most or score < RELATIVE_FLOOR * best):
            break
        # A near repeat, or a sentence another chosen one holds nearly whole
        # ("Key changes were: • R&D expenses increased …" beside "R&D expenses increased …").
        if any(
            words
            and (
                len(words & other) / len(words | other) > 0.6
                or len(words & other) / max(1, min(len(words), len(other))) > 0.85
            )
            for other in chosen_terms
        ):
            continue
        if focused and chosen and quoted + len(text.split()) > WORDS_PER_ANSWER_SENTENCE * most:
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
                used = tokenizer.count(head) + 1
            continue
        chosen.append((pos, text))
        chosen_terms.append(words)
        used += cost
    return rows_before_definitions(chosen, definitions)


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
