"""Table rows quoted with headings read from the document, or with fewer of
them when they cannot be read reliably (docsum.tablerows). Each case is a
layout from the SEC 10-Q filings that was quoted wrongly before."""

from __future__ import annotations

from docsum.tablecells import is_row, parse_row
from docsum.tablerows import row_quote


def quote(text: str) -> str | None:
    lines = text.split("\n")
    return row_quote(lines, len(lines) - 1)


def test_a_dollar_dash_cell_keeps_each_figure_under_its_column() -> None:
    # Before: "Total liabilities: $2,237, Recognized; $2,237, Offset …": the
    # "$ —" cell was dropped and every figure after it moved one column left.
    row = parse_row("Total liabilities   $   2,237   $   —   $   2,237")
    assert row is not None and row.values == ("$2,237", "—", "$2,237")
    # Whether a line is a row is decided as before (summaries read it so).
    assert not is_row("Cash   $ —   $ —")
    text = "(In millions)   Gross   Offset   Net\nTotal liabilities   $   2,237   $   —   $   2,237"
    assert quote(text) == "Total liabilities: $2,237 million, Gross; —, Offset; $2,237 million, Net."


def test_a_line_of_figures_is_no_column_heading() -> None:
    # Before: "Accounts payable: (485) million, (1,072); 1,095 million, —".
    text = (
        "(In Millions; Unaudited)   Oct 1, 2022   Sep 25, 2021\n"
        "   (Gains) losses on divestitures   (1,072)   —\n"
        "   Accounts payable   (485)   1,095"
    )
    assert quote(text) == "Accounts payable: (485) million, Oct 1, 2022; 1,095 million, Sep 25, 2021."


def test_a_sentence_above_the_period_headings_is_none_of_them() -> None:
    # Before: "Free cash flow: $2,552 million, twelve months ended September 30,
    # 2021 and 2022 (in millions):, 2021".
    text = (
        "is a reconciliation of free cash flow for the trailing\n"
        "twelve months ended September 30, 2021 and 2022 (in millions):\n"
        "Twelve Months Ended\nSeptember 30,\n2021   2022\n"
        "Free cash flow   $ 2,552   $ (19,686)"
    )
    assert (
        quote(text)
        == "Free cash flow: $2,552 million, twelve months ended September 30, 2021; $(19,686) million, 2022."
    )


def test_period_groups_side_by_side_head_their_own_years() -> None:
    # Before: "114 million, three months ended September 30, nine months ended September 30, 2021; …".
    text = (
        "   Three Months Ended September 30,   Nine Months Ended September 30,\n"
        "   2021   2022   2021   2022\n"
        "   Interest on lease liabilities   114   85   365   280"
    )
    assert quote(text) == "Interest on lease liabilities: 114, three months ended September 30, 2021; 85, 2022."


def test_headings_written_over_several_lines_are_joined_column_by_column() -> None:
    # Before: "Cash: $10,942 million; $10,720 million; $10,720 million" (no headings).
    text = (
        "December 31, 2021   September 30, 2022\n"
        "Total   Cost or   Gross   Gross   Total\n"
        "Estimated   Amortized   Unrealized   Unrealized   Estimated\n"
        "Fair Value   Cost   Gains   Losses   Fair Value\n"
        "Cash   $ 10,942   $ 10,720   $ —   $ —   $ 10,720"
    )
    # Joined, they still head the wrong figures: the first is the fair value
    # at December 31, 2021, the rest September 30, 2022's. One name over two
    # different figures says the columns were misread, and the row is not
    # quoted (before: "Cash: $10,942, Total Estimated Fair Value; $10,720,
    # Cost or Amortized Cost; …; $10,720, Total Estimated Fair Value").
    assert quote(text) is None
    text = "Total   Cost or\nEstimated   Amortized\nFair Value   Cost\nCash   $ 10,942   $ 10,720"
    assert quote(text) == "Cash: $10,942, Total Estimated Fair Value; $10,720, Cost or Amortized Cost."


