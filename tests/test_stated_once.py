"""Aboutness read from the passage: a name a document states once is still
stated. A long article about many things, or a one-page scan, states its
dates and side names once; a question naming them is answered from the
passage that says them. A name some document is about (a company's own
filings, a report named for its quarter) is still left to that document."""

from __future__ import annotations

from pathlib import Path

from helpers import built_store
from helpers import run_cli_parts as run

from docsum.query.grounding import grounded
from docsum.query.retrieve import Candidate, Retrieval
from docsum.store.sqlite import Store

# A long article about a city: its history names a year once among many.
CITY = (
    "Varnholm\n\n"
    + "The city lies on a wide river and its markets trade grain, timber and wool with the towns upstream. " * 300
    + "\n\nIn 1806 the army of Marshal Oskar Feldt liberated Varnholm from the occupying garrison. "
    + "The bridges over the river were rebuilt in stone soon after. "
    + "The university opened its observatory on the hill above the old port. " * 300
)
# A one-page scan: its date is said once.
BULLETIN = (
    "Service bulletin 74-12\n\n"
    "The Oversize Tire Accessory Kit was installed on all field tractors in December 1974. "
    "Dealers fitted the kit at no charge to owners."
)
QUARTER_PAGE = (
    "Plant notice\n\nDuring the first quarter of 2023 the Lindqvist plant replaced its boiler with a heat pump. "
    "Steam use fell by a third."
)


def test_a_year_an_article_states_once_is_answered_from_its_passage(tmp_path: Path) -> None:
    # Before: exit 5, "missing: 1806" (a year must be said twice and often).
    store = built_store(tmp_path, {"Varnholm.txt": CITY, "Bulletin.txt": BULLETIN})
    code, out, err = run("ask", "Whose army liberated Varnholm in 1806?", "--store", store)
    assert code == 0, err
    assert "Oskar Feldt" in out.split("\n\nSources:")[0]


def test_a_date_a_one_page_scan_states_once_is_answered(tmp_path: Path) -> None:
    store = built_store(tmp_path, {"Varnholm.txt": CITY, "Bulletin.txt": BULLETIN})
    code, out, err = run("ask", "Oversize Tire Accessory Kit installation December 1974", "--store", store)
    assert code == 0, err
    assert "December 1974" in out


def test_a_quarter_written_out_once_answers_a_question_on_q1_2023(tmp_path: Path) -> None:
    store = built_store(tmp_path, {"Notice.txt": QUARTER_PAGE, "Varnholm.txt": CITY})
    code, out, err = run("ask", "What did the Lindqvist plant replace in Q1 2023?", "--store", store)
    assert code == 0, err
    assert "heat pump" in out


def test_a_name_another_document_is_about_is_not_answered_from_a_mention(tmp_path: Path) -> None:
    # Orvik's own report says nothing of 2023; Brenna's report states Orvik
    # and 2023 once each. Orvik is what Orvik's report is about (its file
    # name), so a mention elsewhere does not answer for it, even when Orvik's
    # report is not among the chosen: declined, not answered from Brenna's.
    filler = "Sales rose in every region and the factories ran at full capacity. " * 80
    docs = {
        "Orvik_report.txt": "Orvik Corporation quarterly report\n\n" + filler + "Orvik opened a plant in Lyon.",
        "Brenna_report.txt": "Brenna Industries quarterly report\n\n"
        + filler
        + "In 2023 Brenna paid a dividend of $0.40 per share; Orvik is a customer.",
    }
    store_path = built_store(tmp_path, docs)
    with Store.open(store_path) as store:
        ids = {d.path.rsplit("/", 1)[-1]: d.doc_id for d in store.list_documents()}
        brenna = Candidate(ids["Brenna_report.txt"], "Brenna_report.txt", "Brenna's quarterly report.", 1.0)
        orvik = Candidate(ids["Orvik_report.txt"], "Orvik_report.txt", "Orvik's quarterly report.", 0.5)
        for question, answered in (("What dividend did Orvik pay in 2023?", False), ("Who paid $0.40 in 2023?", True)):
            found = Retrieval("fused", chosen=[brenna], candidates=[brenna, orvik])
            kept, by_doc, report = grounded(store, question, found, {}, 3, None)
            assert bool(kept) is answered, (question, report)
            # Answered from the passage that says it.
            assert all("2023" in r.text for c in kept for r in by_doc[c.doc_id])


