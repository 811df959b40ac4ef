"""Which quoted unit an offline answer leads with: the table row a question
asks for by name, the newest document of a series for "the latest", never a
glossary or a page of boilerplate read as one long sentence."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

from helpers import run_cli_parts as run

from docsum.models.extractive import ExtractiveLLM
from docsum.query.latest import dated_series

TABLE = """Net sales by category (in millions):
   Three Months Ended   Nine Months Ended
   July 1,   June 25,   July 1,   June 25,
   2023   2022   2023   2022
Boats   $   5,100   $   4,800   $   15,000   $   14,100
Engines   2,200   2,000   6,100   5,900
   Total net sales   $   7,300   $   6,800   $   21,100   $   20,000

   Percentage of total net sales   30%   29%   31%   28%

Weakness in foreign currencies had an unfavorable impact on the Company's total net sales during the quarter.
"""
GLOSSARY = (
    "Term Definition ABS Anti-lock braking system BOAT A vessel for travelling on water ENG Engine segment "
    "FX Foreign exchange NET Net sales, total net sales less returns and allowances OEM Original equipment "
    "manufacturer RND Research and development SALES Total net sales of the segment TOTAL Total of all segments "
    "UNIT One engine or one boat delivered to a customer in the quarter, counted once whatever its size."
)


def test_a_question_naming_a_rows_label_leads_with_that_row() -> None:
    # Before: the prose sentence and the "Percentage of total net sales" row
    # tied with the "Total net sales" row on the question's words, and a long
    # glossary that repeats them won on centrality.
    engine = ExtractiveLLM()
    context = f"[1] (source: report.txt)\n{GLOSSARY}\n\n{TABLE}"
    answer = engine.answer("How have Acme's total net sales changed over time?", context)
    # Quoted with its column group and dates, first group only.
    assert answer.startswith(
        "Total net sales: $7,300 million, three months ended July 1, 2023; $6,800 million, June 25, 2022 [1]."
    ), answer
    assert "Term Definition" not in answer


def _report(quarter: str, research: str) -> str:
    return (
        f"UNITED STATES\nFORM 10-Q\nFor the quarterly period ended {quarter}\n\nAcme Corporation\n"
        "(Exact name of registrant as specified in its charter)\n\n"
        "Acme Corporation designs engines for small boats.\n\n"
        f"Research and development expenses were {research} in the quarter, for new engines.\n"
    )


def _reports(folder: Path) -> Path:
    folder.mkdir()
    # The newest filing is the shortest and least repetitive: a retriever
    # ranks it below the others on the question's words.
    for name, quarter, amount, extra in (
        ("a.txt", "March 31, 2023", "$410 million", "Research and development matters to us. " * 5),
        ("b.txt", "September 30, 2023", "$430 million", ""),
        ("c.txt", "June 30, 2023", "$420 million", "Research and development grew. " * 5),
    ):
        (folder / name).write_text(_report(quarter, amount) + extra)
    return folder


def test_the_latest_report_is_answered_from_the_newest_of_the_series(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    assert run("build", _reports(tmp_path / "reports"), "--store", store, "-q")[0] == 0
    question = "How much did Acme spend on research and development in its latest quarterly report?"
    code, out, err = run("ask", question, "--store", store, "--json", "--top-k", "2", "--retriever", "bm25")
    assert code == 0, err
    data = json.loads(out)
    assert {c["path"] for c in data["citations"]} == {"b.txt"}, data["citations"]
    assert data["answer"].startswith("Research and development expenses were $430 million")
    # A question comparing periods keeps the older filings, the newest first.
    question = "How did Acme's research and development in the latest quarter compare to previous quarters?"
    code, out, err = run("ask", question, "--store", store, "--json", "--top-k", "2", "--retriever", "bm25")
    assert code == 0, err
    assert "b.txt" in [d["path"] for d in json.loads(out)["documents"]]
    # Comparing two figures of the latest report compares no periods: the
    # newest filing alone answers. Before: "compare" kept the older filings,
    # and their rows led the answer.
    question = "In Acme's latest quarterly report, how does research and development compare to engine sales?"
    code, out, err = run("ask", question, "--store", store, "--json", "--top-k", "2", "--retriever", "bm25")
    assert code == 0, err
    assert {c["path"] for c in json.loads(out)["citations"]} == {"b.txt"}, out


def test_a_summary_opening_gives_its_series_and_date() -> None:
    assert dated_series(
        "A quarterly report filed on SEC Form 10-Q: Intel Corporation, for the quarter ended July 1, 2023."
    ) == (
        "a quarterly report filed on sec form 10-q: intel corporation",
        datetime.date(2023, 7, 1),
    )
    assert dated_series("Meeting minutes: Larkspur Railway Trust, 2 October 2019.") is not None
    assert dated_series("Meeting minutes: Larkspur Railway Trust.") is None


def test_a_row_takes_no_contents_line_or_caption_for_its_column_headings() -> None:
    # Before: "Gross margin: 40,215 million, (In millions, except percentages);
    # 34,670 million, September 30," and, a table further down, "SIGNATURE; 61"
    # from the contents page above it. Then "Gross margin: 40,215 million,
    # 2023; 34,670 million, 2022.": the change column's "Percentage" and
    # "Change" on the period's lines hid the period.
    from docsum.tablerows import row_quote

    text = (
        "SIGNATURE   61\n\n"
        "   SUMMARY RESULTS OF OPERATIONS\n"
        "   Three Months Ended   Percentage\n"
        "(In millions, except percentages)   September 30,   Change\n\n"
        "   2023   2022\n"
        "Revenue   $   56,517   $   50,122   13%\n"
        "Gross margin   40,215   34,670   16%\n"
    )
    lines = text.split("\n")
    assert row_quote(lines, len(lines) - 2) == (
        "Gross margin: 40,215 million, three months ended September 30, 2023; 34,670 million, 2022."
    )
    assert row_quote(["SIGNATURE   61", "", "Revenue   5,000"], 2) == "Revenue: 5,000."


def test_the_figure_measure_finds_an_amount_stated_in_another_scale() -> None:
    from docsum.query.answermeasures import GradedAnswer, measure

    def graded(answer: str) -> GradedAnswer:
        return GradedAnswer("single", "What did Acme spend on research?", answer, True, "Acme spent $3.87 billion.")

    found = measure([graded("Research and development: 3,870 million, three months ended July 1, 2023.")])
    assert found.figure_first_50.hits == 1
    missed = measure([graded("Research and development: 3,120 million, three months ended July 1, 2023.")])
    assert missed.figure_first_50.hits == 0


def test_rows_take_their_period_from_each_layout_of_headings_a_filing_uses() -> None:
    from docsum.tablerows import row_quote

    def quote(text: str) -> str | None:
        lines = text.split("\n")
        return row_quote(lines, len(lines) - 1)

    # One date a group, under the groups' names, a caption in the first cell
    # and a blank line before the years.
    grouped = (
        "   Three Months Ended   Six Months Ended\n"
        "(In millions, except per share amounts) (Unaudited)   December 31,   December 31,\n\n"
        "   2022   2021   2022   2021\n"
        "   Total revenue   52,747   51,728   102,869   97,045"
    )
    assert (
        quote(grouped) == "Total revenue: 52,747 million, three months ended December 31, 2022; 51,728 million, 2021."
    )
    # The period and its years on one line, which is a heading, not a row.
    one_line = (
        "(In millions)\n\nThree Months Ended September 30,   2023   2022\nRevenue:\n   Total revenue   56,517   50,122"
    )
    assert row_quote(["Three Months Ended September 30,   2023   2022"], 0) is None
    assert (
        quote(one_line) == "Total revenue: 56,517 million, three months ended September 30, 2023; 50,122 million, 2022."
    )
    # A "% Change" column after each group of years is left out.
    changes = (
        "(In millions)\n   Three Months Ended   Percentage   Six Months Ended   Percentage\n\n"
        "   2022   2021   2022   2021\n"
        "Gross margin   35,259   34,768   1%   69,929   66,439   5%"
    )
    assert quote(changes) == "Gross margin: 35,259 million, 2022; 34,768 million, 2021."


def test_certifications_are_no_answer_and_an_abbreviation_meets_its_words() -> None:
    # Before: an officer's certification ("any change … during the most
    # recent fiscal quarter") led answers on changes over the quarters, and
    # "R&D" matched no word of "Research and development".
    engine = ExtractiveLLM()
    context = (
        "[1] (source: report.txt)\n"
        "(d) Disclosed in this report any change in the registrant's internal control over financial reporting "
        "that occurred during the registrant's most recent fiscal quarter that has materially affected it.\n\n"
        "Our spending changed little over the quarter while headcount grew in every region we serve.\n\n"
        "(In millions)\n   2023   2022\nResearch and development   4,109   4,362\n"
    )
    answer = engine.answer("How did Acme's R&D spending change in the most recent fiscal quarter?", context)
    assert answer.startswith("Research and development: 4,109 million, 2023"), answer
    assert "Disclosed in this report" not in answer


def test_of_two_sentences_on_the_question_the_one_with_the_amount_leads() -> None:
    engine = ExtractiveLLM()
    context = (
        "[1] (source: report.txt)\n"
        "The acquisition talks with the owners of Harbor Marine took most of the spring.\n\n"
        "We closed the acquisition for $3.5 billion in cash.\n"
    )
    answer = engine.answer("Did Acme report any acquisition of another business?", context)
    assert answer.startswith("We closed the acquisition for $3.5 billion"), answer


def test_a_row_under_amount_and_share_columns_is_quoted_by_period() -> None:
    # Before: "Gross margin: 4,638, Amount; 35.8%, Revenue; 5,587, Amount; …".
    from docsum.tablerows import row_quote

    text = (
        "   Three Months Ended   Six Months Ended\n"
        "   Q2 2023   Q2 2022   YTD 2023   YTD 2022\n"
        "(In Millions, Except Per Share   % of Net   % of Net   % of Net   % of Net\n"
        "Amounts)   Amount   Revenue   Amount   Revenue   Amount   Revenue   Amount   Revenue\n"
        "Gross margin   4,638   35.8 %   5,587   36.5 %   8,646   35.1 %   14,831   44.0 %"
    )
    lines = text.split("\n")
    # A period that names itself ("Q2 2023") takes no group heading
    # ("three months ended Q2 2023"), and a unit caption wrapped over two
    # lines still gives the unit.
    assert row_quote(lines, 4) == "Gross margin: 4,638 million, Q2 2023; 5,587 million, Q2 2022."


def test_no_answer_glues_half_a_sentence_or_a_tables_heading_to_the_next() -> None:
    # Before: "Share repurchase activity during the three months ended July 1,
    # During the nine months …": a node cut the first sentence, and a
    # two-cell heading line ran into the lead-in above it.
    engine = ExtractiveLLM()
    context = (
        "[1] (source: report.txt)\n"
        "Purchases of Equity Securities\n"
        "Share repurchase activity during the three months ended July 1,\n\n"
        "[2] (source: report.txt)\n"
        "During the nine months ended July 1, 2023, the Company repurchased 365 million shares for $56.1 billion.\n\n"
        "Share repurchase activity during the quarter was as follows (in millions):\n"
        "   Total Number of   Approximate Dollar\n"
        "   Shares   Value of\n"
    )
    answer = engine.answer("What share repurchase activity did Acme report?", context)
    assert answer.startswith("During the nine months ended July 1, 2023, the Company repurchased"), answer
    assert "July 1, During" not in answer and "Approximate Dollar" not in answer


def test_a_fiscal_quarter_written_out_names_the_same_period() -> None:
    # Before: "second quarter of fiscal 2024" in a question was Q2 2024, but
    # the filing's "second quarter of fiscal year 2024" was not, so the
    # question abstained over the very filing it asks about.
    from docsum.models.abstain import TextKeys, quarters_as_codes

    assert quarters_as_codes("the second quarter of fiscal 2024") == "the Q2 2024"
    assert TextKeys("Revenue for the second quarter of fiscal year 2024 was $13.51 billion.").count("q2 2024") == 1


def test_a_filing_named_for_one_quarter_is_about_the_fiscal_quarter_its_text_reports() -> None:
    from docsum.models.abstain import document_keys, missing_names

    fiscal = "Revenue for the second quarter of fiscal year 2024 was $13.51 billion. " * 6
    fiscal += "Revenue for the second quarter of fiscal year 2023 was $6.70 billion. "
    keys = document_keys("nv", "2023_Q2_NVDA.pdf", "A quarterly report: Nvidia Corporation.", "Nvidia " * 5 + fiscal)
    assert missing_names(["nvidia", "q2 2024"], keys, fiscal=True) == []
    # A period it names less often is not what it is about; nor is the
    # fiscal one for a question that does not say "fiscal" ("NVIDIA's Q2
    # 2024 10-Q" is the file named so).
    assert missing_names(["nvidia", "q4 2024"], keys, fiscal=True) == ["q4 2024"]
    assert missing_names(["nvidia", "q2 2024"], keys) == ["q2 2024"]


def test_a_row_under_years_with_change_columns_is_quoted_by_its_period() -> None:
    # Before: "Total net sales: $81,797, 2023; $82,959, 2022; (1)%, Change; …".
    from docsum.tablerows import row_quote

    text = (
        "The following table shows net sales by reportable segment (dollars in millions):\n"
        "   Three Months Ended   Nine Months Ended\n"
        "   July 1,   June 25,   July 1,   June 25,\n"
        "   2023   2022   Change   2023   2022   Change\n"
        "   Total net sales   $   81,797   $   82,959   (1)% $   293,787   $   304,182   (3)%"
    )
    assert row_quote(text.split("\n"), 4) == (
        "Total net sales: $81,797 million, three months ended July 1, 2023; $82,959 million, June 25, 2022."
    )


def test_a_labels_footnote_mark_is_no_figure_of_its_row() -> None:
    # Before: "Total net sales: (4), three months ended June 25, 2022; $82,959, June 26, 2021."
    from docsum.tablerows import row_quote

    text = (
        "(In millions)\n"
        "   Three Months Ended\n"
        "   June 25,   June 26,\n"
        "   2022   2021\n"
        "   Total net sales (4)   $   82,959   $   81,434"
    )
    assert row_quote(text.split("\n"), 4) == (
        "Total net sales: $82,959 million, three months ended June 25, 2022; $81,434 million, June 26, 2021."
    )
    # A letter marks a footnote too: "Other liabilities (b)" read "(b)" as the row's group.
    lettered = text.replace(
        "Total net sales (4)   $   82,959   $   81,434", "Other liabilities (b)   (1,973)   (1,802)"
    )
    assert row_quote(lettered.split("\n"), 4) == (
        "Other liabilities: (1,973) million, three months ended June 25, 2022; (1,802) million, June 26, 2021."
    )


CASH_FLOWS = """Cash flows (in millions):
   Three Months Ended September 30,
   2022   2021
   Free cash flow   $   2,552   $   1,900
   Net cash provided by (used in) operating activities   $   11,404   $   7,313
   Purchases of property and equipment   (8,852)   (5,413)