def test_headings_that_cannot_be_aligned_are_left_out_rather_than_cut_to_fragments() -> None:
    # Before: "Shares repurchased: (28) million, Shares; —, Amount; (1) million,
    # Capital; …" and "$(546) million, Instruments; $(712) million, Pledged".
    equity = (
        "Common Stock   Additional   Accumulated Other   Total\n"
        "Outstanding   Paid-in   Treasury   Comprehensive   Retained   Shareholders'\n"
        "(In millions, except per share data)   Shares   Amount   Capital   Stock   Income (Loss)   Earnings   Equity\n"
        "Shares repurchased   (28)   —   (1)   —   —   (3,646)   (3,647)"
    )
    # Without headings no reader can tell which figure is which: not quoted
    # (before: "Shares repurchased: (28) million; (1) million; (3,646) million; …").
    assert quote(equity) is None
    netting = (
        "   Gross Amounts   Offset in the   Presented in the   Financial   Received or\n"
        "(In Millions)   Recognized   Balance Sheet   Balance Sheet   Instruments   Pledged   Net Amount\n"
        "Total liabilities   $   1,337   $   —   $   1,337   $   (546) $   (712) $   79"
    )
    # Five figures no heading places: no reader can tell which is which, so
    # the row is not quoted (before: "Total liabilities: $1,337 million;
    # $1,337 million; $(546) million; $(712) million; $79 million.").
    assert quote(netting) is None
    # More headings than figures: a blank cell, and no telling which is which.
    blanks = "(In Millions)   Level 1   Level 2   Level 3   Total\nCash   500   500"
    assert quote(blanks) is None


def test_dated_columns_are_quoted_and_the_change_columns_after_them_left_out() -> None:
    # Before: "Operating expenses: $2,662, 70.1 %; $2,508, 64.6 %; …; 6%, 5.5 pts".
    text = (
        "   Three Months Ended\n"
        "   Quarter-over-Quarter   Year-over-Year\n"
        "   July 30, 2023   April 30, 2023   July 31, 2022   Change   Change\n"
        "   ($ in millions, except per share data)\n"
        "Revenue   $   13,507   $   7,192   $   6,704   88 %   101 %\n"
        "Gross margin   70.1 %   64.6 %   43.5 %   5.5 pts   26.6 pts\n"
        "Operating expenses   $   2,662   $   2,508   $   2,416   6%   10 %"
    )
    # "($ in millions, …)" gives the unit as "(In millions)" does (before: "$2,662" had none).
    assert quote(text) == (
        "Operating expenses: $2,662 million, July 30, 2023; $2,508 million, April 30, 2023; "
        "$2,416 million, July 31, 2022."
    )


def test_a_row_that_leaves_its_change_cells_blank_is_read_under_the_years() -> None:
    # Before: "Other income/(expense), net: (13) million, June 25,; 189 million, June 26,".
    text = (
        "   Three Months Ended   Nine Months Ended\n"
        "   June 25,   June 26,   June 25,   June 26,\n"
        "   2022   2021   Change   2022   2021   Change\n"
        "Other income/(expense), net   (13)   189   (65)   585"
    )
    assert quote(text) == "Other income/(expense), net: (13), three months ended June 25, 2022; 189, June 26, 2021."


def test_a_period_under_columns_of_its_own_is_no_heading_for_the_first_of_them() -> None:
    # Before: "Total liabilities measured …: $151 million, Oct 1, 2022; $4
    # million, Dec 25, 2021" (the Level 1 figures, as if each period's total).
    text = (
        "   Oct 1, 2022   Dec 25, 2021\n"
        "(In Millions)   Level 1   Level 2   Level 3   Total   Level 1   Level 2   Level 3   Total\n"
        "Total liabilities   $   151   $   2,075   $   89   $   2,315   $   4   $   525   $   —   $   529"
    )
    # Nor is it quoted as seven bare figures, which no reader can place.
    assert quote(text) is None


