"""Multi-hop questions offline (docsum.models.hops, docsum.query.grounding):
a question that reaches its answer through something it does not name is
answered by a chain of sentences across documents, the last hop first, or
declined; never with hop 1's fact or an unrelated document's."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli_parts as run

from docsum.lexical import sentences
from docsum.models.prompts import ABSTENTION_TEXT

QUESTION = "Who was the first president of the society which published the Journal of Quiet Studies?"

JOURNAL = (
    "The Journal of Quiet Studies is a peer-reviewed academic journal published by the "
    "Northfield Acoustical Society on behalf of the Council for Silent Rooms. "
    "It was established in 1987 and covers research in room acoustics. "
    "The editor-in-chief is Tomas Ekwall.\n"
)
SOCIETY = (
    "The Northfield Acoustical Society was founded in 1921 by engineers of the Carlow works. "
    "Margaret Oduya, who was the first president of the Northfield Acoustical Society, "
    "wrote its charter in a single night. "
    "The society meets every spring in Carlow and keeps a library of recordings.\n"
)
# Another document's first president: the fact the offline engine used to
# quote for a question it could not chain.
REPUBLIC = (
    "Westmarch gained its independence in 1961, and Daniel Brook, a surveyor who had "
    "campaigned for a yes vote, became the first president of the Republic of Westmarch. "
    "The republic's capital is Port Alder.\n"
)


def _store(tmp_path: Path, docs: dict[str, str]) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in docs.items():
        (folder / name).write_text(text)
    store = tmp_path / "store.sqlite"
    code, _, err = run("build", folder, "--store", store)
    assert code == 0, err
    return store


def _first_sentence(answer: str) -> str:
    return sentences(answer.split("\nSources:")[0])[0]


@pytest.mark.parametrize("mode", ["compact", "refine"])
def test_a_chained_question_is_answered_by_the_hop_that_holds_the_answer_first(tmp_path: Path, mode: str) -> None:
    store = _store(
        tmp_path,
        {
            "Journal_of_Quiet_Studies.txt": JOURNAL,
            "Northfield_Acoustical_Society.txt": SOCIETY,
            "Westmarch.txt": REPUBLIC,
        },
    )
    code, out, err = run("ask", QUESTION, "--store", store, "--mode", mode)
    assert code == 0, err
    # The answer first, then how it was reached: the society that published
    # the journal.
    assert "Margaret Oduya" in _first_sentence(out), out
    assert "published by the Northfield Acoustical Society" in out
    assert "Daniel Brook" not in out


def test_a_chained_question_that_cannot_be_chained_is_declined(tmp_path: Path) -> None:
    # Without the society's document, the journal's sentence answers "which
    # society", not "who was its first president", and Westmarch's first
    # president is another question's answer.
    store = _store(tmp_path, {"Journal_of_Quiet_Studies.txt": JOURNAL, "Westmarch.txt": REPUBLIC})
    code, out, _ = run("ask", QUESTION, "--store", store)
    assert code == 5, out
    assert ABSTENTION_TEXT in out
    assert "Daniel Brook" not in out and "Northfield" not in out


def test_the_second_hops_document_is_found_when_the_retriever_ranks_it_low(tmp_path: Path) -> None:
    # The society's document shares few of the question's words ("first
    # president", "society"), and documents on other journals and other first
    # presidents share more: with --top-k 2 the retriever does not choose it.
    # Grounding takes it in because the journal's sentence names its subject.
    others = {
        f"Journal_of_{topic}.txt": (
            f"The Journal of {topic} is a peer-reviewed journal of studies on {topic.lower()}, "
            f"published quarterly by the Society of {topic} Studies. "
            f"The first president of the Society of {topic} Studies was {person}.\n"
        )
        for topic, person in [("Loud Rooms", "Anna Fell"), ("Quiet Machines", "Per Lind"), ("Studies", "Ola Berg")]
    }
    store = _store(
        tmp_path,
        {"Journal_of_Quiet_Studies.txt": JOURNAL, "Northfield_Acoustical_Society.txt": SOCIETY, **others},
    )
    code, out, err = run("ask", QUESTION, "--store", store, "--top-k", "2", "--explain")
    assert code == 0, err
    assert "Margaret Oduya" in _first_sentence(out), out
    assert "a hop further: Northfield_Acoustical_Society.txt" in err
