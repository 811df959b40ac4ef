"""How an offline answer ranks its units (sentences, and table rows quoted
under their headings): one score, the weighted sum of a table of named
features, with one set of weights (docsum.models.unitweights) that
bench/fit_scorer.py fits on half of each development set and reports on the
other half. Nothing here multiplies or adds a literal weight of its own: a
change to how a unit is scored is a change to a feature or to the fitted
weights, and the fit's ablation says what each feature adds.

The features, each a number computed from the question and the unit (with
the other units of the context for word weights):

- lexical: BM25 of the unit against the question's terms, over the units read;
- coverage: the share of the question's weight the unit holds (rarer words
  weigh more; the question's names and framing words less, since grounding
  has already chosen documents by them);
- centrality: cosine of the unit with the context's centroid;
- proximity: how many of the question's terms sit close together in the unit;
- answer_type: the unit holds the kind of fact asked for (an amount for "how
  much", a date for "when", a person for "who", a place for "where"…);
- figure: a figure at all, in a unit on the question, when one is asked for;
- amount: an amount of money in a unit on the question that asks for no
  figure (a fact beats talk about it);
- row_label: a table row whose label the question names
  (docsum.models.answerrank.row_label_bonus);
- period: the log of how well the unit's period fits the one asked for;
- length: the log of the penalty on a unit too long to read as an answer;
- fragment: a unit of fewer than three terms;
- position: how early the unit comes in the context (passages arrive best first);
- document: the retrieval rank of the unit's document, as 1 / rank (1 for
  the best document, 1/2 for the next …; 0 where it is not known). A
  sentence of the document retrieval put first beats a like one of the
  third: a question that names nothing ("When was the book first
  challenged?") otherwise takes a sentence on another document's "first".
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from docsum.lexical import CAPITAL, MONTH_PATTERN, SMALL
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
    spelled_out,
)
from docsum.models.unitweights import WEIGHTS

FEATURES: tuple[str, ...] = (
    "lexical",
    "coverage",
    "centrality",
    "proximity",
    "answer_type",
    "figure",
    "amount",
    "row_label",
    "period",
    "length",
    "fragment",
    "position",
    "document",
)

# Kinds of fact a question asks for: how the question says so, and how a
# unit holding one looks.
ANSWER_TYPES: dict[str, tuple[re.Pattern[str], re.Pattern[str]]] = {
    "amount": (
        re.compile(r"\bhow much\b|\b(?:price|cost|costs|paid|pay|spend|spent|fee|worth)\b", re.IGNORECASE),
        re.compile(r"[$€£¥]\s?\d|\b\d[\d,.]*\s?(?:dollars|euros|pounds|million|billion|USD|EUR|GBP)\b"),
    ),
    "date": (
        re.compile(r"\bwhen\b|\bwhat (?:year|date|day|month)\b|\bwhich (?:year|date|day|month)\b", re.IGNORECASE),
        re.compile(rf"\b(?:{MONTH_PATTERN})\b[^.]*\b\d{{4}}\b|\b\d{{1,2}}\s+(?:{MONTH_PATTERN})\b|\b(?:1\d|20)\d\d\b"),
    ),
    # A rate asks for a percentage, of the rate named (see _holds); a
    # currency's exchange rate asks for none.
    "percentage": (
        re.compile(r"(?<!exchange )\brates?\b|\bpercent(?:age)?\b|\bwhat share\b", re.IGNORECASE),
        re.compile(r"\d%|\d\s?(?:percent|per cent)\b"),
    ),
    "count": (
        re.compile(r"\bhow many\b", re.IGNORECASE),
        re.compile(r"\b\d[\d,]*\b|\b(?:two|three|four|five|six|seven|eight|nine|ten|hundred|thousand)\b"),
    ),
    "person": (
        re.compile(r"^\W*(?:who|whom|whose)\b|\bby whom\b", re.IGNORECASE),
        # Two or more capitalised words ("Mara Quinn", "J. Arlen Voss", "Józef Ważny").
        re.compile(
            rf"\b{CAPITAL}{SMALL}+(?:\s+(?:{CAPITAL}\.\s*)*{CAPITAL}{SMALL}+)+"
            rf"|\b{CAPITAL}\.\s*{CAPITAL}{SMALL}+(?:\s+{CAPITAL}{SMALL}+)+"
        ),
    ),
    "place": (
        re.compile(
            r"\bwhere\b|\b(?:what|which|in what|in which) (?:country|city|state|continent|region|town)\b", re.IGNORECASE
        ),
        # A preposition of place before a name: "in Westmark", "near Łęczyca".
        re.compile(rf"\b(?:in|at|near|from|across) (?:the )?{CAPITAL}[\w'’-]+"),
    ),
}
_WANTS_FIGURE = re.compile(
    r"\bhow (?:much|many|long|far|old|tall|high|big|large|often)\b|\bwhen\b|\bwhat (?:year|date|day|time|price|cost|amount|percentage)\b"
    r"|\b(?:price|cost|paid|pay|amount|total|number|percent|rate|date|year)\b",
    re.IGNORECASE,
)
_DIGIT = re.compile(r"\d")
_RATE = re.compile(r"\b([a-z]+) rates?\b", re.IGNORECASE)
# The question's names count this much of a word's weight in `coverage`:
# they say which document, not which unit.
NAME_WEIGHT = 0.5
# BM25's saturation and length normalisation, the usual values.
BM25_K1 = 1.2
BM25_B = 0.75
# How close the question's terms must sit to count as near each other.
PROXIMITY_WINDOW = 10


def one_word_names(query: str) -> list[str]:
    """The question's names of one word ("Undertow" in "Who directed Undertow?"), as keys."""
    return [name for name in question_names(query) if name.isalpha()]