def test_contents_lines_are_never_rows_and_a_labels_own_figures_stay_in_it() -> None:
    # Before: "a) Income Statements for the Three Months Ended September 30,
    # 2023 and: 2022, Item 1.; 3, Financial Statements".
    above = "Item 1.   Financial Statements\n"
    assert quote(above + "a) Income Statements for the Three Months Ended September 30, 2023 and 2022   3") is None
    assert quote(above + "c) Balance Sheets as of September 30, 2022 and June 30, 2022 5") is None
    assert quote(above + "Disclosure Pursuant to Section 13(r) of the Securities Exchange Act of 1934   44") is None
    assert quote("Contingencies (Note 13)") is None
    # Before: "Outstanding as of December 31,: 2021 million, …" and
    # "Commercial paper Level: 2 million, Level; …".
    assert quote("Outstanding as of December 31, 2021   279.9") == "Outstanding as of December 31, 2021: 279.9."
    assert quote("(In millions)   Cost   Value\nCommercial paper   Level 2   2,500   2,498") == (
        "Commercial paper Level 2: 2,500 million, Cost; 2,498 million, Value."
    )


SEGMENTS = """Segment revenue and operating income were as follows during the periods presented:

(In millions)

Three Months Ended September 30,   2023   2022
Revenue

Boats and Trailers   $   18,592   $   16,465
Personal Engines   13,666   13,332

   Total   $   32,258   $   29,797
Operating Income

Boats and Trailers   $   9,970   $   8,323
Personal Engines   5,174   4,217
"""


def test_a_row_under_a_group_heading_is_quoted_with_it() -> None:
    # Before: "Personal Engines: 5,174 million, …" said nothing of whether
    # 5,174 was revenue or operating income, and "Total: …" total of what.
    lines = SEGMENTS.split("\n")
    assert row_quote(lines, lines.index("Personal Engines   13,666   13,332")) == (
        "Personal Engines (Revenue): 13,666 million, three months ended September 30, 2023; 13,332 million, 2022."
    )
    assert row_quote(lines, lines.index("   Total   $   32,258   $   29,797")).startswith("Total (Revenue): $32,258")
    assert row_quote(lines, lines.index("Personal Engines   5,174   4,217")).startswith(
        "Personal Engines (Operating Income): 5,174 million"
    )
    # Rows right under their column headings have no group.
    text = "(In millions)\nThree Months Ended September 30,   2023   2022\nBoats   $   5,100   $   4,800"
    assert quote(text) == "Boats: $5,100 million, three months ended September 30, 2023; $4,800 million, 2022."


def test_a_question_naming_a_segment_leads_with_its_row() -> None:
    # Before: "Personal Engines" is a name in the question, and a name's
    # words did not count toward a row label's bonus: "Total" led.
    from docsum.models.extractive import ExtractiveLLM

    answer = ExtractiveLLM().answer(
        "How much of Acme's total revenue came from its Personal Engines segment?",
        f"[1] (source: report.txt)\n{SEGMENTS}",
    )
    assert answer.startswith("Personal Engines (Revenue): 13,666 million"), answer


WRAPPED = """Operating Expenses
   Three Months Ended
   October 30,   October 31,
   2022   2021
Research and
development expenses $   1,945   $   1,403
% of net revenue   33 %   20 %
 Total operating
 expenses   $   2,576   $   1,960
"""


def test_a_label_wrapped_over_two_lines_is_read_whole_and_a_share_row_names_whose() -> None:
    # Before: "development expenses (Research and): $1,945 …" (the label's
    # first line read as a group heading) and "% of net revenue: 33%, …".
    lines = WRAPPED.split("\n")
    quotes = [row_quote(lines, i) for i in range(len(lines))]
    assert (
        "Research and development expenses: $1,945, three months ended October 30, 2022; $1,403, October 31, 2021."
        in quotes
    ), quotes
    assert (
        "% of net revenue (Research and development expenses): 33%, three months ended October 30, 2022; 20%, October 31, 2021."
        in (quotes)
    ), quotes
    assert (
        "Total operating expenses: $2,576, three months ended October 30, 2022; $1,960, October 31, 2021." in quotes
    ), quotes


CASH_FLOW_STATEMENT = """(In millions)
   Nine Months Ended
   October 30,   October 31,
   2022   2021
Cash flows from operating activities:
Net income   $   2,954   $   6,749
Depreciation and amortization   1,174   773

Our operating cash flow was $3.4 billion in the first nine months of fiscal year 2023, down from $6.1 billion.
"""
SHARES_AND_FIGURES = """Three Months Ended
   April 30,   May 1,
   2023   2022
% of net revenue (Total operating expenses)   34.9 %   42.9 %
Total revenue   $   7,192   $   8,288
"""


