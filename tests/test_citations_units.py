"""Each unit an answer quotes keeps its own marker when the answer is read
again: by refine and compact (the answer so far, beside a new part of the
context), by a tree level above, and by the Sources list (the quote of each
marker). A unit that starts in lower case ("iPhone®: …", "a) Income
Statements …") was read as the tail of the unit before it: the two kept one
marker, the first's, behind the second, and the Sources quote was chosen for
the two together."""

from __future__ import annotations

import re

from docsum.citations import cite
from docsum.models.extractive import ExtractiveLLM
from docsum.models.prompts import REFINE_PROMPT
from docsum.schema import Node, NodeWithScore

COST = "Total cost of sales: 45,384 million, three months ended July 1, 2023"
IPHONE = "iPhone®: $39,669 million, three months ended July 1, 2023"
INCOME = "a) Income Statements for the three months ended July 1, 2023"


def _units(answer: str) -> list[str]:
    """The answer's units as written: each ends with its marker(s)."""
    return re.findall(r".*?\[\d+\][.!?]?(?:\s+|$)", answer)


def test_an_answer_is_cut_after_each_units_markers() -> None:
    from docsum.citations import cited_pieces

    answer = f"{COST} [1]. {IPHONE} [2]. {INCOME} [1]. Net sales fell 1% [3] For the quarter [3]"
    assert cited_pieces(answer) == [
        f"{COST} [1].",
        f"{IPHONE} [2].",
        f"{INCOME} [1].",
        "Net sales fell 1% [3]",
        "For the quarter [3]",
    ]
    # Markers inside a sentence do not end it.
    assert cited_pieces("Apple [1] and Microsoft [2] reported growth.") == [
        "Apple [1] and Microsoft [2] reported growth."
    ]


def test_refine_keeps_each_earlier_units_own_marker() -> None:
    existing = f"{COST} [1]. {IPHONE} [2]."
    context = "[3] (source: c.txt)\nTotal net sales were $81,797 million in the three months ended July 1, 2023."
    refined = ExtractiveLLM().predict(
        REFINE_PROMPT,
        existing_answer=existing,
        context_msg=context,
        query_str="What were total net sales, iPhone sales and the total cost of sales in the three months ended July 1, 2023?",
    )
    assert refined != existing, "the new passage was to be added"
    # Before: "Total cost of sales: …, 2023. iPhone®: …, 2023 [1]." (the first
    # unit unmarked, the second under the first's passage).
    assert f"{COST} [1]." in refined and f"{IPHONE} [2]." in refined, refined
    assert all(re.search(r"\[\d+\][.!?]?$", unit.strip()) for unit in _units(refined))
    assert " ".join(u.strip() for u in _units(refined)) == refined


def test_each_marker_is_quoted_from_the_unit_it_closes() -> None:
    # A unit without closing punctuation (a cover-page line) is marked
    # "… 2022 [1]" and the next unit follows it in the same sentence.
    outstanding = "10,201,654,176 shares of common stock outstanding as of October 19, 2022"
    nodes = [
        NodeWithScore(
            Node(
                f"{outstanding}\n\nThe quarterly period ended September 30, 2022 saw 10,201,654,176 shares outstanding.",
                "d1",
                "q3.txt",
            )
        ),
        NodeWithScore(Node("For the quarterly period ended September 30, 2022.", "d1", "q3.txt", pages=(4,))),
    ]
    answer = f"{outstanding} [1] For the quarterly period ended September 30, 2022 [2]."
    cleaned, report = cite(answer, nodes)
    assert cleaned == answer
    # Before: the quote of [1] was the sentence holding most of both units' words.
    assert [(c.marker, c.quote) for c in report.citations] == [
        (1, outstanding),
        (2, "For the quarterly period ended September 30, 2022."),
    ]


def test_refine_marks_a_unit_it_quotes_by_its_head() -> None:
    # A unit longer than the answer's budget is quoted by its head; the head
    # was looked up by its text, found no passage, and went unmarked.
    long = "Honey bees swarm in spring when the hive becomes crowded and " + " and ".join(
        f"the colony raises queen number {i}" for i in range(12)
    )
    refined = ExtractiveLLM(num_output=20).predict(
        REFINE_PROMPT,
        existing_answer="The apiary keeps twelve hives [1].",
        context_msg=f"[2] (source: b.txt)\n{long}.",
        query_str="When do honey bees swarm?",
    )
    assert refined.startswith("Honey bees swarm in spring") and refined.endswith("[2]"), refined