"""


def test_cash_flows_from_operations_meet_the_operating_activities_row() -> None:
    # Before: "operations" did not meet "operating": the answer quoted the
    # "Free cash flow" row alone, on "cash" and "flows".
    answer = ExtractiveLLM().answer(
        "What cash flows from operations did Acme disclose?", f"[1] (source: report.txt)\n{CASH_FLOWS}"
    )
    assert "Net cash provided by (used in) operating activities: $11,404 million" in answer, answer
    assert "Purchases of property" not in answer


def test_a_cover_pages_lines_are_never_quoted() -> None:
    from docsum.models.answerrank import is_quotable

    # Before: an inventory question was answered with the registrant's address.
    assert not is_quotable(
        "ONE MICROSOFT WAY, REDMOND, WASHINGTON 98052-6399 (425) 882-8080 www.microsoft.com/investor"
    )
    assert not is_quotable("FORM 10-Q For the Quarterly Period Ended June 30, 2023 INDEX")
    # An officer's certification, whole now that "U.S.C." ends no sentence.
    assert not is_quotable(
        "Pursuant to Rule 13a-14(b) and Section 1350 of Title 18 of the United States Code (18 U.S.C. § 1350), "
        "Jane Doe, the Chief Financial Officer of Acme Corporation, hereby certifies that, to the best of her "
        "knowledge: 1"
    )
    assert not is_quotable(
        "The information contained in the Periodic Report fairly presents, in all material respects, the "
        "financial condition of the Company at the end of the period covered by the Periodic Report."
    )
    # The auditor's review report and the forward-looking-statements notice:
    # before, they led answers on Microsoft's tax rate and Apple's.
    assert not is_quotable(
        'We have reviewed the accompanying condensed consolidated balance sheet of Acme Corporation (the "Company") '
        "as of September 30, 2023, and the related condensed consolidated financial statements."
    )
    assert not is_quotable(
        "This section and other parts of this Quarterly Report on Form 10-Q contain forward-looking statements, "
        "within the meaning of the Private Securities Litigation Reform Act of 1995, that involve risks."
    )
    # An exhibit index's entry; a contract's numbered clause is none.
    assert not is_quotable(
        "4.1 Officer’s Certificate of the Registrant, dated as of May 10, 2023, including forms of global notes "
        "representing the 4.421% Notes due 2026 8-K 4.1 5/10/23"
    )
    assert not is_quotable("31.1* Certification of Chief Executive Officer pursuant to Rule 13a-14(a).")
    assert is_quotable("2.1 Term. This Agreement begins on the Effective Date and runs for three years.")
    assert is_quotable("4.1 million customers joined the program during the quarter.")
    assert is_quotable("Inventories decreased to $2,500 million as we reduced orders from suppliers.")


def test_a_label_matches_by_its_head_not_by_what_follows_its_of() -> None:
    from docsum.models.answerrank import row_label_bonus

    asked = {"revenu": 1.0, "sal": 1.0, "semiconductor": 1.0}
    # "Cost of sales" is a cost: before, "sales" alone earned it the bonus.
    assert row_label_bonus("Cost of sales: 8,140 million, Q3 2023; 8,803 million, Q3 2022.", asked) == 0.0
    assert row_label_bonus("Net revenue: $14,158 million, Q3 2023; $15,338 million, Q3 2022.", asked) > 0.0


def test_a_number_in_a_label_names_no_figure_the_question_asks_for() -> None:
    from docsum.models.answerrank import row_label_bonus

    # Before: "Due after 10 years" led an answer on legal proceedings "in
    # these 10-Qs": the label's "10" met the question's.
    asked = {"legal": 1.0, "proceeding": 1.0, "contingency": 1.0, "10": 1.0, "qs": 1.0}
    assert row_label_bonus("Due after 10 years: 16,646 million.", asked) == 0.0


def test_words_that_say_when_to_look_do_not_outrank_what_is_asked() -> None:
    # Before: a write-down "reported in the most recent quarter" that
    # mentions "cost of sales" held "reported", "recent", "quarter" and
    # "sales", and led the answer above the row the question asks for.
    engine = ExtractiveLLM()
    table = (
        "   Three Months Ended\n"
        "   Sep 30,   Oct 1,\n"
        "   2023   2022\n"
        "Net revenue   $   14,158   $   15,338\n"
        "Gross margin   5,840   6,184\n"
    )
    prose = (
        "In the most recent quarter, Acme reported an inventory impairment of $559 million in cost of sales, "
        "from the wind-down of its memory business."
    )
    context = f"[1] (source: report.txt)\n{prose}\n\n{table}"
    answer = engine.answer("What revenue did Acme report from its chip sales in the most recent quarter?", context)
    # The heading keeps its month's capital: "three months ended Sep 30, 2023".
    assert answer.startswith("Net revenue: $14,158, three months ended Sep 30, 2023; $15,338, Oct 1, 2022"), answer


def test_the_parts_of_a_filing_a_question_names_say_where_to_look_not_what() -> None:
    # "… the stated tax rate in the financial statements compare with the
    # discussion on tax issues in the notes": before, a sentence about the
    # financial statements and their notes led the answer, above the rate.
    engine = ExtractiveLLM()
    context = (
        "[1] (source: report.txt)\n"
        "The decrease in our effective tax rate was primarily due to tax benefits from tax law changes.\n\n"
        "Compliance with new tax legislation may require the use of estimates in our consolidated financial "
        "statements and the notes to them, and significant judgment in accounting for its provisions.\n\n"
        "Our effective tax rate was 18% and 19% for the three months ended September 30, 2023 and 2022, "
        "respectively.\n\n"
        "Revenue increased $4.2 billion or 13% driven by growth in cloud services.\n"
    )
    question = (
        "In the most recent 10-Q, how does Acme's stated tax rate in the financial statements compare with the "
        "discussion on tax issues in the notes?"
    )
    answer = engine.answer(question, context)
    assert answer.startswith("Our effective tax rate was 18%"), answer


def test_a_pointer_to_another_part_of_the_filing_is_not_an_answer() -> None:
    from docsum.models.answerrank import is_quotable

    engine = ExtractiveLLM()
    context = (
        "[1] (source: report.txt)\n"
        "Refer to Note 10 – Debt of the Notes to Financial Statements (Part I, Item 1 of this Form 10-Q) for "
        "further discussion of our debt.\n\n"
        "In the first quarter we issued $11.0 billion of senior notes to repay debt maturing in 2024.\n"
    )
    answer = engine.answer("What did Acme disclose about its debt in the Q1 report?", context)
    assert answer.startswith("In the first quarter we issued $11.0 billion"), answer
    assert "Refer to Note" not in answer
    assert not is_quotable("This report should be read in conjunction with the financial statements in our Form 10-K.")
    # Before, these were quoted in Intel's answers on debt and currency and
    # Apple's on market risk, each above a figure.
    for pointer in (
        "Refer also to the other information set forth in this Form 10-Q, including in the MD&A.",
        "For a discussion of the Company’s exposure to market risk, refer to the Company’s market risk "
        "disclosures set forth in Part II, Item 7A of the 2022 Form 10-K.",
        'We have defined certain terms and abbreviations used throughout our Form 10-Q in "Key Terms".',
        "Information relating to quantitative and qualitative disclosures about market risk is set forth below "
        "and in Item 2 of Part I, “Management’s Discussion and Analysis”.",
        "The metrics are disclosed in the MD&A or the Notes to Financial Statements (Part I, Item 1 of this Form 10-Q).",
    ):
        assert not is_quotable(pointer), pointer
    # A cross-reference that gives an amount of its own still answers.
    assert is_quotable("See Note 5, where the $1.2 billion charge is described.")
    assert is_quotable("For a discussion of the charge, we recorded $1.2 billion in the quarter.")


def test_refine_weighs_words_over_the_whole_passage_it_reads() -> None:
    # Refine ranks the earlier answer and the new units on the question. Word
    # weights taken from that handful alone made "revenue", in every one of
    # them, weigh next to nothing, and a segment's sentence led the answer
    # instead of the company's "Net revenue" row. The passage's other rows
    # now count in the weights.
    existing = (
        "Other revenue was $1.6 billion, down $252 million, primarily driven by lower wireless product sales as a "
        "result of lower notebook volumes [1]. In the second quarter of 2022, we initiated the wind-down of our "
        "memory business, resulting in an inventory impairment of $559 million in Cost of sales on the Statements "
        "of Income in the first nine months of 2022 [2]."
    )
    context = (
        "[3] (source: report.txt)\n"
        "Revenue was $530 million, up $80 million from Q3 2022, primarily driven by higher demand for chips.\n"
        "Revenue was $311 million, up $233 million from Q3 2022 driven by higher packaging revenue and tool sales.\n\n"
        "Consolidated Condensed Results of Operations\n"
        "   Three Months Ended   Nine Months Ended\n"
        "   Q3 2023   Q3 2022   YTD 2023   YTD 2022\n"
        "Net revenue   $   14,158   $   15,338   $   38,822   $   49,012\n"
        "Gross margin   6,018   6,535   14,664   21,366\n"
        "Research and development   3,870   4,302   12,059   13,064\n"
        "Marketing, general, and administrative   1,340   1,744   4,017   5,296\n"
        "Restructuring and other charges   816   664   1,080   (460)\n"
        "Operating income (loss)   (8)   (175)   (2,492)   3,466\n"
        "Net income (loss)   310   1,019   (985)   8,678\n"
    )
    question = "What revenue did Acme report from its chip sales in the most recent quarter?"
    answer = ExtractiveLLM().refine(question, existing, context)
    assert answer.startswith("Net revenue: $14,158"), answer


def test_activities_in_a_cash_flow_label_names_only_its_section() -> None:
    from docsum.models.answerrank import answer_terms, row_label_bonus

    # "Operating activities" is what "cash flows from operations" asks for;
    # before, "activities", never in the question, halved the label's match
    # and "Free cash flow" or "Cash paid for operating leases" led instead.
    asked = {t: 1.0 for t in answer_terms("What cash flows from operations did Acme disclose?")}
    operating = row_label_bonus("Operating activities: $7,313 million, 2021; $11,404 million, 2022.", asked)
    assert operating > 0
    assert operating == row_label_bonus("Operations: $7,313 million, 2021; $11,404 million, 2022.", asked)


def test_a_question_about_one_quarter_leads_with_that_quarter_not_the_year_to_date() -> None:
    # Before: the nine months' sentence held one more word of the question
    # and led (Apple's "365 million shares … for $56.1 billion" for a
    # question about its third quarter).
    engine = ExtractiveLLM()
    prose = (
        "During the nine months ended July 1, 2023, Acme repurchased 365 million shares for $56.1 billion under its program.\n"
        "During the three months ended July 1, 2023, Acme repurchased 102 million shares for $18.0 billion.\n"
    )
    context = f"[1] (source: report.txt)\n{prose}"
    quarter = engine.answer("How many shares did Acme repurchase under its program in its Q3 2023 10-Q?", context)
    assert quarter.startswith("During the three months ended July 1, 2023"), quarter
    # Asked for the nine months, the nine months lead.
    nine = engine.answer("How many shares did Acme repurchase under its program in the nine months of 2023?", context)
    assert nine.startswith("During the nine months ended July 1, 2023"), nine


def test_a_sentence_cut_by_a_page_break_is_not_quoted_and_the_whole_one_is() -> None:
    # Before: "… shares of our common stock for [2]" led, and the near-repeat
    # rule then dropped the whole sentence about the quarter asked for.
    engine = ExtractiveLLM()
    page = (
        "Capital Return Program\n"
        "During the third quarter of fiscal year 2023, we repurchased 28 million shares of our common stock for\n"
        "\n\n   21\n\n   ACME CORPORATION AND SUBSIDIARIES\n   NOTES TO CONDENSED FINANCIAL STATEMENTS\n\n"
    )
    whole = (
        "During the third quarter of fiscal year 2024, we repurchased 8.3 million shares of our common stock "
        "for $3.72 billion.\n"
    )
    context = f"[1] (source: q3.txt)\n{page}\n\n[2] (source: q3.txt)\n{whole}"
    answer = engine.answer("How many shares of its stock did Acme repurchase in the third quarter?", context)
    assert answer.startswith("During the third quarter of fiscal year 2024, we repurchased 8.3 million"), answer
    assert "stock for [" not in answer


def test_expenses_compared_to_revenue_may_be_answered_by_the_percent_of_revenue_row() -> None:
    # Before: a row of percentages answered only a question that said
    # "share", "rate" or "%"; "compared to its revenues" is asked as a share.
    engine = ExtractiveLLM()
    table = (
        "   Three Months Ended\n"
        "   April 30,   May 1,\n"
        "   2023   2022\n"
        "   ($ in millions)\n"
        "Revenue   $   7,192   $   8,288\n"
        "Cost of revenue   2,544   2,857\n"
        "Research and development expenses   $   1,875   $   1,618\n"
        "% of net revenue   26 %   20 %\n"
        " Total operating expenses   $   2,508   $   3,563\n"
        " % of net revenue   34.9 %   42.9 %\n"
    )
    prose = "Operating expenses fell while revenue fell too, as the company cut its spending on revenue growth.\n"
    context = f"[1] (source: report.txt)\n{prose}\n{table}"
    answer = engine.answer("How did Acme's operating expenses compare to its revenues in Q1 2023?", context)
    assert "34.9%" in answer, answer
    # A question about the figure itself is answered in dollars.
    plain = engine.answer("What were Acme's total operating expenses in Q1 2023?", context)
    assert plain.startswith("Total operating expenses: $2,508 million"), plain


def test_a_row_named_by_one_passing_word_of_a_long_question_does_not_lead() -> None:
    from docsum.models.answerrank import row_label_bonus

    # Before: "Other current liabilities" earned the label bonus from the
    # last word of a question about legal contingencies, and its rows led
    # above the sentence with the accrued legal liabilities.
    asked = {
        t: 1.0
        for t in (
            *("acme", "q3", "2022", "information", "legal", "contingency"),
            *("connect", "financial", "reserv", "provision", "made", "liability"),
        )
    }
    assert row_label_bonus("Other current liabilities: $1,055 million, September 30, 2022.", asked) == 0.0
    # A label the question names whole keeps its bonus, however long the question.
    assert row_label_bonus("Total liabilities: 186,218 million, September 30, 2022.", {"total": 1.0, **asked}) > 0.0
    engine = ExtractiveLLM()
    context = (
        "[1] (source: q3.txt)\n"
        "Acme Corporation reports its third quarter below.\n\n"
        "Balance sheet (in millions):\n"
        "   Oct 29,   Jan 29,\n"
        "   2023   2023\n"
        "Shareholders' equity:\n"
        "   Common stock   $   2   $   2\n"
        "   Retained earnings   $   29,817   $   10,171\n\n"
        "During the third quarter, we repurchased 8.3 million shares of our common stock for $3.72 billion.\n\n"
        "Revenue for the third quarter was a record, driven by data center sales.\n"
    )
    answer = engine.answer(
        "Has Acme reported any significant stock repurchase activities in its Q3 10-Q, and what scale did these take?",
        context,
    )
    assert answer.startswith("During the third quarter, we repurchased 8.3 million shares"), answer


OPERATING_EXPENSES = """Acme Stores reports its first quarter below.