def test_a_groups_words_do_not_make_a_row_the_answer() -> None:
    # Before: "Net income (Cash flows from operating activities)" led an
    # answer on operating cash flow: the group's words matched, not the row's.
    from docsum.models.extractive import ExtractiveLLM

    answer = ExtractiveLLM().answer(
        "What was Acme's operating cash flow in the first nine months?",
        f"[1] (source: report.txt)\n{CASH_FLOW_STATEMENT}",
    )
    assert answer.startswith("Our operating cash flow was $3.4 billion"), answer


def test_a_row_of_percentages_answers_only_a_question_about_a_share() -> None:
    from docsum.models.extractive import ExtractiveLLM

    context = f"[1] (source: report.txt)\n{SHARES_AND_FIGURES}"
    # Before: "% of net revenue …" led for "total net sales" on "net" and "revenue".
    answer = ExtractiveLLM().answer("How has Acme's total net sales trended?", context)
    assert answer.startswith("Total revenue: $7,192, three months ended April 30, 2023"), answer
    answer = ExtractiveLLM().answer("What were Acme's operating expenses as a percentage of net revenue?", context)
    assert answer.startswith("% of net revenue"), answer


def test_a_heading_cut_midway_heads_no_group() -> None:
    text = "Reported as\n\nOther current assets   243\nOther current liabilities   (188 )"
    assert quote(text) is not None and not quote(text).startswith("Other current liabilities (Reported as)")


def test_a_group_ends_at_its_total() -> None:
    # Before: "Operating income (Cost of revenue): …": the heading of the
    # cost rows above was taken for every row down to the end of the table.
    text = (
        "(In millions)   2023   2022\n"
        "Cost of revenue:\n"
        "Product   $   3,000   $   2,800\n"
        "Total cost of revenue   4,000   3,900\n"
        "Gross margin   6,000   5,500\n"
        "Operating income   2,000   1,800"
    )
    assert quote(text) is not None and quote(text).startswith("Operating income: 2,000")
    assert row_quote(text.split("\n"), 2).startswith("Product (Cost of revenue): $3,000")


def test_rows_under_a_percent_group_are_quoted_as_percentages() -> None:
    # Amazon writes "%" on a group's first row only; before, "Technology and
    # content (Percent of Net Sales): 12.7, …" and, under a growth group,
    # "19 million" were quoted, and the bare numbers led answers about costs.
    text = (
        "   Information about operating expenses is as follows (in millions):\n"
        "   Three Months Ended\n"
        "   March 31,\n"
        "   2022   2023\n"
        "Operating expenses:\n"
        " Cost of sales   $   66,499   $   67,791\n"
        " Technology and content   14,842   20,450\n"
        "Year-over-year Percentage Growth (Decline):\n"
        " Cost of sales   7%   2%\n"
        " Technology and content   19   38\n"
        "Percent of Net Sales:\n"
        " Cost of sales   57.1 %   53.2 %\n"
        " Technology and content   12.7   16.1"
    )
    lines = text.split("\n")
    assert row_quote(lines, 6) == (
        "Technology and content (Operating expenses): 14,842 million, three months ended March 31, 2022; "
        "20,450 million, 2023."
    )
    assert row_quote(lines, 9) == (
        "Technology and content (Year-over-year Percentage Growth (Decline)): 19%, three months ended March 31, "
        "2022; 38%, 2023."
    )
    assert quote(text) == (
        "Technology and content (Percent of Net Sales): 12.7%, three months ended March 31, 2022; 16.1%, 2023."
    )


def test_group_headings_stacked_one_cell_a_line_with_change_columns_between() -> None:
    # pypdf's text of Microsoft's MD&A table: each heading cell on a line of
    # its own, "Percentage" / "Change" between the two groups, the unit caption
    # nine lines above the row. Before: "Research and development: $6,844,
    # 2022; $5,758, 2021." (no unit, no period).
    lines = (
        "(In millions, except percentages)\nThree Months Ended\nDecember 31,\nPercentage\nChange\n"
        "Six Months Ended\nDecember 31,\nPercentage\nChange\n2022 2021 2022 2021\n"
        "Research and development $ 6,844 $ 5,758 19% $ 13,472 $ 11,357 19%"
    ).split("\n")
    assert row_quote(lines, len(lines) - 1) == (
        "Research and development: $6,844 million, three months ended December 31, 2022; $5,758 million, 2021."
    )


