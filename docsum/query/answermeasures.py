"""What a person reading `docsum eval --answers`' answers would notice, as
figures: whether the fact comes first, how long the answers are, whether an
answer rests on the wrong company's (person's, place's) documents, and
whether a short gold answer is in the answer at all.

- **figure in the first 50 words**: of the questions whose reference answer
  holds a figure (an amount, a count, a percentage; not a year, and not a
  number the question itself gives), the share whose answer has one of those
  figures within its first FIRST_WORDS words (an amount with its scale
  word counts in millions to three significant digits: "$3.87 billion" is
  found as "3,870 million");
- **answer length**: words of each answered question's answer, median and
  90th percentile;
- **wrong entity**: of the answered questions that name something (a company,
  a person, a place: docsum.models.abstain.question_names), those whose every
  cited document is neither a gold document nor named for one of the
  question's names (its file name, title or summary);
- **gold in the answer** (short reference answers only, up to
  SHORT_ANSWER_WORDS words, aliases counted): the share of questions whose
  answer contains it, within the first FIRST_WORDS words and anywhere, and
  the share answered without it anywhere (a confident wrong answer;
  abstaining does not count against it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from docsum.lexical import MONTH_ABBREVIATIONS, MONTH_PATTERN
from docsum.models.abstain import TextKeys, fold, is_figure, question_names

FIRST_WORDS = 50
SHORT_ANSWER_WORDS = 6
# A figure worth looking for: two significant digits at least, so "1" or "3"
# of a list does not count as finding "$1,850 million".
_NUMBER = re.compile(r"(?<![\w.])\$?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?")
_MARKER = re.compile(r"\[\d{1,3}(?:\s*,\s*\d{1,3})*\]")
# Numbers that are no figure: a date's day ("October 29, 2023", "Apr 1,
# 2023", "29 October") and a form's number ("Form 10-Q"). Counted, the day
# of a filing's quarter end matched the same day in a reference answer:
# 11 of 64 SEC answers "holding a gold figure" held only a date
# (bench/RESULTS.md, "A measure corrected").
_MONTH = rf"(?:{MONTH_PATTERN}|{'|'.join(MONTH_ABBREVIATIONS)})\.?"
# So are a numbered list's item numbers ("11. Investment and transaction
# risk"), a page reference ("on page 41") and a name's number ("COVID-19"):
# a reference answer listing one company's risk factors held no other
# figure, and one numbering 115 of another's counted "101" to "115" as facts
# to find.
_NOT_FIGURE = re.compile(
    rf"\b{_MONTH}\s+\d{{1,2}}\b|\b\d{{1,2}}\s+{_MONTH}(?!\w)|\b\d+-[QK]\b"
    r"|^[ \t]*\d{1,3}[.)][ \t]|\b[Pp]ages?\s+\d+(?:\s*[-–]\s*\d+)?|\b[A-Za-z]+-\d+\b",
    re.MULTILINE,
)


def figures(text: str) -> set[str]:
    """The figures of a text, as plain digits ("$7,709" → "7709", "12.50" →
    "12.5"), years (1900–2100) left out: a filing's answer names its year
    whatever it says. Dates' days and forms' numbers are left out too
    (see _NOT_FIGURE)."""
    out: set[str] = set()
    for match in _NUMBER.finditer(_NOT_FIGURE.sub(" ", text)):
        whole = match.group(1).replace(",", "")
        fraction = (match.group(2) or "").rstrip("0")
        if not fraction and len(whole) == 4 and 1900 <= int(whole) <= 2100:
            continue
        value = whole.lstrip("0") or "0"
        if fraction:
            value = f"{value}.{fraction}"
        if sum(c.isdigit() for c in value.strip("0.")) >= 2:
            out.add(value)
    return out


# An amount with its scale word: "$3.87 billion", "3,870 million".
_AMOUNT = re.compile(
    r"(?<![\w.])\$?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?\s*(thousand|million|billion)s?\b", re.IGNORECASE
)
_SCALE = {"thousand": 1e-3, "million": 1.0, "billion": 1e3}


def amounts(text: str) -> set[str]:
    """The amounts of a text in millions to three significant digits, so
    "$3.87 billion" is found as "3,870 million" and "$15.3 billion" as
    "15,338 million" (a reference answer rounds what a table states)."""
    out: set[str] = set()
    for match in _AMOUNT.finditer(text):
        value = float(f"{match.group(1).replace(',', '')}.{match.group(2) or '0'}") * _SCALE[match.group(3).lower()]
        if value > 0:
            out.add(f"{float(f'{value:.3g}'):g}")
    return out


def words_of(answer: str) -> list[str]:
    """The answer's words, citation markers (and the punctuation they leave
    standing alone) left out."""
    return [w for w in _MARKER.sub(" ", answer).split() if any(c.isalnum() for c in w)]


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", fold(text)).split())


def contains(answer: str, gold: str) -> bool:
    """`gold` in `answer`, whole words, ignoring case, accents and punctuation."""
    needle = _normal(gold)
    return bool(needle) and f" {needle} " in f" {_normal(answer)} "


@dataclass(frozen=True)
class GradedAnswer:
    """What the measures need of one answered (or abstained) question."""

    kind: str
    question: str
    answer: str
    answered: bool
    reference: str | None
    aliases: tuple[str, ...] = ()
    cited_paths: tuple[str, ...] = ()
    cited_names: tuple[str, ...] = ()  # file name, title and summary of each cited document
    gold_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class Share:
    hits: int
    n: int

    @property
    def rate(self) -> float | None:
        return round(self.hits / self.n, 4) if self.n else None

    def as_dict(self) -> dict[str, Any]:
        return {"hits": self.hits, "n": self.n, "rate": self.rate}


@dataclass(frozen=True)
class AnswerMeasures:
    figure_first_50: Share
    words_median: float | None
    words_p90: float | None
    wrong_entity: Share
    short_gold_first_50: Share
    short_gold_anywhere: Share
    short_answered_without_gold: Share
    by_kind: Mapping[str, AnswerMeasures] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "figure_in_first_50_words": self.figure_first_50.as_dict(),
            "answer_words": {"median": self.words_median, "p90": self.words_p90},
            "wrong_entity": self.wrong_entity.as_dict(),
            "short_gold_in_first_50_words": self.short_gold_first_50.as_dict(),
            "short_gold_anywhere": self.short_gold_anywhere.as_dict(),
            "short_answered_without_gold": self.short_answered_without_gold.as_dict(),
        }
        if self.by_kind:
            out["by_kind"] = {kind: m.as_dict() for kind, m in self.by_kind.items()}
        return out


def _percentile(values: list[int], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    # nearest rank: the smallest value at least `share` of the answers reach
    rank = max(1, -(-len(ordered) * share // 1))
    return float(ordered[int(rank) - 1])


def _median(values: list[int]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def wrong_entity(item: GradedAnswer) -> bool | None:
    """None when the measure does not apply (not answered, nothing named,
    nothing cited); else whether every cited document is neither gold nor
    named for one of the question's names."""
    names = [n for n in question_names(item.question) if not is_figure(n)]
    if not item.answered or not names or not item.cited_paths:
        return None
    # By stem: the gold `2023_Q1_ACME.txt` is the stored `2023_Q1_ACME.pdf`.
    gold = {PurePath(p).stem for p in item.gold_paths}
    for path, name_text in zip(item.cited_paths, item.cited_names):
        if PurePath(path).stem in gold:
            return False
        keys = TextKeys(name_text)
        if any(keys.count(n) for n in names):
            return False
    return True


