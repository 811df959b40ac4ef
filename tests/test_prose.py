"""Offline summaries a person would keep: the whole title, the kind of
document, informative sentences; no word lists (issue 11, item 4)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from helpers import EVAL_PDFS
from helpers import run_cli_parts as run

from docsum.ingest.loaded import first_line_title
from docsum.lexical import registrant, sentences, title_lines
from docsum.models.extractive import ExtractiveLLM
from docsum.models.prompts import DOCUMENT_SUMMARY_PROMPT
from docsum.models.prose import informative_bonus, opening
from docsum.synthesizers import TreeSummarize

PAPER = """Trace-based Just-in-Time Type Specialization for Dynamic
Languages
Andreas Gal, Brendan Eich, Mike Shaver

Abstract
Dynamic languages such as JavaScript are more difficult to compile than statically typed ones. Thus we present a trace-based compiler.
We implemented these techniques in TraceMonkey, the JavaScript engine of Firefox 3.5, and measured speedups of 2x to 20x on the SunSpider benchmark.
Let the loop header be the anchor of a trace. Although traces are linear, they are recorded at run time.
1 for (var i = 2; i < 100; ++i) { primes[k] = false; }
"""


@pytest.mark.parametrize(
    "text, title",
    [
        (PAPER, "Trace-based Just-in-Time Type Specialization for Dynamic Languages"),
        # An author line is not part of the title.
        (
            "Preemptive Information Extraction using Unrestricted Relation Discovery\nYusuke Shinyama Satoshi Sekine\n",
            "Preemptive Information Extraction using Unrestricted Relation Discovery",
        ),
        # A title ending in a connecting word goes on.
        (
            "The Annual Report of the\nLarkspur Valley Water Cooperative\n\nText.",
            "The Annual Report of the Larkspur Valley Water Cooperative",
        ),
        # Ordinary lines are text, not title.
        ("First line here\nsecond\nthird\n", "First line here"),
    ],
)
def test_a_title_set_over_several_lines_is_whole(text: str, title: str) -> None:
    found = title_lines(text)
    assert found is not None and found[0] == title


def test_the_summary_opens_with_the_kind_and_the_whole_title_and_lists_no_words() -> None:
    llm = ExtractiveLLM()
    summary = llm.summarize("Summarize the document.", PAPER)
    first, _, body = summary.partition("\n")
    assert first == "A research paper: Trace-based Just-in-Time Type Specialization for Dynamic Languages."
    assert "Key names" not in summary and "Key dates" not in summary
    assert "TraceMonkey" in body and "2x to 20x" in body  # names and figures kept
    assert "primes[k]" not in body  # code debris is not prose


def test_a_tree_of_summaries_keeps_one_opening() -> None:
    """Summaries of summaries: the opening the first part got is kept once,
    not repeated or wrapped in another."""
    llm = ExtractiveLLM(context_window=600, num_output=120)
    text = PAPER + "\n".join(
        f"The trace tree {i} records a loop of the program {i} times faster than the interpreter." for i in range(60)
    )
    summarizer = TreeSummarize(llm, summary_template=DOCUMENT_SUMMARY_PROMPT)
    summary = asyncio.run(summarizer.aget_response("Summarize the document.", [text]))
    assert isinstance(summary, str)
    assert summary.startswith("A research paper: Trace-based Just-in-Time Type Specialization for Dynamic Languages.\n")
    assert summary.count("A research paper:") == 1


@pytest.mark.parametrize(
    "sentence, prose",
    [
        ("We implemented these techniques in TraceMonkey and measured speedups of 2x.", True),
        ("−2 −1.5 −1 −0.5 0 0.5 1 1.5 2", False),
        ("| {z } (1+(−1))n+1 = χ(∆)", False),
        ("Figure 3.", False),
    ],
)
def test_only_prose_is_quoted(sentence: str, prose: bool) -> None:
    assert (informative_bonus(sentence) is not None) == prose


def test_no_opening_without_a_cue() -> None:
    first, body = opening("Adolescence\n\nThe formal study of adolescent psychology began in 1904.")
    assert first is None and body.startswith("Adolescence")


def test_stored_summaries_and_tree_answers_begin_with_prose(offline_sample_store: Path) -> None:
    code, out, err = run("summaries", "--store", offline_sample_store, "--json")
    assert code == 0, err
    summaries = [d["summary"] for d in json.loads(out)]
    assert summaries and not any("Key names" in s or "Key dates" in s for s in summaries)
    question = "How much did Brindle & Daughter pay for the oven, and when was the auction?"
    code, out, err = run("ask", question, "--store", offline_sample_store, "--mode", "tree_summarize", "--json")
    assert code == 0, err
    answer = json.loads(out)["answer"]
    assert not answer.startswith("Key") and "$1,850" in answer


@pytest.mark.parametrize(
    "text",
    [
        "風險因素 – 31 – 信貸風險\n本集團現金客戶須於交易日後兩個營業日（「T+2」）內結算其交易金額。本集團的信貸風險主要來自客戶的應收款項。",
        "Item\tQty\tPrice\n| 1 | 2 | 3 |\n| 4 | 5 | 6 |\n",
    ],
)
def test_text_that_is_not_english_prose_still_gets_a_summary(text: str) -> None:
    # Before: Chinese "sentences" had too few space-separated words to count
    # as prose, and the build failed with "the model returned an empty summary".
    assert ExtractiveLLM().summarize("Summarize the document.", text).strip()


COVER = """UNITED STATES
   SECURITIES AND EXCHANGE COMMISSION
   Washington, D.C. 20549


   FORM 10-Q
   For the quarterly period ended July 1, 2023
   Commission File Number: 001-36743


   Apple Inc.
   (Exact name of Registrant as specified in its charter)

