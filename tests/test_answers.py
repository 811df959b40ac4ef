"""Offline answers a person can read: the fact first and short, table rows
quoted with their headings, no page furniture, never the wrong company's
filing, and the measures `docsum eval --answers` reports about them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import built_store
from helpers import run_cli_parts as run

from docsum.layout import answer_units
from docsum.lexical import sentences
from docsum.query.answermeasures import GradedAnswer, Share, figures, measure, wrong_entity
from docsum.tablerows import row_quote

# A statement laid out as PDF text gives it: one row a line, single spaces,
# the column groups and years on lines of their own above.
PDF_TABLE = """INCOME STATEMENTS
(In millions, except per share amounts) (Unaudited)
Three Months Ended
March 31,
Nine Months Ended
March 31,
2024 2023 2024 2023
Revenue $ 9,120 $ 8,455 $ 27,010 $ 25,300
Research and development 1,204 1,087 3,512 3,190
Diluted $ 1.25 $ 1.10 $ 3.70 $ 3.30
"""
# The same kind of table as text extraction lays it out: cells apart by runs of spaces.
TEXT_TABLE = """Provision for Taxes
(In Millions)   Q2 2024   Q2 2023   YTD 2024   YTD 2023
Income before taxes   $   1,500   $   1,200   $   2,900   $   2,400
Effective tax rate   14.2 %   16.0 %   (1.5)%   15.1 %
"""


def test_a_pdf_row_is_quoted_with_its_label_first_column_group_and_unit() -> None:
    lines = PDF_TABLE.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("Research"))
    assert row_quote(lines, at) == (
        "Research and development: 1,204 million, three months ended March 31, 2024; 1,087 million, 2023."
    )
    # A per-share amount is no million.
    diluted = next(i for i, line in enumerate(lines) if line.startswith("Diluted"))
    assert row_quote(lines, diluted) == "Diluted: $1.25, three months ended March 31, 2024; $1.10, 2023."


def test_a_text_row_pairs_each_cell_with_its_column_heading() -> None:
    lines = TEXT_TABLE.split("\n")
    # Only the quarter's group is quoted, as for every table: the year to date doubled the length.
    assert row_quote(lines, 3) == "Effective tax rate: 14.2%, Q2 2024; 16.0%, Q2 2023."
    assert row_quote(lines, 2) == "Income before taxes: $1,500 million, Q2 2024; $1,200 million, Q2 2023."


def test_prose_is_never_glued_to_a_table_and_page_furniture_is_no_unit() -> None:
    page = (
        "UNITED STATES\nSECURITIES AND EXCHANGE COMMISSION\nWashington, D.C. 20549\nFORM 10-Q\n(Mark One)\n"
        "☒ QUARTERLY REPORT PURSUANT TO SECTION 13 OR 15(d)\n"
        "Item 1A. Risk Factors 50\nItem 2. Unregistered Sales of Equity Securities 65\n\n"
        "Legal Proceedings\nThe company is party to a claim over a patent on its\nbattery design, filed in March.\n"
        + PDF_TABLE
        + "Revenue grew because more\nboats were sold.\n   MD&A   37\n"
    )
    units = answer_units(page)
    assert "The company is party to a claim over a patent on its battery design, filed in March." in units
    assert "Revenue grew because more boats were sold." in units
    for unit in units:
        assert "Mark One" not in unit and "20549" not in unit and "Risk Factors 50" not in unit
        assert unit not in ("Legal Proceedings", "MD&A 37")
        assert "Three Months Ended" not in unit  # a heading line is no sentence
    # no unit spans the table and the prose around it
    assert not any("Revenue $" in u or ("claim" in u and "million" in u) for u in units)


def test_a_run_in_heading_of_a_pdf_page_is_not_glued_into_the_sentence_below() -> None:
    # pypdf's text of two filings' pages: the headings have lines of their own
    # but no blank line, and the second follows a sentence left without its
    # full stop.
    page = (
        "Current year gross margin was negatively impacted by the charge, which resulted in\n"
        "decreases of $152 million and $0.12, respectively.\n"
        "Six Months Ended December 31, 2022 Compared with Six Months Ended December 31, 2021\n"
        "Research and development expenses increased $2.1 billion or 19% driven by investments in cloud.\n"
        "From October 30, 2023 through November 17, 2023, we repurchased 0.8 million shares pursuant to a Rule 10b5-1 plan\n"
        "Restricted Stock Unit Share Withholding\n"
        "We also withhold common stock shares to cover tax obligations upon vesting.\n"
        "Note 11 - Derivative Financial Instruments\n"
        "We also withhold common stock shares to cover tax withholding obligations.\n"
        "Future payments are as follows (in millions):\n"
        "2026 6,554\n"
        "2027 348\n"
        "Total   $   14,726\n"
        "Contingencies\n"
        "The Company is subject to various legal proceedings.\n"
        "Revenue increased 6% driven by growth in the\n"
        "Intelligent Cloud Segment\n"
        "And Gaming.\n"
    )
    units = answer_units(page)
    assert "Research and development expenses increased $2.1 billion or 19% driven by investments in cloud." in units
    assert "We also withhold common stock shares to cover tax withholding obligations." in units
    assert not any("Withholding We" in u or "2021 Research" in u or "Instruments We" in u for u in units)
    assert "The Company is subject to various legal proceedings." in units  # not "Contingencies The Company …"
    assert not any("2026 6,554" in u for u in units)  # a row of figures alone is glued to no sentence
    # A title-cased line that a sentence runs into is still that sentence's.
    assert "Revenue increased 6% driven by growth in the Intelligent Cloud Segment And Gaming." in units


def test_an_initialism_ends_an_answer_sentence_only_before_a_sentence_opener() -> None:
    # Before: "… the Internal Revenue Service and U.S [1]." was quoted, cut
    # at "U.S." ahead of "Treasury".
    text = (
        "The decrease was due to guidance issued by the IRS and U.S. Treasury in the quarter. "
        "Most of our sales are in the U.S. The rest are in Europe.\n"
    )
    assert answer_units(text) == [
        "The decrease was due to guidance issued by the IRS and U.S. Treasury in the quarter.",
        "Most of our sales are in the U.S.",
        "The rest are in Europe.",
    ]


def test_a_list_item_is_a_unit_of_its_own_in_a_text_file_and_a_pdf() -> None:
    # Before: a filing's text sets its bullets off by spaces, as it does a
    # table's cells ("•   Microsoft Cloud revenue increased 24% …"), and
    # every such item was dropped as a line of column headings; its PDF's
    # "• " items were glued to the lead-in above them.
    text_file = (
        "Highlights from the first quarter compared with the prior year included:\n"
        "   •   Cloud revenue increased 24% to $25.7 billion.\n"
        "   •   Consumer subscribers increased to\n"
        "   61.3 million.\n"
    )
    pdf = text_file.replace("   •   ", "• ").replace("   61.3", "61.3")
    for page in (text_file, pdf):
        assert answer_units(page) == [
            "Highlights from the first quarter compared with the prior year included:",
            "Cloud revenue increased 24% to $25.7 billion.",
            "Consumer subscribers increased to 61.3 million.",
        ], page
    # Markdown's items too; a minus before a figure is no list marker.
    assert answer_units("Sales grew:\n- Europe rose 5%.\n- Asia fell 2%.\n") == [
        "Sales grew:",
        "Europe rose 5%.",
        "Asia fell 2%.",
    ]


def test_a_heading_under_a_heading_is_glued_to_no_sentence() -> None:
    # Before: Intel's "Note 7 : Investments" / "Short-term Investments" was
    # quoted as "Short-term Investments Short-term investments include …".
    page = (
        "\nNote 7 : Investments\nShort-term Investments\n"
        "Short-term investments include marketable debt investments in corporate debt.\n"
    )
    assert answer_units(page) == ["Short-term investments include marketable debt investments in corporate debt."]


def _filing(company: str, quarter: str, research: str, other: str = "") -> str:
    return (
        f"UNITED STATES\nFORM 10-Q\nFor the quarterly period ended {quarter}\n\n{company}\n"
        "(Exact name of registrant as specified in its charter)\n\n"
        f"{company} designs engines for small boats. {other}\n\n"
        f"Research and development expenses were {research}, driven by research and development of new\n"
        "engines. Research and development headcount grew. We invest in research and development.\n"
    )


@pytest.fixture
def filings(tmp_path: Path) -> Path:
    folder = tmp_path / "filings"
    folder.mkdir()
    # Three of one company's filings that talk about research at length, one
    # of another's that the question is about.
    for name, quarter, amount in (
        ("2023_Q1_ACME.txt", "March 31, 2023", "$410 million"),
        ("2023_Q2_ACME.txt", "June 30, 2023", "$420 million"),
        ("2023_Q3_ACME.txt", "September 30, 2023", "$430 million"),
    ):
        (folder / name).write_text(_filing("Acme Corporation", quarter, amount, "Research and development " * 6))
    # Zenith's is long (a retriever scoring by length ranks it below Acme's)
    # and names Zenith on its cover and in its summary only.
    padding = "The fleet sails from the northern harbour in spring and returns in autumn. " * 400
    (folder / "2023_Q1_ZEN.txt").write_text(_filing("Zenith Inc.", "March 31, 2023", "$77 million", padding))
    return folder


def test_a_question_on_one_company_is_not_answered_from_anothers_filings(filings: Path, tmp_path: Path) -> None:
    # Before: the chosen Acme filings named nothing of the question and were
    # kept as "another hop", ahead of Zenith's: an answer about Acme, exit 0.
    store = tmp_path / "s.sqlite"
    assert run("build", filings, "--store", store, "-q")[0] == 0
    question = "How much did Zenith invest in research and development in the first quarter of 2023?"
    code, out, err = run("ask", question, "--store", store, "--top-k", "2", "--retriever", "bm25", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert {c["path"] for c in data["citations"]} == {"2023_Q1_ZEN.txt"}
    assert "$77 million" in data["answer"]
    # ... and a company no filing is about is not answered at all.
    code, out, err = run("ask", "How much did Globex spend on research and development?", "--store", store)
    assert code == 5 and "million" not in out, (out, err)


def test_summaries_name_the_company_and_the_quarter(filings: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    assert run("build", filings, "--store", store, "-q")[0] == 0
    code, out, _ = run("summaries", "--store", store)
    assert code == 0
    firsts = [line.split("  ", 2)[-1] for line in out.strip().splitlines()]
    assert len(set(firsts)) == 4
    assert any("Zenith Inc., for the quarter ended March 31, 2023." in f for f in firsts)
    assert all(".." not in f for f in firsts)


def test_offline_answers_are_short_by_default_and_longer_when_asked(tmp_path: Path) -> None:
    docs = Path(__file__).resolve().parents[1] / "sample_data" / "docs"
    store = tmp_path / "s.sqlite"
    assert run("build", docs, "--store", store, "-q")[0] == 0
    question = "What happened during the storm?"
    code, out, err = run("ask", question, "--store", store, "--json")
    assert code == 0, err
    short = json.loads(out)["answer"]
    code, out, err = run("ask", question, "--store", store, "--json", "--answer-sentences", "8")
    longer = json.loads(out)["answer"]
    assert len(sentences(short)) <= 3 < len(sentences(longer))


def test_figures_leave_out_years_and_keep_amounts() -> None:
    assert figures("$7,709 million in 2022, up 12.50% from 6,306; Q3") == {"7709", "12.5", "6306"}


def test_a_dates_day_or_a_forms_number_is_no_figure_found() -> None:
    # A reference answer "for the quarter ended October 29, 2023" and an
    # answer "As of October 29, 2023, there have been no material changes"
    # share a day, not a fact: counted, 11 of 64 SEC hits were such days.
    assert figures("As of October 29, 2023 and Apr 1, 2023 (29 October), in our Form 10-Q: 31 stores") == {"31"}
    day_only = GradedAnswer(
        "single",
        "What was Zenith's tax rate in its latest 10-Q?",
        "As of October 29, 2023, there were no material changes [1].",
        True,
        "For the quarter ended October 29, 2023, the rate was 12.2%, per the 10-Q.",
    )
    assert measure([day_only]).figure_first_50 == Share(0, 1)


def test_a_lists_item_numbers_a_page_or_a_names_number_is_no_figure() -> None:
    # A reference answer listing risk factors ("11. Investment and
    # transaction risk", "… on page 41", "COVID-19") asked the answer for
    # "11", "41" and "19", facts no answer states; a figure in an item stays one.
    listed = (
        "The risks:\n11. Investment and transaction risk.\n  12) Impacts of COVID-19.\nSee page 41 and pages 12-14."
    )
    assert figures(listed) == set()
    assert figures("1. Revenue rose 12% to $3,870 million.") == {"12", "3870"}


def test_measures_count_the_fact_first_and_the_wrong_entity() -> None:
    right = GradedAnswer(
        "single",
        "How much did Zenith spend on research?",
        "Research and development: $77 million [1].",
        True,
        "Zenith spent $77 million.",
        cited_paths=("2023_Q1_ZEN.txt",),
        cited_names=("2023_Q1_ZEN.txt\nA quarterly report: Zenith Inc.",),
        gold_paths=("2023_Q1_ZEN.pdf",),
    )
    wrong = GradedAnswer(
        "single",
        "How much did Zenith spend on research?",
        "Research and development: $410 million [1].",
        True,
        "Zenith spent $77 million.",
        cited_paths=("2023_Q1_ACME.txt",),
        cited_names=("2023_Q1_ACME.txt\nA quarterly report: Acme Corporation",),
        gold_paths=("2023_Q1_ZEN.txt",),
    )
    assert wrong_entity(right) is False and wrong_entity(wrong) is True
    m = measure([right, wrong])
    assert (m.figure_first_50.hits, m.figure_first_50.n) == (1, 2)
    assert (m.wrong_entity.hits, m.wrong_entity.n) == (1, 2)
    assert m.words_median == 5.0


def test_eval_answers_reports_the_measures(tmp_path: Path) -> None:
    docs = Path(__file__).resolve().parents[1] / "sample_data" / "docs"
    store = tmp_path / "s.sqlite"
    assert run("build", docs, "--store", store, "-q")[0] == 0
    questions = tmp_path / "q.jsonl"
    rows = [
        {
            "question": "How much did Brindle & Daughter pay for the oven?",
            "answer": "$1,850",
            "gold_docs": ["railway_trust_minutes_2019-10.txt"],
        },
        {"question": "When did the library reopen?", "answer": "3 June 2023", "gold_docs": ["x.pdf"], "kind": "multi"},
    ]
    questions.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    code, out, err = run("eval", questions, "--store", store, "--answers", "--json")
    assert code == 0, err
    measures = json.loads(out)["answers"]["measures"]
    assert measures["figure_in_first_50_words"] == {"hits": 1, "n": 1, "rate": 1.0}
    assert measures["short_gold_in_first_50_words"]["n"] == 2
    assert set(measures["by_kind"]) == {"single", "multi"}
    code, out, err = run("eval", questions, "--store", store, "--answers")
    assert code == 0 and "answers as read" in out


def test_a_second_hop_must_continue_from_the_first(tmp_path: Path) -> None:
    # Before: a chosen document naming nothing of the question was kept as
    # "the other hop" and its fact quoted (Djibouti's first president for a
    # question on a journal's publisher).
    store = built_store(
        tmp_path,
        {
            "journal.txt": "The Journal of Quiet Studies is a journal published by the Society of Listeners. "
            "It appears four times a year.\n",
            "listeners.txt": "The Society of Listeners was founded in 1901. "
            "Its first president was Agatha Marsh, who served until 1910.\n",
            "island.txt": "Portavo gained its independence in 1977 and Ruben Kell became the first president of Portavo. "
            "The first president of the island served until 1991, and the association of farmers elected him twice.\n",
        },
    )
    question = "Who was the first president of the association which published the Journal of Quiet Studies?"
    code, out, err = run("ask", question, "--store", store, "--json")
    assert code in (0, 5), err
    data = json.loads(out)
    assert "Ruben Kell" not in data["answer"]
    assert "island.txt" not in {c["path"] for c in data["citations"]}


def test_a_compound_broken_at_its_hyphen_is_quoted_whole() -> None:
    # Before: "… reflecting the write- off of the prepayment …" and "our 2021 Form 10- K".
    units = answer_units(
        "We recorded an acquisition termination cost of $1.35 billion reflecting the write-\n"
        "off of the prepayment provided at signing. The Risk Factors in our 2021 Form 10-\n"
        "K remain current in all material respects. We hedge term debt–\nrelated foreign currency transactions."
    )
    assert units == [
        "We recorded an acquisition termination cost of $1.35 billion reflecting the write-off of the prepayment "
        "provided at signing.",
        "The Risk Factors in our 2021 Form 10-K remain current in all material respects.",
        "We hedge term debt–related foreign currency transactions.",
    ]
