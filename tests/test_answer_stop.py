"""Where an offline answer stops, and when it declines: each further unit
answers another part of the question or scores close to the first
(docsum.models.selection), and the decline is a threshold on the scorer's
best score, a documented setting (--answer-floor, DOCSUM_ANSWER_FLOOR)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli_parts as run

from docsum.lexical import sentences
from docsum.models.prompts import ABSTENTION_TEXT
from docsum.models.selection import adds_to_answer, answer_strength, select_units
from docsum.models.tokens import tokenizer_for_model
from docsum.models.unitweights import ANSWER_SCORE_FLOOR

QUICK_START = "How much did Brindle & Daughter pay for the oven, and when was the auction?"


def answer_of(out: str) -> str:
    return out.split("\n\nSources:")[0]


def test_the_quick_start_answer_stops_after_its_two_facts(offline_sample_store: Path) -> None:
    # Before: a third sentence on the bakery's front door in April 2023 (it
    # names the oven and a date, and answers nothing asked).
    code, out, err = run("ask", QUICK_START, "--store", offline_sample_store)
    assert code == 0, err
    said = sentences(answer_of(out))
    assert len(said) == 2, said
    assert "$1,850" in said[0] and "14 September 2019" in said[1]
    assert "front door" not in out


def test_a_unit_that_answers_another_part_of_the_question_joins() -> None:
    # Three figures asked, three rows: each answers a part of its own.
    units = [
        "Total cost of sales: 45,384 million, three months ended July 1, 2023.",
        "Total net sales: 81,797 million, three months ended July 1, 2023.",
        "Research and development: 7,442 million, three months ended July 1, 2023.",
    ]
    question = "What were total net sales, total cost of sales and research and development in the three months ended July 1, 2023?"
    chosen = select_units(question, units, 400, tokenizer_for_model("gpt-4"), focused=True)
    assert {text for _, text in chosen} == set(units)


def test_adds_to_answer() -> None:
    assert adds_to_answer({"auction", "held"}, {"pay", "oven", "auction"}, {"pay", "oven"})
    assert not adds_to_answer({"oven", "door"}, {"pay", "oven", "auction"}, {"pay", "oven"})
    assert adds_to_answer({"oven"}, set(), {"oven"})  # a question of no terms: nothing to tell parts by


def test_answer_strength_reads_the_scorer() -> None:
    strong = answer_strength(
        "When was the surplus auction held?", ["The surplus auction was held on 14 September 2019."]
    )
    weak = answer_strength("When was the surplus auction held?", ["The bakery sells rye bread on Saturdays."])
    assert strong is not None and weak is not None
    assert strong.score > ANSWER_SCORE_FLOOR > weak.score
    assert strong.coverage == 1.0 and weak.coverage == 0.0
    assert answer_strength("anything", []) is None


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_the_answer_floor_is_a_setting(offline_sample_store: Path, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run("ask", QUICK_START, "--store", offline_sample_store)
    assert code == 0 and "$1,850" in out, err
    # A floor no unit reaches declines the same question.
    args = ["ask", QUICK_START, "--store", offline_sample_store]
    if how == "flag":
        args += ["--answer-floor", "9"]
    else:
        monkeypatch.setenv("DOCSUM_ANSWER_FLOOR", "9")
    code, out, err = run(*args)
    assert code == 5 and out == ABSTENTION_TEXT + "\n", (out, err)


def test_an_answer_floor_out_of_range_is_refused(offline_sample_store: Path) -> None:
    code, out, err = run("ask", QUICK_START, "--store", offline_sample_store, "--answer-floor", "99")
    assert code == 2 and "answer-floor" in err and out == ""


def test_eval_prints_what_other_answer_floors_would_decline(tmp_path: Path) -> None:
    import json

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "ferry.txt").write_text(
        "The Northbank ferry crosses the river every thirty minutes. Tickets cost two dollars.\n"
    )
    (folder / "garden.txt").write_text("The Orvale garden grows tomatoes and beans. Volunteers water it on Sundays.\n")
    rows = [
        {"id": "a", "question": "How often does the Northbank ferry cross the river?", "gold_docs": ["ferry.txt"]},
        {
            "id": "u",
            "question": "What does the Orvale garden sell?",
            "gold_docs": ["garden.txt"],
            "kind": "unanswerable",
        },
    ]
    questions = tmp_path / "q.jsonl"
    questions.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    store = tmp_path / "store.sqlite"
    assert run("build", folder, "--store", store)[0] == 0
    code, out, err = run("eval", questions, "--store", store, "--unanswerable", "--json", "--details")
    assert code == 0, err
    data = json.loads(out)
    floors = data["abstention"]["trade_off"]
    in_force = [f for f in floors if f["in_force"]]
    assert len(in_force) == 1 and in_force[0]["floor"] == round(ANSWER_SCORE_FLOOR, 4)
    # A higher floor never declines fewer; the one in force agrees with the runs.
    declined = [f["answerable_declined"] for f in floors]
    assert (
        declined == sorted(declined) and in_force[0]["answerable_declined"] == data["abstention"]["answerable_declined"]
    )
    assert in_force[0]["unanswerable_declined"] == data["abstention"]["unanswerable_declined"]
    best = [q["abstention"]["normal"].get("best_score") for q in data["questions"]]
    assert all(isinstance(b, float) for b in best), best
    # Asked again with a floor above every best score: everything declined, as the table said.
    above = max(best) + 0.01
    code, out, err = run("eval", questions, "--store", store, "--unanswerable", "--json", "--answer-floor", str(above))
    assert json.loads(out)["abstention"]["answerable_declined"] == 1.0
    code, out, err = run("eval", questions, "--store", store, "--unanswerable")
    assert code == 0 and "answer floor" in out and "(in force)" in out
