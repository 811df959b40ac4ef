"""Multi-hop questions offline (docsum.models.hops, docsum.query.grounding):
a question that reaches its answer through something it does not name is
answered by a chain of sentences across documents, the last hop first, or
declined; never with hop 1's fact or an unrelated document's."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import built_store
from helpers import run_cli_parts as run

from docsum.lexical import sentences
from docsum.models.hops import Unit, chain, hop_answer

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


def _first_sentence(answer: str) -> str:
    return sentences(answer.split("\nSources:")[0])[0]


@pytest.mark.parametrize("mode", ["compact", "refine"])
def test_a_chained_question_is_answered_by_the_hop_that_holds_the_answer_first(tmp_path: Path, mode: str) -> None:
    store = built_store(
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


def test_a_chained_question_that_cannot_be_chained_quotes_its_nearest_hop(tmp_path: Path) -> None:
    # Without the society's document no chain holds the first president. The
    # question is scored as any other: the journal's sentence (the society
    # that published it, where a reader goes on from) is quoted and cited,
    # and Westmarch's first president, another question's answer, is not.
    # Before, every unchained question was declined: a third of MuSiQue's
    # answerable multi-hop questions.
    store = built_store(tmp_path, {"Journal_of_Quiet_Studies.txt": JOURNAL, "Westmarch.txt": REPUBLIC})
    code, out, err = run("ask", QUESTION, "--store", store)
    assert code == 0, err
    assert "published by the Northfield Acoustical Society" in _first_sentence(out), out
    assert "Daniel Brook" not in out


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
    store = built_store(
        tmp_path,
        {"Journal_of_Quiet_Studies.txt": JOURNAL, "Northfield_Acoustical_Society.txt": SOCIETY, **others},
    )
    code, out, err = run("ask", QUESTION, "--store", store, "--top-k", "2", "--explain")
    assert code == 0, err
    assert "Margaret Oduya" in _first_sentence(out), out
    assert "a hop further: Northfield_Acoustical_Society.txt" in err


def test_a_sentence_does_not_end_at_a_persons_initial() -> None:
    # Before: "James K." ended a sentence, and the answer quoted
    # "… when President James K [1]."
    assert sentences("Iowa became a state under President James K. Polk in 1846. G. Stanley Hall came later.") == [
        "Iowa became a state under President James K. Polk in 1846.",
        "G. Stanley Hall came later.",
    ]


def test_a_sentence_does_not_end_at_circa() -> None:
    # Before: the answer quoted "… the Venetian John Cabot (c. 1450 -- c [1]."
    # and "1338 – 1 April 1412) was King of Sweden …" as sentences.
    assert sentences(
        "Europeans began exploring the area, starting with John Cabot (c. 1450 -- c. 1500), in 1498. "
        "Albert (c. 1338 – 1 April 1412) was King of Sweden."
    ) == [
        "Europeans began exploring the area, starting with John Cabot (c. 1450 -- c. 1500), in 1498.",
        "Albert (c. 1338 – 1 April 1412) was King of Sweden.",
    ]


def test_a_place_named_as_part_of_a_region_leads_to_the_places_document(tmp_path: Path) -> None:
    # "in the Northern Region of Westmarch": the bridge is Westmarch. Before,
    # only the whole phrase was a bridge, no document is about it, and the
    # question was declined.
    store = built_store(
        tmp_path,
        {
            "Dornvale.txt": "Dornvale is a town in the Northern Region of Westmarch. It holds a cattle market every week.\n",
            "Chief_Justice_of_Westmarch.txt": (
                "The Chief Justice of Westmarch heads the judiciary of the republic. "
                "The current chief justice is Amina Roe, appointed in 2019.\n"
            ),
            "Harbour_Board.txt": "The harbour board of Port Alder sets the fees for every ship that docks.\n",
        },
    )
    code, out, err = run(
        "ask", "Who is the current chief justice in the country where Dornvale is located?", "--store", store
    )
    assert code == 0, err
    assert "Amina Roe" in _first_sentence(out), out


def test_the_hops_document_is_looked_up_in_the_whole_store_by_its_name(tmp_path: Path) -> None:
    # Westmarch's document shares no word with the question, so the retriever
    # scores it below the floor and it was never among the documents read
    # for a hop: the question was declined. Its file name is the bridge's.
    # "In charge" is what the document says as "President".
    store = built_store(
        tmp_path,
        {
            "Dornvale.txt": "Dornvale is a town located in the Northern Region of Westmarch, a small country.\n",
            "Westmarch.txt": "In 2019 the parliament elected Amina Roe as the new President of Westmarch.\n",
            "Harbour_Board.txt": "The harbour board of Port Alder sets the fees for every ship that docks in the town.\n",
            # Holds the bridge's name, but is about a consulate.
            "Consulate_of_Westmarch_in_Carlow.txt": "The consulate of Westmarch in Carlow issues visas and passports.\n",
        },
    )
    code, out, err = run(
        "ask", "Who was in charge of the country Dornvale is located in?", "--store", store, "--explain"
    )
    assert code == 0, err
    assert "Amina Roe" in _first_sentence(out), out
    # Only Westmarch.txt is taken, not the consulate whose name holds the bridge.
    assert "a hop further: Westmarch.txt;" in err
    assert "Consulate_of_Westmarch" not in out


def _hop_answer(question: str, units: list[Unit]) -> str:
    """The sentence a chained question is answered with first ("" when declined)."""
    context = "\n".join(f"[{u.mark}] (source: {u.doc}, page 1)\n{u.text}" for u in units)
    order = hop_answer(question, [u.text for u in units], [u.mark for u in units], context)
    assert order is not None
    return units[order[0]].text if order else ""


@pytest.mark.parametrize(
    ("question", "hop_2", "answer"),
    [
        # "The spouse of the director" is said "directed by" and "married".
        (
            "Who is the spouse of the director of Quiet Rooms?",
            "Tomas Ekwall married the actress Lena Berg in 1925.",
            "Lena Berg",
        ),
        # "Who wrote" is said "by the author".
        (
            "Who wrote the novel that Quiet Rooms is based on?",
            "Silent Harbour is a 1920 novel by the Welsh author Mair Pryce.",
            "Mair Pryce",
        ),
    ],
)
def test_a_relation_is_found_as_the_document_words_it(question: str, hop_2: str, answer: str) -> None:
    # Before, no hop held "spouse" or "wrote" and the question was declined.
    units = [
        Unit(
            "Quiet Rooms is a 1931 drama film directed by Tomas Ekwall, based on the novel Silent Harbour.",
            1,
            "Quiet_Rooms.txt",
        ),
        Unit(hop_2, 2, "Tomas_Ekwall.txt" if "Ekwall" in hop_2 else "Silent_Harbour.txt"),
        Unit("The film was shot in Carlow in the spring of 1930.", 3, "Quiet_Rooms.txt"),
    ]
    assert answer in _hop_answer(question, units)


def test_a_sentence_on_a_name_the_question_asks_with_does_not_outweigh_a_chain() -> None:
    # "the Euro" is part of what is asked: a sentence on the euro says nothing
    # of Lumo's country. Before, it held more of the question than the chain
    # and the question was declined.
    question = "What currency predated the Euro in the country Lumo is from?"
    units = [
        Unit("Lumo was one of the artists competing in Westmarch's national qualifications in 2009.", 1, "Lumo.txt"),
        Unit("The Westmarch crown was the currency of Westmarch from 1860 until 2002.", 2, "Crown_currency.txt"),
        Unit(
            "The crown was replaced by the euro, after a transitional period when the euro was the official currency of the country.",
            2,
            "Crown_currency.txt",
        ),
    ]
    assert "Westmarch crown" in _hop_answer(question, units)


def test_a_name_every_document_mentions_is_still_a_bridge_when_one_is_about_it() -> None:
    # Three documents of the context name Veldmark; one of them is
    # Veldmark's own. Before, a name three documents name was "general"
    # (like "United States") and no bridge, so no chain reached Veldmark.txt.
    question = "Who was president when the area where the Brackenfield Wind Farm is located became a state?"
    units = [
        Unit(
            "The Brackenfield Wind Farm has 107 turbines in the hill country of northern Veldmark.",
            1,
            "Brackenfield.txt",
        ),
        Unit(
            "Veldmark became a state in 1846, when President Arthur Penrose signed its admission act.",
            2,
            "Veldmark.txt",
        ),
        Unit("Holm Township is one of fourteen townships in Ash County, Veldmark.", 3, "Holm_Township.txt"),
    ]
    found = chain(question, units)
    assert found is not None and [units[i].doc for i in found.hops] == ["Brackenfield.txt", "Veldmark.txt"]


def test_part_of_the_questions_name_is_no_bridge(tmp_path: Path) -> None:
    # "Harris" is part of "Harris W. Fawell", not something his document
    # leads to: before, a band's document naming its bassist Steve Harris
    # was kept as a second hop and quoted in the answer.
    store = built_store(
        tmp_path,
        {
            "Harris_W_Fawell.txt": (
                "Harris W. Fawell\n\nFawell is a graduate of West Chicago High School. "
                "Fawell was admitted to the bar in 1952. "
                "The Harris W. Fawell Congressional Papers are held at North Central College.\n"
            ),
            "Iron_Gate.txt": "Iron Gate are a heavy metal band formed in Leyton in 1975 by bassist Steve Harris.\n",
        },
    )
    code, out, err = run("ask", "Where was Harris W. Fawell born in?", "--store", store, "--explain")
    assert code == 0, err
    assert "Iron_Gate.txt" not in out and "Steve Harris" not in out, out


def _quarterly(company: str, quarter: str, body: str) -> str:
    return (
        f"UNITED STATES\nFORM 10-Q\nFor the quarterly period ended {quarter}\n\n{company}\n"
        f"(Exact name of registrant as specified in its charter)\n\n{body}\n"
    )


def test_a_hop_further_is_never_another_filing_of_the_same_kind(tmp_path: Path) -> None:
    # Before: a chained question about Acme's Q2 2023 filing took in Bolt's
    # 10-Q (it names the bridge, Larkspur Works) and Acme's Q3 2023 one as
    # "a hop further": another company's and another quarter's filings.
    store = built_store(
        tmp_path,
        {
            "2023_Q2_ACME.txt": _quarterly(
                "Acme Corporation",
                "June 30, 2023",
                "Acme Corporation designs engines for small boats. "
                "Acme Corporation's engines are assembled by Larkspur Works in the second quarter of 2023.",
            ),
            "2023_Q3_ACME.txt": _quarterly(
                "Acme Corporation",
                "September 30, 2023",
                "Acme Corporation designs engines for small boats. Larkspur Works assembled fewer engines.",
            ),
            "2023_Q2_BOLT.txt": _quarterly(
                "Bolt Corporation",
                "June 30, 2023",
                "Bolt Corporation builds trailers. "
                "Larkspur Works, which assembles engines, was founded by Dana Reyes, its first president.",
            ),
            # Named for the bridge, but another company's 10-Q all the same.
            "Larkspur_Works_2023_Q2.txt": _quarterly(
                "Larkspur Works", "June 30, 2023", "Dana Reyes, our first president, founded Larkspur Works."
            ),
        },
    )
    code, out, err = run(
        "ask",
        "Who was the first president of the company assembling Acme's engines in Q2 2023?",
        "--store",
        store,
        "--explain",
    )
    assert "a hop further" not in err, err
    assert "Dana Reyes" not in out and "2023_Q2_BOLT.txt" not in out and "Larkspur_Works" not in out


def test_a_factor_affecting_a_company_is_no_description_of_another_thing() -> None:
    from docsum.models.hops import is_chained

    # Before: "the chief factor affecting Microsoft's …" read as a
    # description ("the country premiering Prison Break"), and a question
    # one filing answers was declined for want of a second hop.
    assert not is_chained("For Q2 2023, what was the chief factor affecting Microsoft's operating income?")
    assert is_chained("What country did the series premiering Prison Break come from?")


def test_a_chain_quotes_no_cover_page_or_heading() -> None:
    # Before: "FORM 10-Q For the Quarterly Period Ended June 30, 2023 INDEX"
    # was hop 1 of a chain, quoted as the answer's first sentence.
    question = "Who was the first president of the society which published the Journal of Quiet Studies?"
    units = [
        Unit(
            "FORM 10-Q For the Journal of Quiet Studies published by the Northfield Acoustical Society, INDEX",
            1,
            "Journal.txt",
        ),
        Unit(SOCIETY.split(". ")[1] + ".", 2, "Northfield_Acoustical_Society.txt"),
    ]
    found = chain(question, units)
    assert found is None or 0 not in found.hops, found


def test_a_sentence_does_not_end_at_a_title_before_a_name() -> None:
    # Before: "… the first Ugandan female to hold the position is Hon [1]."
    assert sentences("The current leader is Hon. Winnie Kiiza. Dr. Sol Baptiste fixed the oven.") == [
        "The current leader is Hon. Winnie Kiiza.",
        "Dr. Sol Baptiste fixed the oven.",
    ]


def test_a_passage_compact_splits_between_two_parts_keeps_the_earlier_ones_in_view() -> None:
    from docsum.models.hops import SeenPassages

    seen = SeenPassages()
    first = "[1] (source: a.txt)\nThe journal is published by the Society.\n\n[2] (source: b.txt)\nThe Society was"
    seen.context("Who founded the publisher of the journal?", first)
    # compact cut passage 2 between two parts: the next one opens with it.
    second = "[2] (source: b.txt)\nfounded by Mara Quinn.\n\n[3] (source: c.txt)\nOther text."
    both = seen.context("Who founded the publisher of the journal?", second)
    assert "published by the Society" in both and "founded by Mara Quinn" in both
    # A question asked afresh (numbered from 1 again) starts afresh.
    again = seen.context("Who founded the publisher of the journal?", first)
    assert again == first


def test_a_name_opening_with_a_letter_outside_a_to_z_is_a_bridge() -> None:
    from docsum.models.hops import bridges_in

    # Before: a phrase had to open with A-Z, so "Żelazna Góra" was read as
    # "Góra" and "the Eastern Region of Østmark" gave no Østmark to follow.
    assert bridges_in("The choir moved from Harlow to Żelazna Góra, in the Eastern Region of Østmark.") == [
        "harlow",
        "zelazna gora",
        "eastern region of østmark",
        "østmark",
    ]


def test_a_sentence_opening_participle_is_no_bridge(tmp_path: Path) -> None:
    from docsum.models.hops import bridges_in

    # Before: "Founded" was a name, and a foundation's page "founded in
    # 1926 by Queen Ada" was kept as the other hop and quoted.
    assert "found" not in bridges_in("Founded in 1930 by George Jenkins, Quillmart is a grocery chain.")
    assert bridges_in("Kassel is a city on the Fulda River.") == ["kassel", "fulda river"]
    store = built_store(
        tmp_path,
        {
            "Quillmart.txt": "Founded in 1930 by George Jenkins, Quillmart is a grocery chain. "
            "Quillmart runs stores in four states.\n",
            "Harbor_Medical_Foundation.txt": "The Harbor Medical Foundation is a charity. "
            "It was founded in 1926 by Queen Ada, who founded two hospitals.\n",
        },
    )
    code, out, err = run("ask", "Who founded Quillmart?", "--store", store)
    assert code == 0, err
    assert "George Jenkins" in out and "Queen Ada" not in out


def test_a_name_most_candidates_mention_links_no_hop(tmp_path: Path) -> None:
    # Before: a church in Ohio that "stands tall" was kept as the other hop
    # of a question on a peak in Colorado, both "in the United States", and
    # led the answer.
    store = built_store(
        tmp_path,
        {
            "Humboldt_Peak.txt": "Humboldt Peak\n\nHumboldt Peak is a high mountain summit of the Sangre de Cristo Range in Colorado, "
            "United States. Humboldt Peak rises above the Wet Mountain Valley.\n",
            "Atwater_Church.txt": "Atwater Church\n\nThe Atwater Church was built in 1841 and stands tall over the village green. "
            "It is a church in Ohio, United States.\n",
            "Dunmore.txt": "Dunmore\n\nDunmore is a town in West Virginia, United States. Its mill has a tall chimney.\n",
            "Portland.txt": "Portland\n\nPortland is a community in Wisconsin, United States. Its grain elevator is tall.\n",
        },
    )
    code, out, err = run("ask", "How tall is Humboldt Peak?", "--store", store)
    assert code in (0, 5), err
    assert "Atwater" not in out and "Dunmore" not in out and "Portland" not in out


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("Berglund's sister Ingrid took his violin back to Uppsala wrapped in what?", "sealskin"),
        ("How many survivors were there in the town of Kvarby?", "1,200"),
    ],
)
def test_a_plain_question_shaped_like_a_chain_is_answered_where_one_sentence_states_it(
    tmp_path: Path, question: str, answer: str
) -> None:
    # Each question describes its subject ("Berglund's sister Ingrid", "the
    # town of Kvarby") and so reads as a chain, but one sentence holds what
    # it asks beside its names. Before: declined ("found no answer"), for no
    # chain of two documents could be made.
    life = (
        "Anders Berglund was a violinist from Lund who toured the courts of the north. "
        "He wrote four concertos and taught in Copenhagen for a decade. "
        "After his death his sister Ingrid took his violin back to Uppsala, wrapped in sealskin, in 1851. "
        "His letters were later sold at auction.\n"
    )
    flood = (
        "The flood of 1904 struck the river valley in April. "
        "Rescue teams reported only 1,200 survivors from the town of Kvarby, out of about 4,000 people. "
        "The valley was resettled within ten years.\n"
    )
    store = built_store(tmp_path, {"Anders_Berglund.txt": life, "Valley_flood.txt": flood})
    code, out, err = run("ask", question, "--store", store)
    assert code == 0, err
    assert answer in _first_sentence(out), out


def test_refine_answers_a_chained_question_from_a_later_passage_when_no_chain_forms() -> None:
    # Before: refine kept the first step's answer to any question shaped like
    # a chain unless a chain formed, so a later passage that states the
    # answer in one sentence was never read.
    from docsum.models.extractive import ExtractiveLLM

    question = "Where was the director of Glass Harbor born?"
    llm = ExtractiveLLM()
    existing = "Glass Harbor was filmed on a small island in the spring [1]."
    context = "[2] (source: b.txt)\nThe director of Glass Harbor was born in Westmark, a town on the coast."
    assert "born in Westmark" in llm.refine(question, existing, context)