def test_column_dates_a_pdf_runs_together_head_their_columns() -> None:
    # pypdf's text of NVIDIA's cash flow statement: "July 30, July 31," with
    # single spaces. Before: "Inventories: 861 million, 2023; (1,285)
    # million, 2022." (no period, so a question on inventory levels did not
    # rank this six months' change below the balance).
    text = (
        "CONDENSED CONSOLIDATED STATEMENTS OF CASH FLOWS\n(In millions)\nSix Months Ended\n"
        "July 30, July 31,\n2023 2022\nCash flows from operating activities:\nNet income $ 8,232 $ 2,274\n"
        "Inventories 861 (1,285)"
    )
    assert quote(text) == (
        "Inventories (Cash flows from operating activities): 861 million, six months ended July 30, 2023; "
        "(1,285) million, July 31, 2022."
    )


def test_rows_of_a_table_of_shares_of_revenue_are_quoted_as_percentages() -> None:
    # NVIDIA's income statement "expressed as a percentage of revenue": only
    # the Revenue row writes "%". Before: "Gross profit: 74.0, three months
    # ended October 29, 2023; …", read as an amount.
    lines = (
        "Three Months Ended   Nine Months Ended\n"
        "October 29,   October 30,   October 29,   October 30,\n"
        "2023   2022   2023   2022\n"
        "Revenue   100.0 %   100.0 %   100.0 %   100.0 %\n"
        "Gross profit   74.0   53.6   70.9   55.1\n"
        "Operating expenses\n"
        "Research and development   12.7   32.8   16.0   25.7"
    ).split("\n")
    assert row_quote(lines, 4) == "Gross profit: 74.0%, three months ended October 29, 2023; 53.6%, October 30, 2022."
    assert row_quote(lines, 6) == (
        "Research and development (Operating expenses): 12.7%, three months ended October 29, 2023; "
        "32.8%, October 30, 2022."
    )
    # Amounts under a first row of shares stay amounts.
    amounts = (
        "   2023   2022\nGross margin percentage   44.5 %   43.3 %\nResearch and development   $ 7,442   $ 6,797"
    ).split("\n")
    assert row_quote(amounts, 2) == "Research and development: $7,442, 2023; $6,797, 2022."


def test_dates_a_pdf_joined_into_one_cell_beside_the_unit_caption_head_their_columns() -> None:
    # Before: "Debt: 48,836 million, (In Millions; Unaudited); 37,684 million,
    # Apr 1, 2023 Dec 31, 2022": the caption was read as the first column's
    # heading and both dates as the second's.
    lines = [
        "Consolidated Condensed Balance Sheets",
        " ",
        "(In Millions; Unaudited)   Apr 1, 2023 Dec 31, 2022",
        "Assets",
        "Current assets:",
        "Cash and cash equivalents   $ 8,232   $ 11,144",
        "Total current assets   48,314   50,407 ",
        "Debt 48,836 37,684 ",
    ]
    assert row_quote(lines, 7) == "Debt: 48,836 million, Apr 1, 2023; 37,684 million, Dec 31, 2022."
    assert row_quote(lines, 5) == (
        "Cash and cash equivalents (Current assets): $8,232 million, Apr 1, 2023; $11,144 million, Dec 31, 2022."
    )


def test_a_row_without_headings_is_quoted_only_when_its_one_figure_needs_none() -> None:
    # Before: "Earnings per share—diluted: $0.25; $1.67; $2.10; $3.73" and
    # "Cash: $25,337 million; $25,337 million; $25,337 million" led answers;
    # which figure is which period or column, no reader can tell.
    assert quote("Earnings per share—diluted   $   0.25   $   1.67   $   2.10   $   3.73") is None
    assert quote("Total debt   45,694   47,237") is None
    assert quote("Shares outstanding   7,432") == "Shares outstanding: 7,432."


