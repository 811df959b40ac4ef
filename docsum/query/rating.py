"""Rating texts with the LLM in numbered batches: what LLM choice (the `llm`
and `hybrid` retrievers rating summaries) and LLM rerank (rating passages)
share. The texts are grouped into batches that fit the prompt, every batch
is sent at once, and each answer is read by a parser that accepts the many
shapes models answer in and never raises.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from dataclasses import dataclass

from docsum.ingest.split import iter_split_tokens
from docsum.lazyre import LazyPattern
from docsum.models.llm import LLM
from docsum.models.prompts import PromptTemplate
from docsum.synthesizers.budget import PromptBudget


@dataclass
class BatchRatings:
    """What the LLM said of one batch of texts."""

    items: list[int]  # the indices (into the rated texts) of this batch, as numbered 1..n in the prompt
    # (index into the rated texts, relevance 0..10 or None when unstated), best
    # first; a text rated 0 (the LLM saying "irrelevant") is left out.
    ratings: list[tuple[int, float | None]]
    parsed: bool  # the answer could be read: ratings, or an explicit "none of these"


def planned_rating_calls(texts: int, batch_size: int) -> int:
    """Calls `rate_in_batches` makes for `texts` texts (at least: a batch
    also closes early when the next text would not fit the window)."""
    return math.ceil(texts / max(1, batch_size))


async def rate_in_batches(
    llm: LLM, template: PromptTemplate, query: str, texts: list[str], batch_size: int
) -> list[BatchRatings]:
    """Ask the LLM to rate `texts` for `query` with `template` (which takes
    `query_str` and the numbered batch as `context_str`), at most
    `batch_size` texts a call, every call at once."""
    base = template.partial_format(query_str=query)
    groups, shown = fit_batches(llm, base, texts, max(1, batch_size))

    async def ask(group: list[int]) -> str:
        batch = [shown[i] for i in group]
        return await llm.apredict(base, json_mode=True, context_str=format_batch(batch), candidates=batch)

    answers = await asyncio.gather(*(ask(group) for group in groups))
    out: list[BatchRatings] = []
    for group, answer in zip(groups, answers):
        choices = parse_choices(answer, len(group))
        ratings = [
            (group[number - 1], relevance) for number, relevance in choices if relevance is None or relevance > 0
        ]
        out.append(BatchRatings(group, ratings, bool(choices) or says_none(answer)))
    return out


# ---------------------------------------------------------------------------
# Reading the answers.

_DOC_WORDS = r"(?:doc(?:ument)?s?|documentos?|dokumente?|passages?|items?|文档|文件|文書|ドキュメント|#)"
_REL_WORDS = r"(?:relevance|relevancia|relevância|pertinence|pertinencia|relevanz|score|rating|相关度|相关性|相關度|関連度|评分|得分|分数)"
_NUM = r"(\d+(?:\.\d+)?)"
_DOC_THEN_NUM = LazyPattern(
    r"(?<![A-Za-z])" + _DOC_WORDS + r"\s*(?:no\.?|number|nr\.?|n[°º])?\s*[:：#]?\s*(\d+)(?![\d.]\d)", re.IGNORECASE
)
_REL_THEN_NUM = LazyPattern(_REL_WORDS + r"[^\d\n]{0,20}?" + _NUM, re.IGNORECASE)
# "Doc 3 - 8/10", "Doc 2: 9", "Document 4 (7)", "Doc: 2, 9": a score right after a separator.
_SEPARATED_NUM = LazyPattern(r"^[\s*_`'\"\]]*(?:[-–—:：=|(（]|[,，、;])\s*[(（\[]?\s*" + _NUM + r"(?![\d.]\d)")
_OUT_OF_TEN = LazyPattern(_NUM + r"\s*(?:/\s*10\b|out of 10\b|分)", re.IGNORECASE)
_LEADING_NUM = LazyPattern(r"^\s*(?:[-*•]\s*)?\(?(\d+)\s*([.)\]:：]?)(?=\s|$|[,，(])")
_MORE_NUMS = LazyPattern(r"^(?:\s*(?:,|，|、|and|&|y|und|et|和|及)\s*(\d+)(?![\d.]\d))+", re.IGNORECASE)
_NEGATION = LazyPattern(
    r"\b(?:not (?:\w+ )?(?:relevant|useful|related)|irrelevant|unrelated|no relevance)\b|不相关|无关|no es relevante|nicht relevant",
    re.IGNORECASE,
)
_PLURAL_DOC_WORDS = ("docs", "documents", "documentos", "dokumente", "passages", "items")
_ANY_NUM = re.compile(_NUM)


def parse_choices(answer: str, num_choices: int) -> list[tuple[int, float | None]]:
    """(document number, relevance) pairs from an LLM choice answer.

    Accepts JSON (an object with a list of {doc, relevance}, a bare list, or a
    number→score map, fenced or not), `Doc: 2, Relevance: 9`, `Document 2,
    relevance score: 9`, numbered lists, `8/10` scores and common non-English
    labels. Numbers outside 1..num_choices are dropped (never wrapped); each
    number keeps its own score, so one unparseable score cannot shift the
    others; a repeated number keeps its best score. A mention with no score
    that says "not relevant" is no choice. Order: by relevance, then first
    mention. Prose with no usable numbers gives [].
    """
    found: dict[int, float | None] = {}
    order: list[int] = []

    def add(doc: int, rel: float | None) -> None:
        if not 1 <= doc <= num_choices:
            return
        if doc not in found:
            order.append(doc)
            found[doc] = rel
        elif rel is not None:
            held = found[doc]
            if held is None or rel > held:
                found[doc] = rel

    parsed_json = _parse_json_choices(answer)
    if parsed_json is not None:
        for doc, rel in parsed_json:
            add(doc, rel)
    else:
        for line in answer.splitlines():
            for doc, rel in _parse_line(line):
                add(doc, rel)
    first = {d: i for i, d in enumerate(order)}
    ranked = sorted(order, key=lambda d: (-(score if (score := found[d]) is not None else -1.0), first[d]))
    return [(d, found[d]) for d in ranked]


def _clean_score(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        score = float(value)  # type: ignore[arg-type]
    except OverflowError:  # an integer too large for a float: off the scale
        return 10.0 if isinstance(value, int) and value > 0 else 0.0
    except (TypeError, ValueError):
        match = _ANY_NUM.search(str(value))
        if not match:
            return None
        score = float(match.group(1))
    if score != score:  # NaN
        return None
    return max(0.0, min(10.0, score))


def _number(digits: str) -> int:
    """A document number written in decimal digits. Past nine digits it is no
    document's number (and int() refuses strings past 4300 digits): 0, which
    every caller drops as out of range."""
    digits = digits.strip()
    return int(digits) if len(digits) <= 9 else 0


def _as_doc_number(value: object) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None  # is_integer() is False for inf and NaN
    match = re.search(r"(\d+)\s*$", str(value).strip())
    return _number(match.group(1)) if match else None


_FENCE = LazyPattern(r"```[a-zA-Z]*\s*\n?(.*?)```", re.DOTALL)
_CHOICE_KEYS = ("choices", "documents", "docs", "results", "selected", "selection", "answer", "ranking", "passages")


def _json_candidates(answer: str) -> list[tuple[str, bool]]:
    """Texts that may hold the JSON, and whether a bare list is trusted there
    (only when the JSON is the whole reply or a fenced block: a stray "[1]"
    inside prose is a citation, not a choice)."""
    out: list[tuple[str, bool]] = [(m.group(1).strip(), True) for m in _FENCE.finditer(answer)]
    text = answer.strip()
    if "```" in text and not out:
        text = re.sub(r"```[a-zA-Z]*", "", text).strip()
    out.append((text, True))
    brace = text.find("{")
    if brace > 0:
        out.append((text[brace:], False))
    return out


def _parse_json_choices(answer: str) -> list[tuple[int, float | None]] | None:
    for text, whole in _json_candidates(answer):
        if not text or text[0] not in "{[":
            continue
        try:
            data, _ = json.JSONDecoder().raw_decode(text)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: "[[[[…" nested past Python's limit
            continue
        if isinstance(data, list) and not whole:
            continue
        result = _choices_from_json(data)
        if result is not None:
            return result
    return None


def _choices_from_json(data: object) -> list[tuple[int, float | None]] | None:
    if isinstance(data, dict):
        lowered = {str(k).lower(): v for k, v in data.items()}
        listed = next((lowered[key] for key in _CHOICE_KEYS if isinstance(lowered.get(key), list)), None)
        if listed is not None:
            data = listed
        elif data and all(str(k).strip().isdecimal() for k in data):  # isdigit() would admit "²"
            return [(_number(str(k)), _clean_score(v)) for k, v in data.items()]
        elif any(k in lowered for k in ("doc", "document", "id", "doc_id", "number")):
            data = [data]
        else:
            return None
    if not isinstance(data, list):
        return None
    out: list[tuple[int, float | None]] = []
    for item in data:
        doc, rel = _choice_of(item)
        if doc is not None:
            out.append((doc, rel))
    return out


def _choice_of(item: object) -> tuple[int | None, float | None]:
    """One choice of a JSON reply: an object with a document and a relevance,
    a [document, relevance] pair, or a bare document number."""
    if isinstance(item, dict):
        lowered = {str(k).lower(): v for k, v in item.items()}
        raw_doc = next(
            (lowered[k] for k in ("doc", "document", "doc_id", "id", "number", "index", "passage") if k in lowered),
            None,
        )
        raw_rel = next((lowered[k] for k in ("relevance", "score", "relevance_score", "rating") if k in lowered), None)
        return _as_doc_number(raw_doc), _clean_score(raw_rel) if raw_rel is not None else None
    if isinstance(item, list) and item:
        return _as_doc_number(item[0]), _clean_score(item[1]) if len(item) > 1 else None
    return _as_doc_number(item), None


def _score_in(segment: str) -> float | None:
    """The relevance stated in the text that follows a document number."""
    match = _REL_THEN_NUM.search(segment)
    if match is None:
        match = _SEPARATED_NUM.match(segment)
    if match is None:
        match = _OUT_OF_TEN.search(segment)
    if match is None:
        return None
    return max(0.0, min(10.0, float(match.group(1))))


def _parse_line(line: str) -> list[tuple[int, float | None]]:
    if not line.strip() or line.lstrip().lower().startswith(("question", "answer:")):
        return []
    mentions = list(_DOC_THEN_NUM.finditer(line))
    found: list[tuple[int, float | None]] = []
    if mentions:
        for i, match in enumerate(mentions):
            end = mentions[i + 1].start() if i + 1 < len(mentions) else len(line)
            segment = line[match.end() : end]
            word = re.sub(r"[\s\d:：#.]+", " ", match.group(0)).split()
            more = _MORE_NUMS.match(segment) if word and word[0].lower() in _PLURAL_DOC_WORDS else None
            if more:
                # "Documents 2, 5 and 7": a list of numbers, no scores.
                numbers = [_number(match.group(1))] + [_number(n) for n in re.findall(r"\d+", more.group(0))]
                found.extend((n, None) for n in numbers)
                continue
            rel = _score_in(segment)
            if rel is None and len(mentions) == 1:
                rel = _score_in_before(line[: match.start()])
            found.append((_number(match.group(1)), rel))
    else:
        lead = _LEADING_NUM.match(line)
        if not lead:
            return []
        segment = line[lead.end() :]
        rel = _score_in(segment)
        if rel is None and lead.group(2) in (":", "："):
            nums = _ANY_NUM.findall(segment)
            rel = max(0.0, min(10.0, float(nums[0]))) if len(nums) == 1 else None
        if rel is None and re.search(r"[^\W\d_]", segment):
            # "1. The question asks about bees.": list numbering of prose, not a choice.
            return []
        found.append((_number(lead.group(1)), rel))
    if _NEGATION.search(line):
        # "Doc 1 is not relevant": a mention without a score is no choice.
        found = [(d, r) for d, r in found if r is not None]
    return found


def _score_in_before(prefix: str) -> float | None:
    # "Relevance: 9, Doc: 2"
    match = _REL_THEN_NUM.search(prefix)
    return max(0.0, min(10.0, float(match.group(1)))) if match else None


def format_batch(texts: list[str]) -> str:
    return "\n\n".join(f"Document {i}:\n{t}" for i, t in enumerate(texts, start=1))


# "Document 10:" plus the blank line between blocks, in tokens, with slack.
_BLOCK_OVERHEAD_TOKENS = 8


def fit_batches(
    llm: LLM, template: PromptTemplate, texts: list[str], batch_size: int
) -> tuple[list[list[int]], list[str]]:
    """Group texts (by index) into numbered batches of at most `batch_size`
    that also fit the prompt's window, so ten long passages never overflow it:
    a batch closes early when the next text would not fit. A single text
    larger than the whole room is cut to fit (its head is what gets rated).
    Returns the batches and the texts as they will be shown."""
    budget = PromptBudget(llm.metadata)
    room = budget.available(template)
    tok = llm.metadata.tokenizer
    shown: list[str] = []
    batches: list[list[int]] = []
    current: list[int] = []
    used = 0
    for i, text in enumerate(texts):
        cost = tok.count(text) + _BLOCK_OVERHEAD_TOKENS
        if cost > room:
            text = next(iter_split_tokens(text, max(1, room - _BLOCK_OVERHEAD_TOKENS), 0, tok), "")
            cost = tok.count(text) + _BLOCK_OVERHEAD_TOKENS
        shown.append(text)
        if current and (len(current) >= batch_size or used + cost > room):
            batches.append(current)
            current, used = [], 0
        current.append(i)
        used += cost
    if current:
        batches.append(current)
    return batches, shown


_NONE_CHOSEN = LazyPattern(
    r"^\W*(?:none|no (?:document|passage|summary|summarie)s?\b|nothing)\b"
    r"|\bnone of (?:the|these) (?:documents|passages|summaries)\b",
    re.IGNORECASE,
)


def says_none(answer: str) -> bool:
    """An explicit empty choice ({"choices": []}, or prose such as "None of
    the documents is relevant") is an answer, not a parse failure."""
    parsed = _parse_json_choices(answer)
    if parsed is not None:
        return parsed == []
    return bool(_NONE_CHOSEN.search(answer.strip()))
