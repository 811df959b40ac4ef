"""Which sentence an offline answer leads with for questions about people and
places: a role asked with a noun and answered with another word ("spouse",
"the second wife of"), a "where" answered by a place, a name written with and
without its apostrophe."""

from __future__ import annotations

from pathlib import Path

from helpers import run_cli_parts as run

from docsum.models.abstain import question_names
from docsum.models.extractive import ExtractiveLLM


def _lead(question: str, *sentences: str) -> str:
    context = "[1] (source: a.txt)\n" + " ".join(sentences)
    return ExtractiveLLM().answer(question, context).split(" [1]", 1)[0]


def test_a_role_asked_with_a_noun_finds_the_sentence_that_says_it_otherwise() -> None:
    # Before: "spouse" met no word of either sentence; the longer one, which
    # repeats the name, led, and the answer never named the husband.
    lead = _lead(
        "What is Ada Brennan's spouse's name?",
        "Ada Brennan (1898 – 1971) was a jazz pianist, composer, arranger, singer and bandleader from Memphis.",
        "She was the second wife of Otto Lind, with whom she recorded many songs in the 1920s.",
        "Ada Brennan moved to Chicago in 1918 and worked in a music store before joining a band.",
    )
    assert lead.startswith("She was the second wife of Otto Lind"), lead
    lead = _lead(
        "Who was the main director of Glass Harbor?",
        "The novel Glass Harbor tells the story of its main character, a lighthouse keeper on a small island.",
        "Glass Harbor is a 2014 drama film directed by Mara Quinn and starring two newcomers.",
        "The film Glass Harbor was shot on the island in the spring of 2013.",
    )
    assert lead.startswith("Glass Harbor is a 2014 drama film directed by Mara Quinn"), lead


def test_a_where_question_leads_with_the_sentence_naming_a_place() -> None:
    # Before: the sentence repeating "coffee" most led; the one saying where
    # it is grown came third, past the answer's first fifty words.
    lead = _lead(
        "Where does most coffee come from?",
        "Coffee is a brewed drink prepared from roasted coffee beans, which are the seeds of coffee berries.",
        "Coffee beans are roasted to varying degrees, depending on the desired coffee flavor.",
        "Coffee plants are cultivated in over 70 countries, mostly in Brazil, Vietnam and Colombia.",
    )
    assert lead.startswith("Coffee plants are cultivated in over 70 countries"), lead


def test_a_name_written_with_diacritics_answers_who_and_where() -> None:
    # Before: the person and place patterns read capitals and small letters
    # as A-Z and a-z, so "Józef Ważny" and "in Łęczyca" were no name; a
    # sentence naming an ASCII-spelt critic led "who", and one repeating the
    # question's words led "where".
    lead = _lead(
        "Who did Vell hear play the cello in 1829?",
        "Back home that year, Vell heard Józef Ważny play the cello, and wrote a set of variations for him.",
        "Critic John Harlow writes that in 1829 Vell played often, and that he heard many players in the city.",
    )
    assert lead.startswith("Back home that year, Vell heard Józef Ważny"), lead
    lead = _lead(
        "Where was Ada Vell born?",
        "Ada Vell was born and grew up in a small town, and was born a second time, she said, on the stage.",
        "Ada Vell was born in Łęczyca, a town west of the capital.",
    )
    assert lead.startswith("Ada Vell was born in Łęczyca"), lead


def test_a_when_question_reads_a_year_before_1500_as_a_date() -> None:
    # Before: the date pattern read years from 1500 only, so "in 1413" was no
    # date; a sentence with a later year and fewer of the question's words led.
    lead = _lead(
        "When did the Westmark court send a second embassy to the abbot?",
        "The first embassy of the Westmark court came in 1407, but the court sent a second embassy in 1413.",
        "Chroniclers wrote in 1640 that the abbot had long been honoured at court.",
    )
    assert lead.startswith("The first embassy of the Westmark court came in 1407"), lead


def test_a_name_without_its_apostrophe_finds_the_document_that_writes_it(tmp_path: Path) -> None:
    # Before: "Tai Chi-tao" did not meet "Tai Chi-t'ao", grounding found no
    # document about the name, and the question was declined (exit 5).
    assert question_names("What country is Tai Chi-tao from?") == question_names("What country is Tai Chi-t'ao from?")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "dai.txt").write_text(
        "Dai Jitao or Tai Chi-t'ao (1891 – 1949) was a Chinese journalist and an early Kuomintang member.\n"
    )
    (docs / "tea.txt").write_text("Green tea is grown on the hills of Zhejiang and picked in spring.\n")
    store = tmp_path / "s.sqlite"
    assert run("build", docs, "--store", store, "-q")[0] == 0
    code, out, err = run("ask", "What country is Tai Chi-tao from?", "--store", store)
    assert code == 0, err
    assert out.startswith("Dai Jitao or Tai Chi-t'ao") and "dai.txt" in out
