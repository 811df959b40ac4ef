"""Each of the answer scorer's features (docsum.models.unitscore.FEATURES)
on its own: what it measures, read off `unit_features` for units that
differ in that one respect. The weights are fitted (bench/fit_scorer.py);
what each feature says about a unit is fixed here."""

from __future__ import annotations

import math

from docsum.models.unitscore import FEATURES, unit_features

FILLER = [
    "The harbour authority publishes a report every spring.",
    "Visitors reach the island by ferry from the mainland.",
]


def features(question: str, units: list[str]) -> list[dict[str, float]]:
    found = unit_features(question, [*units, *FILLER])[: len(units)]
    assert all(f is not None for f in found), found
    return [f for f in found if f is not None]


def feature(name: str, question: str, units: list[str]) -> list[float]:
    """One feature's value for each of `units`."""
    return [f[name] for f in features(question, units)]


def test_every_feature_is_computed_for_every_quotable_unit() -> None:
    (found,) = features("Who built the lighthouse?", ["Mara Quinn built the lighthouse in 1871."])
    assert set(found) == set(FEATURES)


def test_a_heading_or_half_a_sentence_gets_no_features() -> None:
    units = ["ANNUAL REPORT OF THE HARBOUR", "the lighthouse was built by the harbour authority and"]
    assert unit_features("Who built the lighthouse?", units) == [None, None]


def test_lexical_rises_with_the_question_terms_a_unit_holds() -> None:
    none, some, all_ = feature(
        "lexical",
        "Who painted the lighthouse keeper's cottage?",
        [
            "Ferries leave the pier twice a day in summer.",
            "The keeper lived beside the lighthouse for forty years.",
            "Mara Quinn painted the lighthouse keeper's cottage blue.",
        ],
    )
    assert none == 0.0 < some < all_ <= 1.0


def test_coverage_is_the_share_of_the_questions_weight_a_unit_holds() -> None:
    question = "When did the lighthouse open?"
    none, half, whole = feature(
        "coverage",
        question,
        [
            "Ferries leave the pier twice a day in summer.",
            "The lighthouse stands on the northern cliff.",
            "The lighthouse was opened to visitors in 1871.",
        ],
    )
    assert none == 0.0 < half < whole
    assert math.isclose(whole, 1.0)


def test_a_questions_names_weigh_less_in_coverage_than_its_other_words() -> None:
    # "Westmark" says which document; "ferry" says which sentence.
    name_only, word_only = feature(
        "coverage",
        "How often does the Westmark ferry sail?",
        ["Westmark has a population of about four thousand.", "The ferry is painted green and white."],
    )
    assert name_only < word_only


def test_centrality_is_higher_for_a_unit_like_the_rest_of_the_context() -> None:
    central, outlier = feature(
        "centrality",
        "What does the report say?",
        [
            "The harbour authority report covers the ferry and the island.",
            "Quantum chromodynamics describes gluons binding quarks.",
        ],
    )
    assert central > outlier


def test_proximity_is_higher_when_the_question_terms_sit_together() -> None:
    question = "Which keeper repaired the lamp?"
    together, apart = feature(
        "proximity",
        question,
        [
            "The keeper repaired the lamp after the storm of that winter.",
            "The keeper, who had come from the mainland with his family and two dogs after many long years "
            "at sea aboard a fishing boat, later repaired the lamp.",
        ],
    )
    assert together > apart


def test_answer_type_marks_a_unit_holding_the_kind_of_fact_asked_for() -> None:
    dated, undated = feature(
        "answer_type",
        "When did the lighthouse open?",
        ["The lighthouse opened in March 1871.", "The lighthouse opened after a long campaign."],
    )
    assert dated == 1.0 and undated == 0.0
    # The question's own names are no answer to "who".
    named, person = feature(
        "answer_type",
        "Who directed Glass Harbor?",
        ["Glass Harbor was directed in a small studio.", "Mara Quinn directed the film in a small studio."],
    )
    assert named == 0.0 and person == 1.0


def test_figure_marks_a_unit_with_a_figure_when_the_question_asks_for_one() -> None:
    question = "How many keepers served at the lighthouse?"
    with_figure, without = feature(
        "figure",
        question,
        ["Twelve keepers, 3 of them women, served at the lighthouse.", "Keepers served at the lighthouse."],
    )
    assert with_figure == 1.0 and without == 0.0
    (asks_none,) = features("Which keeper served at the lighthouse?", ["3 keepers served at the lighthouse."])
    assert asks_none["figure"] == 0.0


def test_amount_marks_money_in_a_unit_when_the_question_asks_for_no_figure() -> None:
    (money,) = features("What did the lighthouse repairs cost the town?", ["The lighthouse repairs cost $2 million."])
    assert money["amount"] == 0.0  # "cost" asks for a figure: `figure` and `answer_type` count it
    plain, sum_ = feature(
        "amount",
        "What was reported about the lighthouse repairs?",
        ["The lighthouse repairs were reported late.", "The lighthouse repairs were reported at $2 million."],
    )
    assert plain == 0.0 and sum_ == 1.0


def test_row_label_marks_a_table_row_whose_label_the_question_names() -> None:
    row, sentence = feature(
        "row_label",
        "What was Acme's net revenue in the quarter?",
        [
            "Net revenue: $14,158 million, three months ended September 30, 2023; $15,338 million, 2022",
            "Acme's revenue grew in the quarter on demand for chips.",
        ],
    )
    assert row > 0.0 and sentence == 0.0


def test_period_lowers_a_unit_that_gives_only_a_longer_period_than_the_quarter_asked() -> None:
    quarter, longer = feature(
        "period",
        "What was Acme's net revenue in the third quarter?",
        [
            "Net revenue: $14,158 million, three months ended September 30, 2023",
            "Net revenue: $38,822 million, nine months ended September 30, 2023",
        ],
    )
    assert quarter == 0.0 > longer


def test_length_lowers_only_a_unit_too_long_to_read_as_an_answer() -> None:
    short = "The lighthouse opened in 1871."
    long = "The lighthouse opened in 1871 " + "and the keepers kept the lamp lit through every storm " * 8 + "."
    a, b = feature("length", "When did the lighthouse open?", [short, long])
    assert a == 0.0 > b


def test_fragment_marks_a_unit_of_fewer_than_three_terms() -> None:
    few, many = feature(
        "fragment", "What is the lighthouse?", ["The lighthouse, the lighthouse.", "The lighthouse guards the harbour."]
    )
    assert few == 1.0 and many == 0.0


def test_position_falls_from_the_first_unit_of_the_context_to_the_last() -> None:
    found = features(
        "When did the lighthouse open?",
        ["The lighthouse opened in 1871.", "The lighthouse opened to visitors in 1900.", "It opened again in 1950."],
    )
    positions = [f["position"] for f in found]
    assert positions[0] == 1.0 and positions == sorted(positions, reverse=True) and positions[1] > positions[2]
