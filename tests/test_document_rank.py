"""The scorer's `document` feature: a unit of the document retrieval ranked
first beats a like unit of a lower-ranked one, and the rank is read from the
passages' numbering across the parts refine reads one at a time."""

from __future__ import annotations

from docsum.models.extractive import DocumentOrder, ExtractiveLLM
from docsum.models.unitscore import document_prior, unit_features

QUESTION = "When was the first major controversy over the book?"
NOVEL = "One of the first incidents of the book being challenged was in 1966."
SINGER = "In 2007 she embarked on her first worldwide concert tour, with six major stops."


def _part(marker: int, source: str, *lines: str) -> str:
    return f"[{marker}] (source: {source})\n" + "\n".join(lines) + "\n"


def test_of_two_like_sentences_the_one_from_the_first_ranked_document_leads() -> None:
    # A question that names nothing: the singer's sentence shares "first"
    # and "major" with it, the novel's "first" and "book". Without the
    # document's rank the lower-ranked document's sentence led.
    context = (
        _part(1, "novel.txt", NOVEL, "It was set in a small town in Alabama during the 1930s.")
        + "\n"
        + _part(2, "singer.txt", SINGER, "She recorded the album in a studio in New York.")
    )
    answer = ExtractiveLLM().answer(QUESTION, context)
    assert answer.startswith(NOVEL[:-1]), answer


def test_the_rank_holds_across_the_parts_refine_reads() -> None:
    llm = ExtractiveLLM()
    first = llm.answer(QUESTION, _part(1, "novel.txt", NOVEL, "It was set in Alabama during the 1930s."))
    assert first.startswith(NOVEL[:-1]), first
    # The second part holds only the second document's passage; the earlier
    # answer's sentence carries only its marker, [1], and keeps its rank.
    refined = llm.refine(QUESTION, first, _part(2, "singer.txt", SINGER, "She recorded the album in New York."))
    assert refined.startswith(NOVEL[:-1]), refined


def test_document_order_reads_each_passages_document_and_restarts_at_passage_one() -> None:
    order = DocumentOrder()
    assert order.priors("q", _part(1, "a.txt", "x") + _part(2, "a.txt", "y"), [1, 2]) == [1.0, 1.0]
    # A later part: b.txt's first passage comes after a.txt's, so b.txt ranks second.
    assert order.priors("q", _part(3, "b.txt", "z"), [1, 3, None]) == [1.0, 0.5, 0.0]
    # Another question keeps its own numbering.
    assert order.priors("other", _part(1, "c.txt", "w"), [1, 3]) == [1.0, 0.0]
    # The same question asked again starts afresh: passage 1 is now c.txt's.
    assert order.priors("q", _part(1, "c.txt", "w"), [1, 3]) == [1.0, 0.0]


def test_the_document_feature_is_one_over_the_rank_and_zero_when_unknown() -> None:
    assert [document_prior(r) for r in (0, 1, 2, None)] == [1.0, 0.5, 1 / 3, 0.0]
    units = [NOVEL, SINGER]
    found = unit_features(QUESTION, units, documents=[1.0, 0.5])
    assert [f["document"] for f in found if f is not None] == [1.0, 0.5]
    assert all(f is not None and f["document"] == 0.0 for f in unit_features(QUESTION, units))