def lowered_terms(names: Sequence[str], unit: str) -> set[str]:
    """The answer terms of the question's one-word `names` that `unit` writes
    only in lower case: "the ferry was caught in the undertow" does not name
    a film the question writes as "Undertow"."""
    if not names:
        return set()
    quiet = lower_only(unit)
    return {t for name in names if name in quiet for t in answer_terms(name)}


@dataclass
class QuestionView:
    """What the features read of a question, once for all its units."""

    query: str
    terms: set[str]
    names: set[str]
    weight: dict[str, float]
    wanted: list[str]
    wants_figure: bool
    rate: str | None
    asked_names: set[str]
    one_word_names: list[str]
    shares: bool
    one_quarter: bool
    level: bool
    label_weights: dict[str, float] = field(default_factory=dict)
    definitions: frozenset[str] = frozenset()


def document_frequencies(bags: Sequence[Mapping[str, int]]) -> Counter[str]:
    """How many of `bags` hold each term."""
    df: Counter[str] = Counter()
    for bag in bags:
        df.update(bag.keys())
    return df


def idf_weights(bags: Sequence[Mapping[str, int]]) -> dict[str, float]:
    """Smoothed inverse document frequency of every term over `bags`."""
    n = len(bags)
    return {t: math.log((n + 1) / (c + 1)) + 1.0 for t, c in document_frequencies(bags).items()}


def read_question(query: str, units: Sequence[str], idf: Mapping[str, float]) -> QuestionView:
    """The question as the features read it, with the word weights of the context."""
    asked = answer_terms(spelled_out(query))
    terms = set(asked)
    names = {folded(t) for t in name_terms(query)}
    frame = frame_terms(query)
    weight = {t: idf.get(t, 1.0) * (NAME_WEIGHT if t in names else FRAME_WEIGHT if t in frame else 1.0) for t in terms}
    label_weights = {t: idf.get(t, 1.0) for t in terms}
    # A label the document defines with the question's words is named too.
    aliases, definitions = defined_labels(list(units), asked, label_weights, frozenset(names | frame))
    label_weights.update(aliases)
    return QuestionView(
        query=query,
        terms=terms,
        names=names,
        weight=weight,
        wanted=[kind for kind, (asks, _) in ANSWER_TYPES.items() if asks.search(query)],
        wants_figure=bool(_WANTS_FIGURE.search(query)),
        rate=next((f"{m.group(1).lower()} rate" for m in _RATE.finditer(query)), None),
        asked_names=set(question_names(query)),
        one_word_names=one_word_names(query),
        shares=asks_share(query),
        one_quarter=asks_one_quarter(query),
        level=asks_level(query),
        label_weights=label_weights,
        definitions=definitions,
    )


def holds(kind: str, text: str, asked_names: set[str], rate: str | None = None) -> bool:
    """`text` holds a fact of the kind asked for other than the question's own
    names ("Mara Quinn" for "Who directed Glass Harbor?", not "Glass Harbor");
    a percentage answers for the rate asked (`rate`), not another one."""
    if kind == "percentage" and rate is not None and rate not in text.lower():
        return False
    return any(phrase_key(m.group(0)) not in asked_names for m in ANSWER_TYPES[kind][1].finditer(text))


def _proximity(sequence: list[str], terms: set[str]) -> float:
    """The most distinct question terms within PROXIMITY_WINDOW consecutive
    terms of the unit, as a share of the question's terms."""
    hits = [(i, t) for i, t in enumerate(sequence) if t in terms]
    if not hits or not terms:
        return 0.0
    best = 0
    start = 0
    for end in range(len(hits)):
        while hits[end][0] - hits[start][0] >= PROXIMITY_WINDOW:
            start += 1
        best = max(best, len({t for _, t in hits[start : end + 1]}))
    return best / len(terms)