def measure(items: Iterable[GradedAnswer], split: bool = True) -> AnswerMeasures:
    items = list(items)
    fig_hits = fig_n = 0
    lengths: list[int] = []
    wrong_hits = wrong_n = 0
    first_hits = any_hits = without = short_n = 0
    for item in items:
        words = words_of(item.answer) if item.answered else []
        if item.answered:
            lengths.append(len(words))
        wrong = wrong_entity(item)
        if wrong is not None:
            wrong_n += 1
            wrong_hits += int(wrong)
        if not item.reference:
            continue
        wanted = figures(item.reference) - figures(item.question)
        if wanted:
            fig_n += 1
            head = " ".join(words[:FIRST_WORDS])
            scaled = amounts(item.reference) - amounts(item.question)
            fig_hits += int(bool(wanted & figures(head) or scaled & amounts(head)))
        golds = [g for g in (item.reference, *item.aliases) if g.strip()]
        if len(item.reference.split()) <= SHORT_ANSWER_WORDS:
            short_n += 1
            head = " ".join(words[:FIRST_WORDS])
            first_hits += int(any(contains(head, g) for g in golds))
            found = any(contains(" ".join(words), g) for g in golds)
            any_hits += int(found)
            without += int(item.answered and not found)
    by_kind: dict[str, AnswerMeasures] = {}
    if split:
        kinds = sorted({i.kind for i in items})
        if len(kinds) > 1:
            by_kind = {k: measure([i for i in items if i.kind == k], split=False) for k in kinds}
    return AnswerMeasures(
        Share(fig_hits, fig_n),
        _median(lengths),
        _percentile(lengths, 0.9),
        Share(wrong_hits, wrong_n),
        Share(first_hits, short_n),
        Share(any_hits, short_n),
        Share(without, short_n),
        by_kind,
    )
