"""Abstention: when the documents do not hold an answer, docsum says so on
stdout (the abstention text only, no sources), exits 5 and names the reason,
for every retriever and engine: the embedding relevance floor, grounding of the
question's names offline, the LLM's "none of these", and an answer step (model
or offline engine) that declines. And `docsum eval --unanswerable`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
from fakeopenai import FakeOpenAI
from helpers import built_store, first_choice_then
from helpers import run_cli_parts as run

from docsum.lexical import sentences
from docsum.models.abstain import question_names, says_cannot_answer
from docsum.models.extractive import ExtractiveLLM
from docsum.models.prompts import ABSTENTION_TEXT
from docsum.query.retrieve import SummaryEntry, retrieve
from docsum.store.sqlite import Store

SAMPLE_DOCS = Path(__file__).resolve().parents[1] / "sample_data" / "docs"
SWALLOW = "What is the airspeed velocity of an unladen swallow?"


def assert_abstained(code: int, out: str, err: str, reason: str) -> None:
    assert code == 5, err
    assert out == ABSTENTION_TEXT + "\n"  # the text only: no answer, no "Sources:"
    assert "nothing to answer from" in err and reason in err


def test_offline_unrelated_question_abstains(offline_sample_store: Path) -> None:
    # Before: exit 0 and six sentences of railway minutes (scored 0.039).
    assert_abstained(*run("ask", SWALLOW, "--store", offline_sample_store), reason="")
    code, out, err = run("ask", SWALLOW, "--store", offline_sample_store, "--json")
    data = json.loads(out)
    assert code == 5 and data["abstained"] is True and data["status"] in ("empty", "not_satisfied")
    assert data["sources"] == [] and data["answer"] == "" and data["reason"]


@pytest.mark.parametrize("mode", ["compact", "refine", "tree_summarize", "simple_summarize"])
def test_every_text_mode_abstains_offline(offline_sample_store: Path, mode: str) -> None:
    code, out, err = run(
        "ask", "Which violinist premiered the oboe sonata?", "--store", offline_sample_store, "--mode", mode
    )
    assert_abstained(code, out, err, reason="")


def test_a_name_or_year_no_document_mentions_is_an_abstention(offline_sample_store: Path) -> None:
    # The bakery and the oven are in the documents; 1987 is not.
    code, out, err = run(
        "ask", "Who repaired the Vandermolen oven in 1987?", "--store", offline_sample_store, "--explain"
    )
    assert_abstained(code, out, err, reason="1987")
    assert "grounding:" in err


def test_answerable_question_still_answers_with_both_hops(offline_sample_store: Path) -> None:
    # The price is in minutes that never name the bakery: grounding keeps them.
    code, out, err = run(
        "ask",
        "How much did Brindle & Daughter pay for the oven, and when was the auction?",
        "--store",
        offline_sample_store,
    )
    assert code == 0, err
    assert "$1,850" in out and "14 September 2019" in out and "Sources:" in out


def test_top_k_is_a_maximum_not_a_quota(offline_sample_store: Path) -> None:
    entries = []
    with Store.open(offline_sample_store, create=False, readonly=True) as store:
        for d in store.list_documents(with_embeddings=True):
            entries.append(SummaryEntry(d.doc_id, d.path, d.summary, d.embedding, d.embedding_model, d.title))
    # Only the summaries that mention the oven share a word with the question.
    question = SWALLOW.rstrip("?") + " carrying an oven?"
    found = asyncio.run(retrieve("embedding", ExtractiveLLM(), question, entries, top_k=3, floor=None))
    sharing = [c for c in found.candidates if (c.score or 0) > 0]
    assert 0 < len(sharing) < 3 and found.chosen == sharing  # not padded to 3
    above_all = max(c.score or 0 for c in sharing) + 0.01
    found = asyncio.run(retrieve("embedding", ExtractiveLLM(), question, entries, top_k=3, floor=above_all))
    assert found.chosen == [] and "relevance floor" in found.notes[-1]


@pytest.mark.parametrize("retriever", ["fused", "bm25", "embedding"])
def test_min_score_sets_the_floor(offline_sample_store: Path, retriever: str) -> None:
    # "plasterwork" is in no document: no document holds the whole question.
    question = "When did the library reopen after the renovation of its plasterwork?"
    args = ("ask", question, "--store", offline_sample_store, "--json", "--retriever", retriever)
    code, out, err = run(*args, "--min-score", "0.99")
    assert code == 5 and json.loads(out)["abstained"] and "relevance floor of 0.99" in err
    code, out, err = run(*args, "--min-score", "0")
    assert code == 0, err
    assert run(*args, "--min-score", "1.5")[0] == 2


@pytest.mark.parametrize(
    "reply",
    [
        "The documents do not answer this.",
        "I cannot answer this question from the provided documents.",
        "The context does not mention an airspeed for swallows.",
    ],
)
@pytest.mark.parametrize("retriever", ["embedding", "llm", "hybrid"])
def test_a_model_that_declines_is_an_abstention(offline_sample_store: Path, reply: str, retriever: str) -> None:
    with FakeOpenAI(responder=first_choice_then(reply)) as fake:
        code, out, err = run(
            "ask",
            "When did the library reopen after the renovation?",
            "--store",
            offline_sample_store,
            "--base-url",
            fake.base_url,
            "--model",
            "fake-chat",
            "--retriever",
            retriever,
            "--no-stream",
        )
        prompts = [json.dumps(r.body) for r in fake.chat_requests()]
    assert_abstained(code, out, err, reason="found no answer")
    # The model was told how to decline.
    assert any(ABSTENTION_TEXT in p for p in prompts)


def test_a_streamed_decline_prints_no_sources(offline_sample_store: Path) -> None:
    with FakeOpenAI(responder=first_choice_then("The documents do not answer this.")) as fake:
        code, out, err = run(
            "ask",
            "When did the library reopen after the renovation?",
            "--store",
            offline_sample_store,
            "--base-url",
            fake.base_url,
            "--model",
            "fake-chat",
            "--stream",
        )
    assert code == 5 and "Sources:" not in out and out.strip() == ABSTENTION_TEXT


def test_llm_choosing_none_is_an_abstention(offline_sample_store: Path) -> None:
    with FakeOpenAI(responder=lambda body: '{"choices": []}') as fake:
        code, out, err = run(
            "ask",
            SWALLOW,
            "--store",
            offline_sample_store,
            "--base-url",
            fake.base_url,
            "--model",
            "fake-chat",
            "--retriever",
            "llm",
        )
    assert_abstained(code, out, err, reason="no document was chosen")


def test_an_empty_store_is_not_an_abstention(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert run("build", tmp_path / "empty", "--store", tmp_path / "empty.sqlite")[0] == 0
    code, out, err = run("ask", SWALLOW, "--store", tmp_path / "empty.sqlite")
    assert code == 5 and out == ""


@pytest.mark.parametrize(
    "reply, declines",
    [
        ("The documents do not answer this.", True),
        ("I don't know.", True),
        ("There is no information about swallows in the documents.", True),
        ("Not mentioned in the documents.", True),
        ("The bridge opened in 1901.", False),
        (
            "The report does not give a date, but the bridge opened after the flood of 1901, as the minutes say. " * 6,
            False,
        ),
        ("", False),
    ],
)
def test_says_cannot_answer(reply: str, declines: bool) -> None:
    assert says_cannot_answer(reply) is declines


@pytest.mark.parametrize(
    "question, names",
    [
        ("How much did Brindle & Daughter pay for the oven?", ["brindl", "daughter"]),
        ("What is the airspeed velocity of an unladen swallow?", []),
        ("In Q1 2023, how did Microsoft's operating expenses change?", ["q1 2023", "microsoft"]),
        ("What did NVIDIA report in the Q3 2023 10-Q?", ["nvidia", "q3 2023", "10-q"]),
        ("Where was Harris W. Fawell born?", ["harri w fawell"]),
        ("What legal proceedings are disclosed in these 10-Qs?", ["10-q"]),
        # A code name's plural and an acronym's are the name ("XR7s", "DVDs");
        # a decade is not its year.
        ("How many XR7s were built?", ["xr7"]),
        ("Which DVDs did Vell Studios release in the 1990s?", ["dvd", "vell studio", "1990s"]),
        ("Can trends be seen in Intel's Data Center Group revenue?", ["intel", "data center group"]),
        ("Who composed Aschenbrödel?", ["aschenbrodel"]),
        # A full date is one name, either way round; a year named apart stays.
        ("What were Apple's net sales for the quarter ended July 1, 2023?", ["appl", "july 1 2023"]),
        ("What was sold on 14 September 2019?", ["september 14 2019"]),
        ("How did July 1, 2023 compare with 2023 as a whole?", ["july 1 2023", "2023"]),
    ],
)
def test_question_names(question: str, names: list[str]) -> None:
    assert question_names(question) == names


# --------------------------------------------------------------------------- eval --unanswerable


def test_eval_unanswerable_reports_answer_and_abstention_rates(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "ferry.txt").write_text(
        "The Northbank ferry crosses the river every thirty minutes. Tickets cost two dollars.\n"
    )
    (folder / "bakery.txt").write_text("Quillon Bakery sells rye bread. The Quillon oven bakes 96 loaves at once.\n")
    (folder / "garden.txt").write_text("The Orvale garden grows tomatoes and beans. Volunteers water it on Sundays.\n")
    questions = tmp_path / "q.jsonl"
    rows = [
        {
            "id": "a",
            "question": "How often does the Northbank ferry cross the river?",
            "gold_docs": ["ferry.txt"],
            "kind": "single",
        },
        {
            "id": "b",
            "question": "How many loaves does the Quillon oven bake?",
            "gold_docs": ["bakery.txt"],
            "kind": "single",
        },
        {"id": "c", "question": "What does the Orvale garden grow?", "gold_docs": ["garden.txt"], "kind": "multi"},
    ]
    questions.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    store = tmp_path / "store.sqlite"
    assert run("build", folder, "--store", store)[0] == 0
    code, out, err = run("eval", questions, "--store", store, "--unanswerable", "--json", "--details")
    assert code == 0, err
    data = json.loads(out)
    by_kind = data["abstention"]["by_kind"]
    assert by_kind["all"] == {"n": 3, "answer_rate": 1.0, "abstention_rate": 1.0}
    assert by_kind["single"]["n"] == 2 and by_kind["multi"]["n"] == 1
    assert data["metrics"]["summary"]["all"]["recall"] == 1.0  # beside the recall figures
    detail = data["questions"][0]["abstention"]
    assert detail["normal"]["status"] == "ok" and detail["hidden_gold"]["abstained"] is True
    code, out, err = run("eval", questions, "--store", store, "--unanswerable")
    assert code == 0 and "abstention rate" in out


def test_eval_counts_questions_of_kind_unanswerable_as_declined_or_not(tmp_path: Path) -> None:
    """A question of kind "unanswerable" asks of a document that does not
    answer it: declining is right, answering is not, and the report states
    both sides of the trade-off (answerable declined, unanswerable declined)."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "ferry.txt").write_text(
        "The Northbank ferry crosses the river every thirty minutes. Tickets cost two dollars.\n"
    )
    (folder / "garden.txt").write_text("The Orvale garden grows tomatoes and beans. Volunteers water it on Sundays.\n")
    rows = [
        {"id": "a", "question": "How often does the Northbank ferry cross the river?", "gold_docs": ["ferry.txt"]},
        # Nothing in the store names a submarine: declined.
        {
            "id": "u1",
            "question": "Who captains the Zentrix submarine?",
            "gold_docs": ["ferry.txt"],
            "kind": "unanswerable",
        },
        # On the garden's subject, and answered from it: counted as not declined.
        {
            "id": "u2",
            "question": "What does the Orvale garden grow?",
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
    rates = json.loads(out)["abstention"]
    assert rates["by_kind"]["unanswerable"] == {"n": 2, "answer_rate": 0.5, "abstention_rate": 0.5}
    assert rates["answerable_declined"] == 0.0 and rates["unanswerable_declined"] == 0.5
    assert rates["hidden_gold_declined"] == 1.0  # the answerable one, asked with ferry.txt hidden
    code, out, err = run("eval", questions, "--store", store, "--unanswerable")
    assert code == 0 and "declined: answerable 0.000, unanswerable 0.500" in out


@pytest.mark.parametrize("retriever", ["fused", "bm25", "embedding"])
def test_hidden_documents_are_hidden_from_every_retriever(offline_sample_store: Path, retriever: str) -> None:
    from docsum.query.corpus import HiddenDocuments, StoreCorpus
    from docsum.store.opening import open_store

    question = "When did the library reopen after the renovation?"
    with open_store(offline_sample_store, create=False, readonly=True) as store:
        corpus = StoreCorpus.beside(store)
        found = asyncio.run(retrieve(retriever, ExtractiveLLM(), question, corpus, top_k=3))
        best = found.chosen[0]
        assert best.path == "library_renovation_fact_sheet.pdf"
        hidden = HiddenDocuments(corpus, frozenset({best.doc_id}))
        again = asyncio.run(retrieve(retriever, ExtractiveLLM(), question, hidden, top_k=3))
    assert best.doc_id not in {c.doc_id for c in again.candidates}
    if again.chosen:  # the others still compete, ranked as if the library had never been built
        assert again.chosen[0].path != best.path


# --------------------------------------------------------------------------- --filter


@pytest.mark.parametrize("mode", ["compact", "refine"])
def test_filter_keeps_the_passage_with_the_answer(offline_sample_store: Path, mode: str) -> None:
    question = "How much did Brindle & Daughter pay for the oven, and when was the auction?"
    code, out, err = run("ask", question, "--store", offline_sample_store, "--filter", "--mode", mode)
    assert code == 0, err
    assert "$1,850" in out and "14 September 2019" in out


def test_filter_with_nothing_satisfying_prints_only_the_abstention(offline_sample_store: Path) -> None:
    # Before: exit 5, yet "Sources:" and the railway minutes on stdout.
    # One word of nine ("oven") is in the documents: the bakery's history is
    # chosen (no floor), and no passage of it satisfies the question.
    question = "What is the airspeed velocity, wingspan and migration route of an unladen swallow near the oven?"
    code, out, err = run(
        "ask", question, "--store", offline_sample_store, "--filter", "--min-score", "0", "--retriever", "embedding"
    )
    assert_abstained(code, out, err, reason="structured answer filtering")


# --------------------------------------------------------------------------- unreadable text


@pytest.mark.parametrize(
    "text, verdict",
    [
        ("The ferry crosses the river every thirty minutes and tickets cost two dollars. " * 3, None),
        (
            ":., dP . . i, . . . ? . i ' » 14 e. : .. Pr . srN • ki ., , LIL k 1 sa s .. % , 2 Y. . g . %Z.. , I ' I .4 i \\ ... i —. 41.",
            "scattered letters",
        ),
        ("%% ## ** // ;; :: .. -- ** %% ## 12 ** .. ;; :: ## %% ** // ;; :: .. -- ## ** %% ;; :: ..", "symbols"),
        (
            "/g145/g137/g155/g3/g4/g133/g133/g135/g146/g150/g131/g144/g133/g135/g3/g16/g145/g134/g135/g142/g3 " * 4,
            "glyph codes",
        ),
        ("ࠬᎈΪ९ – 31 – ڦ൲ࠬᎈ ࡈϋܓdʿ࿚Їɚཧཧɓϋɤɚ˜ɧɤɓ˚˟ɘࡈ˜͉ණྠԨೌତ܄ږ˒ᕸሪʘ࿛ሪf ಂʹהяΐ΢ಂ஬Υߒʹה׸ცʘ௰ЭڭᗇږܲږdϾ͉ණྠʘ܄˒඲ᎇܵڭࣛ", "mojibake"),
        ("本公司於二零二三年發行新股，所得款項用於擴充產能。董事會建議派發末期股息每股零點五元。", None),
        ("日本語のテキストは漢字とひらがなとカタカナを混ぜて書きます。東京は日本の首都です。", None),
        ("مرحبا بكم في مكتبة المدينة، نفتح أبوابنا كل يوم من الساعة التاسعة صباحا حتى المساء.", None),
    ],
)
def test_unreadable_text_is_recognised(text: str, verdict: str | None) -> None:
    from docsum.ingest.textquality import garbage_reason

    reason = garbage_reason(text)
    if verdict is None:
        assert reason is None
    else:
        assert reason is not None and reason.startswith("unreadable text") and verdict in reason


def test_unreadable_file_fails_with_its_reason_and_keeps_its_previous_summary(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    page = folder / "scan.txt"
    page.write_text("The Orvale garden grows tomatoes and beans. Volunteers water it on Sundays.\n")
    store = tmp_path / "store.sqlite"
    assert run("build", folder, "--store", store)[0] == 0
    before = json.loads(run("show", "scan.txt", "--store", store, "--json")[1])["summary"]
    page.write_text(
        ":., dP . . i, . . . ? . i ' » 14 e. : .. Pr . srN • ki ., , LIL k 1 sa s .. % , 2 Y. . g . %Z.. , I ' I .4 i\n"
    )
    code, out, err = run("build", folder, "--store", store)
    assert code == 3
    assert "docsum: failed scan.txt: unreadable text, not summarized: mostly" in err
    assert json.loads(run("show", "scan.txt", "--store", store, "--json")[1])["summary"] == before
    code, out, err = run("build", folder, "--store", store, "--dry-run")
    assert "unreadable text" in out


def test_a_document_holding_a_sliver_of_what_the_best_holds_is_not_chosen(offline_sample_store: Path) -> None:
    # The newsletter and the water report share only "pay" with the question:
    # before, they filled --top-k beside the bakery and the minutes, and a
    # sentence about the honey fair's surplus came second in the answer.
    code, out, err = run(
        "ask", "How much did Brindle & Daughter pay for the oven?", "--store", offline_sample_store, "--json"
    )
    assert code == 0, err
    data = json.loads(out)
    assert {d["path"] for d in data["documents"]} == {
        "brindle_and_daughter_bakery.md",
        "railway_trust_minutes_2019-10.txt",
    }
    assert sentences(data["answer"])[0].startswith("Lot 37") and "$1,850" in data["answer"]


# --------------------------------------------------------------------------- grounding


def test_the_first_quarter_of_2023_is_q1_2023() -> None:
    assert "q1 2023" in question_names("In the first quarter of 2023, how much did Apple spend on research?")


def _keys(name: str, summary: str, body: str):  # type: ignore[no-untyped-def]
    from docsum.models.abstain import document_keys

    return document_keys(name, name, summary, body)


def test_a_passing_mention_in_a_long_document_is_not_what_it_is_about() -> None:
    from docsum.models.abstain import missing_names

    filler = "Revenue grew in every segment and the company opened new data centers. " * 1500  # 18,000 words
    # Intel's filing names Apple four times as a customer: not a source on Apple.
    intel = _keys(
        "2022_Q3_INTC.txt", "Intel's quarterly report.", filler + " Apple bought chips. Apple paid. Apple. Apple."
    )
    assert missing_names(["appl"], intel) == ["appl"]
    # Microsoft's own filing names Surface six times: a side name of a document
    # about Microsoft.
    msft = _keys("2023_Q1_MSFT.txt", "Microsoft's quarterly report.", filler + " Surface revenue fell. Surface." * 3)
    assert missing_names(["microsoft", "surfac"], msft) == []
    # A 2023 filing compares itself with the third quarter of 2022: that is
    # not what it is about.
    q3_2023 = _keys(
        "2023_Q3_NVDA.txt",
        "NVIDIA's revenue rose from the third quarter of 2022.",
        filler + " Up from the third quarter of 2022." * 3,
    )
    assert missing_names(["nvidia", "q3 2022"], q3_2023) == ["q3 2022"]
    assert missing_names(["nvidia", "q3 2023"], q3_2023) == []
    # ... however often it does: the file is named for its own period.
    often = _keys(
        "2023_Q3_INTC.txt",
        "Intel's quarterly report.",
        "Q3 2023 revenue fell from Q3 2022. Up on Q3 2022 in Q3 2023. " * 50,
    )
    assert missing_names(["intel", "q3 2022"], often) == ["q3 2022"]
    # Being about the period does not make a document about the subject.
    nvidia_q1 = _keys(
        "2023_Q1_NVDA.txt", "NVIDIA's quarterly report.", filler + " Microsoft bought GPUs. Microsoft. Microsoft."
    )
    assert missing_names(["q1 2023", "microsoft"], nvidia_q1) == ["microsoft"]


# --------------------------------------------------------------------------- what the chosen documents hold together


def _entries(summaries: dict[str, str]) -> list[SummaryEntry]:
    return [SummaryEntry(name, name, text) for name, text in summaries.items()]


# Each document shares a common word or two with the question; none holds
# "miller", "ryan", "omaha" or "beach", which no document mentions.
_SCATTERED = {
    "museum.txt": "The museum keeps private collections; a retired captain guides visitors.",
    "thriller.txt": "A retired captain of the guard is saving a singer from an attacker.",
    "grocer.txt": "The grocer is saving money by buying flour from a private mill.",
    "bank.txt": "A private bank offers saving accounts to families.",
    "ferry.txt": "The ferry captain sails twice a day.",
    "school.txt": "A private school opened a new library.",
    "club.txt": "The saving club meets on Mondays.",
    "orchard.txt": "Apples ripen in the orchard in the autumn sun.",
    "harbour.txt": "Boats leave the harbour at dawn for the fishing grounds.",
}
_RYAN = "who is captain miller in saving private ryan at omaha beach"


@pytest.mark.parametrize("retriever", ["fused", "bm25"])
def test_documents_that_each_share_a_word_but_together_miss_the_question_are_not_chosen(retriever: str) -> None:
    from docsum.models.abstain import COVERAGE_FLOOR

    found = asyncio.run(
        retrieve(retriever, ExtractiveLLM(), _RYAN, _entries(_SCATTERED), top_k=3, floor=COVERAGE_FLOOR)
    )
    # Each document alone passes the per-document floor (before, all three
    # were handed on and quoted) ...
    assert all((c.relevance or 0) >= COVERAGE_FLOOR for c in found.candidates[:3])
    # ... but between them they hold too little of the question.
    assert found.chosen == [] and "together hold" in found.notes[-1]
    # Without a floor (--min-score 0) nothing is held back.
    assert (
        len(asyncio.run(retrieve(retriever, ExtractiveLLM(), _RYAN, _entries(_SCATTERED), top_k=3, floor=0.0)).chosen)
        == 3
    )


def test_documents_that_together_hold_the_question_are_chosen() -> None:
    from docsum.models.abstain import COVERAGE_FLOOR

    # The two hops of a question, each holding half of it.
    summaries = dict(
        _SCATTERED,
        **{
            "ryan.txt": "Saving Private Ryan is a war film; Captain Miller lands on Omaha Beach.",
        },
    )
    found = asyncio.run(retrieve("fused", ExtractiveLLM(), _RYAN, _entries(summaries), top_k=3, floor=COVERAGE_FLOOR))
    assert found.chosen and found.chosen[0].path == "ryan.txt"


def test_joint_coverage_counts_a_word_once_any_document_holds_it() -> None:
    from docsum.store.evidence import DocumentEvidence

    evidence = DocumentEvidence.from_texts(["a", "b", "c"], ["red apples", "green pears", "blue sky"], [[], [], []])
    question = "red pears"
    alone = evidence.coverage(question, np.asarray([0, 1]))
    assert all(0.4 < share < 0.6 for share in alone)
    assert evidence.joint_coverage(question, np.asarray([0, 1])) == pytest.approx(1.0)
    assert evidence.joint_coverage(question, np.asarray([2])) == 0.0
    assert evidence.joint_coverage(question, np.asarray([], dtype=np.int64)) == 0.0


def test_hidden_documents_count_as_absent_in_the_question_weights() -> None:
    # docsum eval --unanswerable asks as if the gold documents were not in the
    # store: a word only they hold weighs like a word no document holds.
    from docsum.query.corpus import HiddenEvidence
    from docsum.store.evidence import DocumentEvidence

    evidence = DocumentEvidence.from_texts(
        ["gold", "x", "y", "z"], ["jousting maryland state", "state capital", "state flag", "apples"], [[], [], [], []]
    )
    hidden = HiddenEvidence(evidence, frozenset({"gold"}))
    without = DocumentEvidence.from_texts(["x", "y", "z"], ["state capital", "state flag", "apples"], [[], [], []])
    question = "jousting state"
    # Before: the gold document still counted, "jousting" weighed as a word one
    # document holds and "state" as one three of four hold.
    assert hidden.coverage(question, np.asarray([1, 2])) == pytest.approx(
        without.coverage(question, np.asarray([0, 1]))
    )
    assert hidden.joint_coverage(question, np.asarray([1, 2])) == pytest.approx(
        without.joint_coverage(question, np.asarray([0, 1]))
    )


def test_a_name_opening_with_what_a_document_is_about_is_about_it_too() -> None:
    from docsum.models.abstain import missing_names, question_names

    # Before: "How did Microsoft Cloud revenue change in the first quarter of
    # fiscal year 2023?" found no filing about "Microsoft Cloud" (a product
    # line is named less often than a long filing's words ask) and was not
    # answered, exit 5.
    names = question_names("How did Microsoft Cloud revenue change in the first quarter of 2023?")
    assert names == ["microsoft cloud", "q1 2023"]
    filler = "Revenue grew in every segment and the company opened new data centers. " * 1500
    msft = _keys(
        "2023_Q1_MSFT.txt",
        "A quarterly report: Microsoft Corporation.",
        filler + " Microsoft Cloud revenue increased 22%. Microsoft Cloud gross margin rose.",
    )
    assert missing_names(names, msft) == []
    # A document about something else that names it twice is still no source.
    intel = _keys(
        "2023_Q1_INTC.txt",
        "A quarterly report: Intel Corporation.",
        filler + " Microsoft Cloud bought chips. Microsoft Cloud paid.",
    )
    assert missing_names(names, intel) == ["microsoft cloud"]


def test_the_owner_of_what_is_asked_must_be_what_a_source_is_about() -> None:
    from docsum.models.abstain import missing_names, subject_names

    question = "Can any trends be identified in Apple's Services segment revenue over the reported periods?"
    assert question_names(question) == ["appl", "servic"] and subject_names(question) == {"appl"}
    filler = "Revenue grew in every segment and the company opened new data centers. " * 1500
    # Intel's filing, about services of its own, names Apple seven times
    # (before: it covered both names and was quoted as a source on Apple).
    intel = _keys("2022_Q3_INTC.txt", "Intel's quarterly report.", filler + " Apple. " * 7 + " Our services grew." * 40)
    assert missing_names(question_names(question), intel, subject_names(question)) == ["appl"]
    # A side name that is not the owner may still be mentioned in passing.
    msft = _keys("2023_Q1_MSFT.txt", "Microsoft's quarterly report.", filler + " Surface revenue fell. Surface." * 3)
    assert (
        missing_names(["microsoft", "surfac"], msft, subject_names("How did Microsoft's Surface revenue change?")) == []
    )


def test_a_year_may_be_one_hops_but_a_period_must_sit_with_every_name(tmp_path: Path) -> None:
    from docsum.models.abstain import is_period

    store = built_store(
        tmp_path,
        {
            "judiciary_act.txt": "The Judiciary Act of 1869 fixed the Supreme Court at nine justices. "
            "The Judiciary Act of 1869 also created nine circuit judgeships.\n",
            "james_glisson.txt": "James Glisson was born in Jackson County, Florida. "
            "Glisson later studied at Palmer College.\n",
        },
    )
    # 1869 is one hop's, as "James Glisson" is the other's. Before: "no one
    # document holds 1869 with every name", and an abstention.
    code, out, err = run(
        "ask", "Where was James Glisson born, in the country that passed the Judiciary Act of 1869?", "--store", store
    )
    assert code == 0, err
    assert "Jackson County" in out
    # A quarter, a half or a fiscal year is what a report is for: it must
    # still sit in one document with every name (NVIDIA's Q3 2023 filing that
    # names Microsoft is no source on Microsoft's Q3 2023).
    assert is_period("q3 2023") and is_period("fy2024") and is_period("h1")
    assert not is_period("1869") and not is_period("26th") and not is_period("2010")


def test_names_joined_by_or_are_alternatives(tmp_path: Path) -> None:
    from docsum.models.abstain import either_names

    question = "Are there trends in Acme's Data Center Group or IoT segment revenues?"
    assert either_names(question, question_names(question)) == [frozenset({"data center group", "iot"})]
    assert either_names("Who founded Acme and Widget?", ["acme", "widget"]) == []
    # The filing calls the first segment by its newer name: it is about the
    # IoT segment, one of the two asked for. Before: "missing: data center
    # group" and an abstention.
    filing = (
        "Acme Corporation quarterly report. Acme sells chips.\n\n"
        "IoT segment revenue was $1,200 million in the quarter, up from $1,100 million a year ago.\n"
        "Data Center and AI revenue was $3,800 million in the quarter. Acme expects IoT growth to slow.\n"
    )
    store = built_store(tmp_path, {"acme_q3.txt": filing})
    code, out, err = run("ask", question, "--store", store)
    assert code == 0, err
    assert "$1,200 million" in out


def test_a_question_naming_a_date_is_answered_from_the_filing_that_names_it(tmp_path: Path) -> None:
    # Before: "July 1, 2023" was the names "1" and "2023", which every filing
    # of the year holds: the filing for the quarter ended April 1 was kept
    # beside July's (Apple's iPhone answer quoted three quarters' rows).
    store = built_store(
        tmp_path,
        {
            name: f"Acme Corporation quarterly report for the quarter ended {ended}.\n\n"
            f"Boat sales were ${sales} million in the quarter ended {ended}, as Acme sold more boats in 2023.\n"
            f"Acme sold boats in 2023 and expects to sell more boats in the quarter after {ended}.\n"
            for name, ended, sales in (
                ("acme_q2.txt", "April 1, 2023", "4,100"),
                ("acme_q3.txt", "July 1, 2023", "4,700"),
                ("acme_q4.txt", "September 30, 2023", "5,200"),
            )
        },
    )
    for written in ("July 1, 2023", "1 July 2023"):  # either way round
        question = f"What were Acme's boat sales in the quarter ended {written}?"
        code, out, err = run("ask", question, "--store", store, "--explain")
        assert code == 0, err
        assert "$4,700 million" in out
        assert "needs acme, july 1 2023" in err and "grounding: 3 → 1 documents" in err, err


def test_a_question_in_lower_case_names_the_documents_it_spells(tmp_path: Path) -> None:
    # Before: "what state is directly west of north dakota" named nothing (no
    # capitals), and the answer led with a township in Illinois that shares
    # "north" and "west" with it.
    store = built_store(
        tmp_path,
        {
            "North_Dakota.txt": "North Dakota is a state in the upper Midwest of the United States.\n\n"
            "South Dakota is to the south, Montana is to the west, and Manitoba is to the north of the state.\n",
            "Metamora_Township.txt": "Metamora Township, Township 27 North, Range 2 West, "
            "is located in Woodford County, Illinois.\n\n"
            "The township is directly west of the county seat and north of the state highway.\n",
        },
    )
    code, out, err = run("ask", "what state is directly west of north dakota", "--store", store)
    assert code == 0, err
    assert "Montana is to the west" in out
    assert "Metamora" not in out and "Illinois" not in out


def test_a_one_word_name_is_not_the_word_a_summary_writes_in_lower_case() -> None:
    from docsum.models.abstain import document_keys, missing_names

    # Before: Nigeria's summary ("The name was taken from the Niger River")
    # made it a document about "Taken", and "Who directed Taken?" was
    # answered with that sentence.
    text = "The name was taken from the Niger River running through the country. Nigeria is in West Africa."
    nigeria = document_keys("n", "Nigeria.txt Nigeria", text, text)
    assert missing_names(["taken"], nigeria) == ["taken"]
    film = "Taken is a 2008 action film. A retired agent tracks the men who took his daughter."
    assert missing_names(["taken"], document_keys("t", "Taken_film.txt Taken film", film, film)) == []
    # Written with a capital anywhere in it, the word may be the name.
    review = "Taken was a hit in 2008. Critics said the plot was taken from older thrillers."
    assert missing_names(["taken"], document_keys("r", "review.txt review", review, review)) == []


def test_a_fiscal_quarter_is_found_in_the_filing_that_names_it(tmp_path: Path) -> None:
    # Before: Microsoft's filing for the quarter ended September 30, 2023
    # names "the first quarter of fiscal year 2024" 8 times in 29,000 words,
    # too seldom to be about it, and "Q1 FY2024" was never read as that
    # quarter: both questions below abstained.
    filler = "The company sells software and services to businesses and consumers around the world. " * 800
    store = built_store(
        tmp_path,
        {
            "2023_Q3_ACME.txt": "Acme Corporation quarterly report for the quarter ended September 30, 2023.\n\n"
            + "Revenue was $5,600 million in the first quarter of fiscal year 2024. "
            + filler
            + "Margins grew in the first quarter of fiscal year 2024, and Acme hired in the first quarter of "
            "fiscal year 2024.\n",
            "2023_Q2_ACME.txt": "Acme Corporation quarterly report for the quarter ended June 30, 2023.\n\n"
            + "Revenue was $5,100 million in the fourth quarter of fiscal year 2023. "
            + filler
            + "Margins fell in the fourth quarter of fiscal year 2023.\n",
        },
    )
    for question in (
        "What was Acme's revenue in Q1 FY2024?",
        "What was Acme's revenue in the first quarter of fiscal year 2024?",
    ):
        code, out, err = run("ask", question, "--store", store)
        assert code == 0, err
        assert "$5,600 million" in out and "$5,100 million" not in out


def test_a_name_in_capitals_is_said_by_the_words_it_abbreviates(tmp_path: Path) -> None:
    # Before: "GHC" was a name no document held as a word, so the article on
    # Glass Harbor City, which writes the city's name in full, was declined
    # ("missing: ghc").
    store = built_store(
        tmp_path,
        {
            "Glass_Harbor_City.txt": "Glass Harbor City is a port on the western coast.\n\n"
            "The Westmark Gulls play their home games at Lantern Field, north of Glass Harbor City.\n"
            "The city's harbor freezes in the coldest winters.\n",
            "Coffee.txt": "Coffee is a brewed drink prepared from roasted coffee beans.\n",
        },
    )
    code, out, err = run("ask", "At which field do the Westmark Gulls play in GHC?", "--store", store)
    assert code == 0, err
    assert "Lantern Field" in out
    from docsum.models.abstain import acronyms

    # A leading "The" is not the name's; small linking words are skipped.
    assert acronyms("The Glass Harbor Times said so, as did the Bank of Westmark.") == ["ght", "bw"]


def test_an_acronym_the_text_writes_is_counted_as_written() -> None:
    # The spelled-out words count for an acronym only where the text never
    # writes it: "Executable and Linkable Format (ELF)" states ELF once, and
    # counting it twice made the page "about" ELF by its mentions alone.
    from docsum.models.abstain import TextKeys

    assert TextKeys("The Executable and Linkable Format (ELF) is a file format.").count("elf") == 1
    assert TextKeys("The Executable and Linkable Format is a file format.").count("elf") == 1
    assert TextKeys("An executable file format.").count("elf") == 0