@dataclass
class Context:
    """The units of one answer's context read together: their terms, the word
    weights and the centroid the features compare each unit with."""

    units: list[str]
    sequences: list[list[str]]
    bags: list[Counter[str]]
    idf: dict[str, float]
    bm25_idf: dict[str, float]
    average_length: float
    centroid: Counter[str]
    centroid_norm: float

    @classmethod
    def of(
        cls, units: Sequence[str], background: Sequence[str] = (), term_of: Callable[[str], list[str]] = answer_terms
    ) -> Context:
        sequences = [term_of(u) for u in units]
        bags = [Counter(s) for s in sequences]
        # Word weights from every unit read, not only the candidates: refine
        # hands over an earlier answer and a few new units, and in a pool that
        # small a word in every unit would weigh next to nothing.
        candidates = set(units)
        extra = [Counter(term_of(u)) for u in background if u not in candidates]
        df = document_frequencies(bags + extra)
        n = len(bags) + len(extra)
        idf = {t: math.log((n + 1) / (c + 1)) + 1.0 for t, c in df.items()}
        bm25_idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
        centroid: Counter[str] = Counter()
        for bag in bags:
            centroid.update({t: idf[t] for t in bag})
        norm = math.sqrt(sum(v * v for v in centroid.values())) or 1.0
        average = sum(len(s) for s in sequences) / max(1, len(sequences))
        return cls(list(units), sequences, bags, idf, bm25_idf, average or 1.0, centroid, norm)


def _lexical(ctx: Context, i: int, terms: set[str]) -> float:
    """BM25 of unit `i` against `terms`, divided by its most (every term
    saturated), so it reads as a share from 0 to 1."""
    bag = ctx.bags[i]
    length = len(ctx.sequences[i]) / ctx.average_length
    top = sum(ctx.bm25_idf.get(t, 0.0) for t in terms) * (BM25_K1 + 1)
    if top <= 0:
        return 0.0
    total = 0.0
    for t in terms:
        tf = bag.get(t, 0)
        if tf:
            total += ctx.bm25_idf[t] * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * length))
    return total / top


def centrality(ctx: Context, i: int) -> float:
    """Cosine of unit `i` (log term frequency times IDF) with the context's centroid."""
    vec = {t: ctx.idf[t] * (1 + math.log(c)) for t, c in ctx.bags[i].items()}
    norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
    return sum(v * ctx.centroid[t] for t, v in vec.items()) / (norm * ctx.centroid_norm)


def document_prior(rank: int | None) -> float:
    """The `document` feature of a unit whose document retrieval ranked
    `rank` (0 for the best; None: not known)."""
    return 0.0 if rank is None else 1.0 / (1 + rank)


def features_of(view: QuestionView, ctx: Context, i: int, document: float = 0.0) -> dict[str, float] | None:
    """The features of unit `i`, or None for a unit no answer quotes (a
    heading, a form's words, half a sentence); `document` is its
    document's (document_prior)."""
    text = ctx.units[i]
    if text.lstrip().startswith("#") or not is_quotable(text):
        return None
    bag = ctx.bags[i]
    lowered = lowered_terms(view.one_word_names, text)
    total = sum(view.weight.values()) or 1.0
    coverage = sum(w for t, w in view.weight.items() if t in bag and t not in lowered) / total
    on_topic = coverage > 0
    about_thing = any(t in bag for t in view.terms - view.names)
    length = len(text.split())
    return {
        "lexical": _lexical(ctx, i, view.terms - lowered),
        "coverage": coverage,
        "centrality": centrality(ctx, i),
        "proximity": _proximity(ctx.sequences[i], view.terms - lowered),
        "answer_type": float(sum(1 for k in view.wanted if holds(k, text, view.asked_names, view.rate)))
        if about_thing
        else 0.0,
        "figure": float(on_topic and view.wants_figure and bool(_DIGIT.search(text))),
        "amount": float(on_topic and not view.wants_figure and bool(ANSWER_TYPES["amount"][1].search(text))),
        "row_label": row_label_bonus(text, view.label_weights, view.shares, view.definitions),
        "period": math.log(period_factor(text, view.one_quarter, view.level)),
        "length": math.log(LONG_UNIT_WORDS / length) if length > LONG_UNIT_WORDS else 0.0,
        "fragment": float(len(bag) < 3),
        "position": 1.0 - i / max(1, len(ctx.units)),
        "document": document,
    }


def score(features: Mapping[str, float], weights: Mapping[str, float] = WEIGHTS) -> float:
    """The unit's score: the weighted sum of its features."""
    return sum(weights.get(name, 0.0) * value for name, value in features.items())


def unit_features(
    query: str, units: Sequence[str], background: Sequence[str] = (), documents: Sequence[float] | None = None
) -> list[dict[str, float] | None]:
    """Every unit's features for `query` (None for a unit no answer quotes);
    `documents`: each unit's `document` feature (document_prior)."""
    ctx = Context.of(units, background)
    view = read_question(query, units, ctx.idf)
    return [features_of(view, ctx, i, documents[i] if documents else 0.0) for i in range(len(units))]