def test_one_column_name_over_two_different_figures_is_a_misread_heading() -> None:
    # Before: "Cash: $10,666 million, Total Estimated Fair Value; $10,968
    # million, Cost or Amortized Cost; …; $10,968 million, Total Estimated
    # Fair Value": the headings were read one column off.
    text = (
        "(In millions)   Total Estimated Fair Value   Cost or Amortized Cost   Gross Unrealized Gains   "
        "Gross Unrealized Losses   Total Estimated Fair Value\n"
        "Cash   $   10,666   $   10,968   $   —   $   —   $   10,968"
    )
    assert quote(text) is None
    # Years repeat over two groups of columns: that is no misreading.
    text = "(In millions)   2023   2022   2023   2022\nNet sales   $   5,120   $   4,804   $   15,203   $   14,610"
    assert (
        quote(text)
        == "Net sales: $5,120 million, 2023; $4,804 million, 2022; $15,203 million, 2023; $14,610 million, 2022."
    )


def test_a_lower_case_fragment_of_a_chart_is_no_rows_label() -> None:
    # Before: "from Q2 2022 $0.15 or 54% from Q2: 2022; 2022" led two answers
    # on Intel's Q2 2023 10-Q (an infographic's text, one line of it).
    assert quote("   from Q2 2022   $0.15 or 54%   from Q2 2022   2022") is None
    assert quote("to Intel   1,481   (454)   (1,277)   7,659") is None


def test_period_codes_head_their_columns_and_the_year_to_date_is_a_group_of_its_own() -> None:
    # Before: "Q3 2023   Q3 2022   YTD 2023   YTD 2022" was read as a title in
    # capitals, and the row was quoted with four bare figures.
    text = (
        "   Three Months Ended   Nine Months Ended\n"
        "   Q3 2023   Q3 2022   YTD 2023   YTD 2022\n"
        "Net revenue   $   14,158   $   15,338   $   38,822   $   49,012"
    )
    assert quote(text) == "Net revenue: $14,158, Q3 2023; $15,338, Q3 2022."
    text = "   Q3 2023   Q2 2023   Q3 2022\nNet revenue   $   14,158   $   12,949   $   15,338"
    assert quote(text) == "Net revenue: $14,158, Q3 2023; $12,949, Q2 2023; $15,338, Q3 2022."
    # A title in capitals still heads nothing.
    assert quote("PART II.   OTHER INFORMATION\nRevenue   $   5,120   $   4,804") is None


def test_a_row_of_empty_cells_is_not_quoted() -> None:
    # Before: "Preferred stock (…; no shares issued or outstanding): —, December
    # 31, 2022; —, March 31, 2023" filled a place in an answer on buybacks.
    text = "   December 31, 2022   March 31, 2023\nPreferred stock   —   —"
    assert quote(text) is None
    assert quote("Preferred stock   —") is None
    text = "   October 29, 2023   October 30, 2022\nIP-related costs   (26)   —"
    assert quote(text) == "IP-related costs: (26), October 29, 2023; —, October 30, 2022."


def test_an_empty_share_cell_is_a_cell_not_part_of_the_label() -> None:
    # Before: "Acquisition termination cost — — — —%: —, 2023; 1,353 million,
    # 2022; …": "—%" was no cell, so the label ran up to it.
    text = (
        "   Three Months Ended   Six Months Ended\n"
        "   July 30,   July 31,   $   %   July 30,   July 31,   $   %\n"
        "   2023   2022   Change   Change   2023   2022   Change   Change\n"
        "   ($ in millions)\n"
        "Acquisition termination cost   —   —   —   —%   —   1,353   (1,353)   (100)%"
    )
    row = parse_row(text.split("\n")[-1])
    assert row is not None and row.label == "Acquisition termination cost"
    # The quarter's cells are all empty: nothing to quote.
    assert quote(text) is None
    text = (
        "   Three Months Ended\n   April 30,   May 1,   $   %\n   2023   2022   Change   Change\n   ($ in millions)\n"
        "Acquisition termination cost   —   1,353   (1,353)   —%"
    )
    # The dates over the years head them past the change columns' "$" and "%"
    # (before: "—, 2023; 1,353 million, 2022").
    assert quote(text) == (
        "Acquisition termination cost: —, three months ended April 30, 2023; 1,353 million, May 1, 2022."
    )