Net sales rose in the quarter.
"""


@pytest.mark.parametrize(
    "text, name",
    [
        (COVER, "Apple Inc."),
        (
            "UNITED STATES\n   FORM 10-Q\n   Commission File Number 001-37845\n\n\n   MICROSOFT CORPORATION\n   WASHINGTON   91-1144442\n",
            "MICROSOFT CORPORATION",
        ),
        (PAPER, None),
    ],
)
def test_a_filing_is_titled_by_its_registrant(text: str, name: str | None) -> None:
    # Before: every filing was titled "UNITED STATES", its cover's first line,
    # and its summary never said whose filing it was.
    assert registrant(text) == name
    if name:
        assert first_line_title(text) == name
        assert opening(text)[0] == f"A quarterly report filed on SEC Form 10-Q: {name}."


# --------------------------------------------------------------------------- figures and tables


# As PDF text comes out: prose wrapped at the column, a figure's labels one per
# line above its caption, a table's rows around its caption, a running header.
WITH_FIGURES = """Acme Journal of Loops 12
Thus, the outer loop is recorded and compiled twice, and both copies
must be retained in the trace cache.
i2
i3 i4
i5
t1
Tree Call
Figure 7. Control flow graph of a nested loop with an if statement
inside the inner most loop.
In general, if loops are nested to depth k, each loop is recorded
once for every path through it.
Acme Journal of Loops 13
Then we applied metaclustering to these basic clusters
Source articles 28,009
Basic clusters 5,543
Metaclusters (rows ≥ 3) 101
Table 2: Articles and obtained metaclusters.
and obtained 302 metaclusters, of which 101 had three or more rows.
4.1 Evaluation Method
We evaluated the tables by hand.
Acme Journal of Loops 14
References
[1] A. Gal. Trace trees. In Proceedings of PLDI, pages 146–160, 2009.
"""


def test_figure_and_table_runs_are_not_summary_sentences() -> None:
    from docsum.models.prose import without_figures_and_tables

    kept = without_figures_and_tables(WITH_FIGURES)
    for gone in (
        "i3 i4",
        "Tree Call",
        "Figure 7",
        "inner most loop",
        "28,009",
        "Table 2",
        "Acme Journal",
        "4.1 Evaluation",
        "Proceedings",
    ):
        assert gone not in kept
    # The prose a table interrupted joins up again.
    units = sentences(kept)
    assert (
        "Then we applied metaclustering to these basic clusters and obtained 302 metaclusters, of which 101 had three or more rows."
        in units
    )
    assert (
        "Thus, the outer loop is recorded and compiled twice, and both copies must be retained in the trace cache."
        in units
    )
    assert "We evaluated the tables by hand." in units
    # Before: "i2 i3 i4 i5 t1 Tree Call Figure 7. Control flow graph …" and
    # "… 28,009 Basic clusters 5,543 …" were quoted as informative sentences.
    summary = ExtractiveLLM().summarize("Summarize the document.", WITH_FIGURES)
    assert "Figure 7" not in summary and "28,009" not in summary and "i3 i4" not in summary
    assert "metaclustering" in summary


def test_a_sentence_that_names_a_figure_is_prose() -> None:
    from docsum.models.prose import without_figures_and_tables

    text = "Figure 7 shows basic trace tree compilation applied to a nested loop\nwhere the inner loop contains two paths.\n"
    assert without_figures_and_tables(text) == text


@pytest.mark.skipif(not EVAL_PDFS.is_dir(), reason="shared eval PDFs not present")
def test_real_papers_are_summarized_without_their_figures_and_tables(tmp_path: Path) -> None:
    folder = tmp_path / "papers"
    folder.mkdir()
    for name in ("pdfjs-tracemonkey.pdf", "pdfminer-naacl06-shinyama.pdf"):
        (folder / name).write_bytes((EVAL_PDFS / name).read_bytes())
    store = tmp_path / "store.sqlite"
    code, out, err = run("build", folder, "--store", store)
    assert code == 0, err
    code, out, err = run("summaries", "--store", store, "--json")
    summary = {d["path"]: d["summary"] for d in json.loads(out)}
    tracemonkey, shinyama = summary["pdfjs-tracemonkey.pdf"], summary["pdfminer-naacl06-shinyama.pdf"]
    # Before: "… i2 i3 i4 i5 i1 i6 i7 t1 t2 Tree Call Outer Tree … Figure 7." and
    # "… Source articles 28,009 Basic clusters 5,543 … Table 2: …".
    assert "i2 i3" not in tracemonkey and "Figure 7" not in tracemonkey and "Proceedings" not in tracemonkey
    assert "28,009" not in shinyama and "Table 2" not in shinyama and "Table 1" not in shinyama
    assert "TraceMonkey" in tracemonkey and "Relation Discovery" in shinyama