Operating expenses (in millions):
   Three Months Ended
   March 31,
   2022   2023
Cost of sales   $   66,499   $   67,791
Technology and content   14,842   20,450
Marketing   9,825   10,172

Technology and content costs include payroll and related expenses for employees involved in the research and development of new and existing products and services.

Cash capital expenditures were $13.7 billion in the quarter, which reflect investments in our fulfillment network.
"""


def test_a_row_the_document_defines_with_the_questions_words_answers_it() -> None:
    # Before: Amazon's filings name R&D "Technology and content" and say so
    # in one sentence; the answer to "what was Amazon's R&D expenditure" led
    # with "Cost of sales" (an "expense") and capital expenditures.
    answer = ExtractiveLLM().answer(
        "In the first quarter of 2023, what was Acme's R&D expenditure?",
        f"[1] (source: q1.txt)\n{OPERATING_EXPENSES}",
    )
    assert answer.startswith("Technology and content: 14,842 million, three months ended March 31, 2022"), answer
    # The definition is quoted beside it: it says why that row answers.
    assert "Technology and content costs include payroll" in answer.split(" [1]. ", 2)[1], answer


def test_a_definition_that_outscores_its_row_follows_it() -> None:
    # Before: asked with more of the question's words ("… R&D expenditure
    # … compare to previous quarters"), the definition outscored its row
    # and its words pushed the row's figure past the answer's first lines.
    from docsum.models.answerrank import rows_before_definitions

    row = "Technology and content (Operating expenses): 14,842 million, three months ended March 31, 2022."
    definition = "Technology and content costs include payroll for research and development."
    other = "Cash capital expenditures were $13.7 billion."
    defined = frozenset({"technology and content"})
    assert rows_before_definitions([(5, definition), (9, other), (2, row)], defined) == [
        (9, other),
        (2, row),
        (5, definition),
    ]
    # Already after its row, or without its row, or not a defined label: as chosen.
    assert rows_before_definitions([(2, row), (5, definition)], defined) == [(2, row), (5, definition)]
    assert rows_before_definitions([(5, definition), (9, other)], defined) == [(5, definition), (9, other)]
    assert rows_before_definitions([(5, definition), (2, row)], frozenset()) == [(5, definition), (2, row)]
    answer = ExtractiveLLM().answer(
        "How does Acme's R&D expenditure in the most recent quarter compare to previous quarters, "
        "and which research and development of new and existing products and services does it pay for?",
        f"[1] (source: q1.txt)\n{OPERATING_EXPENSES}",
    )
    assert answer.index("Technology and content: 14,842 million") < answer.index("content costs include"), answer


def test_a_definition_holding_one_passing_word_of_the_question_names_no_row() -> None:
    from docsum.models.answerrank import defined_labels

    units = [
        "Services (Net sales): 21,213 million, three months ended July 1, 2023.",
        "Rest of Asia Pacific (Net sales by reportable segment): 5,630 million, three months ended July 1, 2023.",
        "Rest of Asia Pacific includes Australia and those Asian countries not included in the other reportable segments.",
        "General and administrative: $1,398 million, 2022.",
        "General and administrative expenses include payroll and expenses associated with finance, legal and facilities.",
    ]

    # "segment" alone, or "legal" alone, does not make a region or G&A what is asked.
    def defined(*question: str) -> tuple[dict[str, float], frozenset[str]]:
        return defined_labels(units, list(question), dict.fromkeys(question, 1.0))

    assert defined("trend", "servic", "segment", "revenue") == ({}, frozenset())
    assert defined("legal", "contingency", "provision") == ({}, frozenset())
    # Two of the question's words, scattered through the list, are no definition either.
    assert defined("legal", "contingency", "facility") == ({}, frozenset())
    # A sentence defining no row's label defines nothing.
    assert defined_labels(units[2:3], ["asian", "countri"], {"asian": 1.0, "countri": 1.0}) == ({}, frozenset())
    # Words the question writes together, as the definition does, make one.
    assert defined("payroll", "expens", "growth") == (
        {"general": 1.0, "administrativ": 1.0},
        frozenset({"general and administrative"}),
    )


def test_a_defined_row_read_after_its_definition_joins_the_answer() -> None:
    # compact reads a filing part by part: the definition came first, and
    # the row, which holds none of the question's own words, was dropped
    # when its part was read, so the answer never gave the figure.
    table, definition = OPERATING_EXPENSES.split("\n\nTechnology and content costs")
    existing = "Technology and content costs" + definition.split("\n")[0].rstrip(".") + " [1]."
    answer = ExtractiveLLM().refine(
        "What was Acme's R&D expenditure?",
        existing,
        f"[2] (source: q1.txt)\n{table}\n",
    )
    assert (
        "Technology and content: 14,842 million, three months ended March 31, 2022; 20,450 million, 2023 [2]" in answer
    ), answer


def test_a_unit_a_page_break_cut_after_a_verb_is_no_answer() -> None:
    from docsum.models.answerrank import is_fragment, is_quotable

    # One list of the words no sentence ends on serves PDF headings
    # (docsum.layout) and answer units: "is", "were" were missing here.
    assert is_fragment("The aggregate amount of shares repurchased during the quarter was")
    assert is_fragment("Our repurchases under the program were")
    assert not is_quotable("Our repurchases under the program were")
    assert not is_fragment("Our repurchases under the program were $3.72 billion.")


def test_a_tables_lead_in_run_into_its_headings_is_no_answer() -> None:
    from docsum.models.answerrank import is_fragment

    # Before: Apple's buyback answer (PDF) quoted "Share repurchase activity
    # during the three months ended July 1, 2023 was as follows (in millions,
    # …): Periods Total Number of Shares Purchased Average Price Paid Per Share".
    assert is_fragment(
        "Share repurchase activity during the three months ended July 1, 2023 was as follows "
        "(in millions, except number of shares, which are reflected in thousands, and per share amounts): "
        "Periods Total Number of Shares Purchased Average Price Paid Per Share"
    )
    # A sentence naming a list or a name after its colon is whole.
    assert not is_fragment("The Company has three segments: Americas, Europe and Asia.")
    assert not is_fragment("The journal is published by: The Society For The Exploration Of Psychotherapy.")


def test_a_footnotes_mark_opens_no_answer_sentence() -> None:
    from docsum.layout import answer_units

    # Before: Apple's buyback answer (PDF) opened "(1) On April 28, 2022, the Board of Directors …".
    passage = "Total   102,673   $   94,569\n\n(1) On April 28, 2022, the Board of Directors authorized the purchase of an additional $90 billion of the Company's common stock."
    assert "On April 28, 2022, the Board of Directors authorized the purchase" in answer_units(passage)[-1]
    assert not answer_units(passage)[-1].startswith("(1)")


def test_a_passage_is_judged_by_the_words_its_answer_is_ranked_by() -> None:
    # Before: the coverage floor read bare terms, so "expense" missed
    # "expenses": NVIDIA's stock-based compensation row covered 2 of this
    # question's 14 words, its passage was declined, and compact, which
    # reads a filing part by part, never read it again.
    question = (
        "In Acme's Q2 2023 10-Q, how does the discussion on employee compensation in the human resources "
        "section relate to the reported financial expenses?"
    )
    context = (
        "[1] (source: q2.pdf)\nCONDENSED CONSOLIDATED STATEMENTS OF CASH FLOWS\n(In millions)\nSix Months Ended\n"
        "July 30, July 31,\n2023 2022\nCash flows from operating activities:\n"
        "Stock-based compensation expense 1,576 1,226\nDepreciation and amortization 749 712\n"
    )
    answer = ExtractiveLLM().answer(question, context)
    assert answer.startswith(
        "Stock-based compensation expense (Cash flows from operating activities): 1,576 million"
    ), answer


def test_a_cash_flow_sections_changes_are_not_the_change_a_question_asks_about() -> None:
    from docsum.models.answerrank import row_label_bonus

    # Before: "How did Microsoft Cloud revenue change …?" was answered with
    # "Unearned revenue (Changes in operating assets and liabilities)", and
    # accounting-policy questions with "Accounts payable (Changes in …)".
    # The section's "Changes" counts for nothing: the row weighs as it would
    # under any other heading.
    asked = {"cloud": 1.0, "revenu": 1.0, "chang": 1.0}
    row = "Unearned revenue (Changes in operating assets and liabilities): (5,186) million, 2022."
    same_row = "Unearned revenue (Current liabilities): 13,227 million, 2022."
    assert 0.0 < row_label_bonus(row, asked) == row_label_bonus(same_row, asked)


def test_a_question_on_a_rate_is_answered_by_that_rate_in_percent() -> None:
    # Before: the sentence explaining the change, with its $3.3 billion, led
    # the answer above the rate itself; another rate's percentage must not.
    engine = ExtractiveLLM()
    context = (
        "[1] (source: report.txt)\n"
        "The increase in our effective tax rate for the six months ended December 31, 2022 compared to the prior "
        "year was primarily due to a $3.3 billion net income tax benefit in the first quarter of fiscal year 2022 "
        "related to the transfer of intangible properties.\n\n"
        "There were $6.8 billion of borrowings outstanding under the Commercial Paper Programs as of December 31, "
        "2022, which had a weighted-average effective interest rate, including issuance costs, of 4.5%.\n\n"
        "Our effective tax rate was 19% and 17% for the three months ended December 31, 2022 and 2021, "
        "respectively.\n"
    )
    question = (
        "What effective tax rate has Acme reported in these quarters and how does it differ from period to period?"
    )
    answer = engine.answer(question, context)
    assert answer.startswith("Our effective tax rate was 19% and 17%"), answer
    assert answer.index("$3.3 billion") > answer.index("19%")


def test_a_question_on_a_level_is_answered_by_a_balance_not_a_flow() -> None:
    # Before: the cash flow statement's change in inventories led an answer
    # on "inventory levels", above the balance sheet's inventories.
    engine = ExtractiveLLM()
    flows = (
        "   Six Months Ended\n"
        "   April 1,   March 26,\n"
        "   2023   2022\n"
        "Changes in operating assets and liabilities:\n"
        "Inventories   (2,548)   1,065\n"
        "Vendor non-trade receivables   (1,200)   900\n"
    )
    balances = (
        "   April 1,   September 24,\n"
        "   2023   2022\n"
        "Current assets:\n"
        "Inventories   7,482   4,946\n"
        "Vendor non-trade receivables   17,963   32,748\n"
    )
    context = f"[1] (source: report.txt)\n{flows}\n\n[2] (source: report.txt)\n{balances}"
    # "changed" compares the balances; it is no word of "Changes in operating
    # assets": before, the flow row led the second wording.
    for question in (
        "What were Acme’s inventory levels in these quarters?",
        "How have Acme’s inventory levels changed across these quarters?",
    ):
        answer = engine.answer(question, context)
        assert answer.startswith("Inventories (Current assets): 7,482"), answer


def test_a_question_on_an_amount_at_a_date_is_answered_by_a_balance() -> None:
    # Before: "How much cash did Amazon have at the end of Q2 2023?" was
    # answered by the quarter's financing and operating cash flows, above
    # the balance sheet's cash and cash equivalents.
    engine = ExtractiveLLM()
    flows = (
        "   Three Months Ended\n"
        "   June 30,\n"
        "   2022   2023\n"
        "Cash provided by (used in):\n"
        "Operating activities   $   8,965   $   16,476\n"
        "Financing activities   4,626   (6,539)\n"
    )
    balances = (
        "   December 31, 2022   June 30, 2023\n"
        "Current assets:\n"
        "Cash and cash equivalents   $   53,888   $   49,529\n"
        "Accounts receivable   42,360   39,230\n"
    )
    context = f"[1] (source: report.txt)\n{flows}\n\n[2] (source: report.txt)\n{balances}"
    for question in (
        "How much cash did Acme have at the end of Q2 2023?",
        "How much cash did Acme have as of June 30, 2023?",
    ):
        answer = engine.answer(question, context)
        assert answer.startswith("Cash and cash equivalents (Current assets): $53,888, December 31, 2022"), answer


def test_a_buyback_is_answered_by_what_filings_call_a_repurchase() -> None:
    # Before: "How many shares did Apple buy back …?" met no word of the
    # repurchase sentence, and share-based compensation led the answer.
    engine = ExtractiveLLM()
    context = (
        "[1] (source: report.txt)\nShare-based compensation expense was $2.7 billion for the three months "
        "ended April 1, 2023, as more shares vested in the quarter.\n\n"
        "[2] (source: report.txt)\nDuring the three months ended April 1, 2023, the Company repurchased "
        "142 million shares of its common stock for $19.1 billion.\n"
    )
    for question in (
        "How many shares did Acme buy back in the quarter ended April 1, 2023?",
        "What were Acme's share buybacks in the quarter ended April 1, 2023?",
    ):
        answer = engine.answer(question, context)
        assert answer.startswith("During the three months ended April 1, 2023, the Company repurchased"), answer


def test_a_charts_figures_run_together_are_never_quoted() -> None:
    from docsum.models.answerrank import is_quotable

    # Before: two answers on Intel's R&D quoted a chart's text whole.
    assert not is_quotable(
        "Research and Development $B Marketing, General, and Administrative $B (Percentages in chart indicate "
        "operating expenses as a percentage of total revenue) $4.4 $4.1 23.8% 35.1% Q1 2022 Q1 2023 $1.8 $1.3"
    )
    # A sentence lists amounts with words between them.
    assert is_quotable(
        "An assumed 5%, 10%, and 20% adverse change would result in declines of $740 million, $1.5 billion, "
        "and $3.0 billion."
    )
    assert is_quotable("The Games were held there four times (1932, 1960, 1980, 2002).")


def test_a_row_the_question_names_is_answered_however_long_the_question() -> None:
    # Before: the row covered one of the question's ten words, below the
    # coverage floor, so a passage holding only the balance sheet was
    # declined; whether the row reached the answer hung on whether another
    # passage had answered first (NVIDIA's 4,319 never did).
    balance_sheet = (
        "CONDENSED CONSOLIDATED BALANCE SHEETS\n   (In millions)\n   July 30,   January 29,\n   2023   2023\n"
        "Current assets:\n   Cash and cash equivalents   $   5,783   $   3,389\n   Inventories   4,319   5,159\n"
    )
    question = (
        "How have Acme's inventory levels changed during these quarters, "
        "and what might this indicate regarding their supply chain management?"
    )
    answer = ExtractiveLLM().answer(question, f"[1] (source: report.txt)\n{balance_sheet}")
    assert answer == "Inventories (Current assets): 4,319 million, July 30, 2023; 5,159 million, January 29, 2023 [1]."
