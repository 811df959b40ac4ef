"""Questions about "the latest" or "the most recent" document of a series:
four quarterly reports of one company are one series, and "What was Acme's
gross margin in the latest 10-Q?" is answered from the newest of them, not
from whichever filing retrieval happened to rank first.

A series is the documents whose summaries open with the same kind and title
("A quarterly report filed on SEC Form 10-Q: Acme Corporation"); the date a
summary's opening ends with ("…, for the quarter ended September 30, 2023.",
"Meeting minutes: …, 2 October 2019.") orders it. Documents without such a
date are left as they are.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import replace

from docsum.lexical import MONTH_PATTERN, MONTHS
from docsum.query.postprocess import StepReport
from docsum.query.retrieve import Candidate

# "the latest 10-Q", "the most recent quarter", "their newest report".
_ASKS_LATEST = re.compile(r"\b(?:latest|most recent|newest|last|current)\b", re.IGNORECASE)
# "… compared to previous quarters": the older documents are part of the answer.
# Only words that name other periods: "how does the revenue compare to the
# costs" or "what changes in accounting practices" compare nothing across
# filings, and kept the older filings that then led the answer.
_ASKS_COMPARISON = re.compile(
    r"\b(?:previous|prior|earlier|past|preceding|over time|trend\w*|year[- ]over[- ]year|sequential\w*|historical\w*)\b",
    re.IGNORECASE,
)
_MONTHS = [month.lower() for month in MONTHS]
_MONTH = MONTH_PATTERN
_DATE_END = re.compile(
    rf"(?:\b(?P<m1>{_MONTH})\s+(?P<d1>\d{{1,2}}),?\s+(?P<y1>\d{{4}})|\b(?P<d2>\d{{1,2}})\s+(?P<m2>{_MONTH})\s+(?P<y2>\d{{4}}))\.?$",
    re.IGNORECASE,
)
# The opening's title ends where its period begins.
_PERIOD_CUE = re.compile(
    r",\s+(?:for|as of|dated|on)\b.*$|,\s+\d{1,2}\s+\w+\s+\d{4}\.?$|,\s+\w+\s+\d{1,2},?\s+\d{4}\.?$"
)


def asks_latest(question: str) -> bool:
    return bool(_ASKS_LATEST.search(question))


def dated_series(summary: str) -> tuple[str, dt.date] | None:
    """The series a summary's opening names and the date it ends with, or None."""
    first = summary.strip().split("\n", 1)[0].strip()
    match = _DATE_END.search(first)
    if match is None:
        return None
    month = (match.group("m1") or match.group("m2")).lower()
    day = int(match.group("d1") or match.group("d2"))
    year = int(match.group("y1") or match.group("y2"))
    try:
        date = dt.date(year, _MONTHS.index(month) + 1, day)
    except ValueError:
        return None
    series = _PERIOD_CUE.sub("", first[: match.start()].rstrip(" ,")).strip().rstrip(" ,").lower()
    return (series, date) if series else None


def newest_first(
    question: str, chosen: list[Candidate], candidates: list[Candidate]
) -> tuple[list[Candidate], StepReport | None]:
    """For a question about the latest document: each series among `chosen`
    is answered from its newest document among all `candidates` (put first);
    the older ones stay only when the question compares periods. Returns the
    documents to answer from and a step report (None when nothing applies)."""
    if not asks_latest(question) or not chosen:
        return chosen, None
    dated = {c.doc_id: found for c in [*chosen, *candidates] if (found := dated_series(c.summary)) is not None}
    newest: dict[str, Candidate] = {}
    for c in [*chosen, *candidates]:
        if c.doc_id in dated:
            series, date = dated[c.doc_id]
            if series not in newest or date > dated[newest[series].doc_id][1]:
                newest[series] = c
    series_chosen = sorted({dated[c.doc_id][0] for c in chosen if c.doc_id in dated})
    if not series_chosen:
        return chosen, None
    compares = bool(_ASKS_COMPARISON.search(question))
    ids = {c.doc_id for c in chosen}
    front = [newest[s] if newest[s].doc_id in ids else replace(newest[s], chosen=True) for s in series_chosen]
    front_ids = {c.doc_id for c in front}
    # An older document of a series stays only when the question compares.
    rest = [c for c in chosen if c.doc_id not in front_ids and (compares or c.doc_id not in dated)]
    kept = front + rest
    if [c.doc_id for c in kept] == [c.doc_id for c in chosen]:
        return chosen, None
    names = ", ".join(c.path for c in front)
    note = f"the question asks for the latest: {names}" + (" first" if compares else "")
    return kept, StepReport("latest", len(chosen), len(kept), note=note)