def test_a_question_that_quotes_a_stored_passage_is_answered_from_it(tmp_path: Path) -> None:
    # Brenna's report quotes a ruling on Orvik; Orvik's own report is what
    # Orvik is about. Copied as the question, the sentence is answered from
    # Brenna's report, which holds it word for word. Before: declined
    # ("missing: orvik, seven network").
    filler = "Sales rose in every region and the factories ran at full capacity. " * 80
    quote = "In December 2020 the court granted a joint motion by Orvik and Seven Networks to dismiss the claims."
    docs = {
        "Orvik_report.txt": "Orvik Corporation quarterly report\n\n" + filler + "Orvik opened a plant in Lyon.",
        "Brenna_report.txt": "Brenna Industries quarterly report\n\n" + filler + quote + " " + filler,
    }
    store_path = built_store(tmp_path, docs)
    with Store.open(store_path) as store:
        ids = {d.path.rsplit("/", 1)[-1]: d.doc_id for d in store.list_documents()}
        brenna = Candidate(ids["Brenna_report.txt"], "Brenna_report.txt", "Brenna's quarterly report.", 1.0)
        orvik = Candidate(ids["Orvik_report.txt"], "Orvik_report.txt", "Orvik's quarterly report.", 0.5)
        found = Retrieval("fused", chosen=[brenna, orvik], candidates=[brenna, orvik])
        kept, _, report = grounded(store, quote, found, {}, 3, None)
        assert kept == [brenna], report
        assert report is not None and "quotes" in report.note


def test_a_name_one_article_says_often_is_still_stated_once_in_another(tmp_path: Path) -> None:
    # A game's article names the country it was released in several times;
    # an article on tidal power names the same country once, in the sentence
    # that answers. Neither is named for the country (file name, title), so
    # saying it often, or an extractive summary quoting it, does not make the
    # game's article the only source: before, grounding kept the game alone
    # and answered with its release dates.
    game = (
        "Harbor Quest\n\n"
        + "Harbor Quest is a puzzle game about boats and lighthouses played on handheld consoles. " * 60
        + "It was released in Norway in May. Sales in Norway were strong. A Norway-only edition followed. "
        + "Critics in Norway praised its music. "
        + "Players steer a tug through fog and rescue stranded sailors. " * 60
    )
    tidal = (
        "Tidal power\n\n"
        + "Tidal power converts the energy of the tides into electricity with turbines in estuaries. " * 60
        + "The largest tidal research station in Norway is the Kvalsund test site. "
        + "Turbines are placed where the current is strongest. " * 60
    )
    store_path = built_store(tmp_path, {"Harbor_Quest.txt": game, "Tidal_power.txt": tidal})
    with Store.open(store_path) as store:
        ids = {d.path.rsplit("/", 1)[-1]: d.doc_id for d in store.list_documents()}
        quest = Candidate(ids["Harbor_Quest.txt"], "Harbor_Quest.txt", "A puzzle game, released in Norway.", 1.0)
        power = Candidate(ids["Tidal_power.txt"], "Tidal_power.txt", "Turbines in estuaries.", 0.9)
        found = Retrieval("fused", chosen=[quest, power], candidates=[quest, power])
        kept, by_doc, report = grounded(store, "What is the tidal research station in Norway?", found, {}, 3, None)
    assert power in kept, report
    # Read where the country is said.
    assert all("Norway" in r.text for r in by_doc[power.doc_id])
