"""`docsum eval`: retrieval metrics on a corpus with known answers, the chunk
baseline, the per-kind split, and answer grading (token overlap offline, an
LLM judge against a server)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fakeopenai import FakeOpenAI, Reply
from helpers import run_cli

from docsum.errors import ConfigError
from docsum.query.evaluate import load_questions, rank_documents_by_nodes, retrieval_metrics

DOCS = {
    "volcano.txt": "Mount Keltra is a volcano on Orvin Island. It last erupted in 1911 and its crater lake is 240 metres deep.",
    "glacier.txt": "The Pellan Glacier retreats about 30 metres a year. Its meltwater feeds the Sorrow River in summer.",
    "lighthouse.md": "# Cape Dunmore lighthouse\n\nThe lighthouse keeper, Ida Frane, lit the lamp every night from 1952 to 1980.",
    "orchard.md": "The Halvorsen orchard grows forty varieties of apple. Its cider press was bought in 1987.",
    "ferry.txt": "The Orvin ferry crosses to the mainland twice a day. A return ticket costs 18 crowns.",
    "bridge.txt": "The Sorrow River bridge was rebuilt in 1999 after a flood. It is 120 metres long.",
}
QUESTIONS = [
    {
        "id": "v1",
        "question": "How deep is the crater lake of Mount Keltra volcano?",
        "answer": "240 metres",
        "gold_docs": ["volcano.txt"],
        "kind": "single",
    },
    {
        "id": "l1",
        "question": "Who was the keeper of the Cape Dunmore lighthouse?",
        "answer": "Ida Frane",
        "gold_docs": ["lighthouse.md"],
        "kind": "single",
    },
    {
        "id": "o1",
        "question": "How many apple varieties does the Halvorsen orchard grow?",
        "answer": "forty varieties",
        "gold_docs": ["orchard.md"],
        "kind": "single",
    },
    {
        "id": "m1",
        "question": "Which river does the Pellan Glacier feed, and when was the bridge over that Sorrow River rebuilt?",
        "answer": "the Sorrow River; rebuilt in 1999",
        "gold_docs": ["glacier.txt", "bridge.txt"],
        "kind": "multi",
    },
    {
        "id": "m2",
        "question": "What does the Orvin ferry cost, and when did the volcano on Orvin Island last erupt?",
        "answer": "18 crowns; 1911",
        "gold_docs": ["ferry.txt", "volcano.txt"],
        "kind": "multi",
    },
]


@pytest.fixture()
def corpus(tmp_path: Path) -> tuple[Path, Path, Path]:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    questions = tmp_path / "questions.jsonl"
    questions.write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n", encoding="utf-8")
    store = tmp_path / "store.sqlite"
    built = run_cli("build", docs, "--store", store, "-q")
    assert built.code == 0, built
    return docs, questions, store


def test_metrics_by_hand() -> None:
    ranking = ["a", "b", "c", "d"]
    m = retrieval_metrics(ranking, {"b", "d"}, k=3).as_dict()
    assert m == {"recall": 0.5, "precision": pytest.approx(1 / 3), "mrr": 0.5, "all_found": 0.0}
    m = retrieval_metrics(ranking, {"a"}, k=1).as_dict()
    assert m == {"recall": 1.0, "precision": 1.0, "mrr": 1.0, "all_found": 1.0}
    assert retrieval_metrics([], {"a"}, k=3).recall == 0.0


def test_documents_are_ranked_by_their_best_node() -> None:
    owners = ["x", "x", "y", "z"]
    assert rank_documents_by_nodes(owners, np.array([0.1, 0.9, 0.5, 0.0])) == ["x", "y"]


def test_bad_question_files_are_usage_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "no gold"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="bad.jsonl:1"):
        load_questions(bad)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="no questions"):
        load_questions(empty)
    assert run_cli("eval", tmp_path / "missing.jsonl").code == 2
    # A byte-order mark (Windows editors write one) is not a bad first line.
    marked = tmp_path / "marked.jsonl"
    marked.write_bytes(b"\xef\xbb\xbf" + b'{"question": "When?", "gold_docs": ["a.txt"]}\n')
    assert [q.question for q in load_questions(marked)] == ["When?"]


def test_offline_eval_with_baseline_and_kinds(corpus: tuple[Path, Path, Path]) -> None:
    _, questions, store = corpus
    done = run_cli("eval", questions, "--store", store, "--baseline", "chunks", "--top-k", "2", "--details", "--json")
    assert done.code == 0, done
    report = done.json()
    assert report["retriever"] == "fused" and report["top_k"] == 2  # the offline default
    assert report["metrics"]["fused"] == report["metrics"]["summary"]
    for system in ("summary", "chunks"):
        kinds = report["metrics"][system]
        assert kinds["all"]["n"] == 5 and kinds["single"]["n"] == 3 and kinds["multi"]["n"] == 2
        # On six documents with one topic each, both systems find every gold document.
        assert kinds["all"]["recall"] == 1.0, (system, kinds)
        assert kinds["single"]["mrr"] == 1.0
    rows = {row["id"]: row for row in report["questions"]}
    assert set(rows["m1"]["gold"]) == {"glacier.txt", "bridge.txt"}
    assert set(rows["m1"]["retrieved"]) == {"glacier.txt", "bridge.txt"}
    assert rows["v1"]["retrieved"][0] == "volcano.txt"
    assert rows["v1"]["chunks_retrieved"][0] == "volcano.txt"
    # Precision is over the documents actually retrieved (at most k; a document
    # sharing nothing with the question is never retrieved).
    singles = [r for r in rows.values() if r["kind"] == "single"]
    expected = sum(len(set(r["gold"]) & set(r["retrieved"])) / len(r["retrieved"]) for r in singles) / len(singles)
    assert report["metrics"]["summary"]["single"]["precision"] == pytest.approx(expected, abs=1e-4)
    assert report["usage"]["llm_calls"] == 0  # the fused retriever offline makes no LLM call


def test_eval_reports_every_retriever_by_name(corpus: tuple[Path, Path, Path]) -> None:
    _, questions, store = corpus
    done = run_cli("eval", questions, "--store", store, "--retriever", "all", "--baseline", "chunks", "--json")
    assert done.code == 0, done
    metrics = done.json()["metrics"]
    assert set(metrics) == {"summary", "fused", "embedding", "bm25", "llm", "hybrid", "chunks"}
    assert metrics["summary"] == metrics["fused"]  # the first named is the one reported as "summary"
    for name in ("fused", "embedding", "bm25"):
        assert metrics[name]["all"]["recall"] == 1.0, (name, metrics[name])
    table = run_cli("eval", questions, "--store", store, "--retriever", "bm25,embedding")
    assert table.code == 0 and "bm25" in table.stdout and "embedding" in table.stdout
    assert run_cli("eval", questions, "--store", store, "--retriever", "fused,nosuch").code == 2


def test_unresolved_gold_documents_are_reported(corpus: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _, _, store = corpus
    questions = tmp_path / "q2.jsonl"
    questions.write_text(
        json.dumps({"id": "x", "question": "Where is the volcano?", "gold_docs": ["nowhere.txt"]}) + "\n",
        encoding="utf-8",
    )
    done = run_cli("eval", questions, "--store", store, "--json")
    assert done.code == 0
    assert done.json()["unresolved_gold_docs"] == ["nowhere.txt"]
    assert "not in the store" in done.stderr


def test_offline_answers_are_graded_by_token_overlap(corpus: tuple[Path, Path, Path]) -> None:
    _, questions, store = corpus
    done = run_cli("eval", questions, "--store", store, "--answers", "--details", "--json")
    assert done.code == 0, done
    answers = done.json()["answers"]
    assert answers["grader"] == "token-overlap" and answers["graded"] == 5
    rows = {row["id"]: row for row in done.json()["questions"]}
    assert "240 metres" in rows["v1"]["answer"]["text"]
    assert rows["v1"]["answer"]["correct"] is True
    assert answers["accuracy"] >= 0.6


def test_table_on_stdout(corpus: tuple[Path, Path, Path]) -> None:
    _, questions, store = corpus
    done = run_cli("eval", questions, "--store", store, "--baseline", "chunks")
    assert done.code == 0
    assert "recall@k" in done.stdout and "chunks" in done.stdout and "multi" in done.stdout


def test_llm_judge_grades_answers_against_a_server(corpus: tuple[Path, Path, Path], fake_llm: FakeOpenAI) -> None:
    _, questions, store = corpus

    def responder(body: dict) -> Reply:
        prompt = "\n".join(m["content"] for m in body["messages"])
        if "You grade answers" in prompt:
            # The judge sees the reference and the candidate: say correct only for the volcano.
            return Reply(
                json.dumps({"correct": "240 metres" in prompt.split("Candidate answer:")[0], "reason": "compared"})
            )
        return Reply("an answer from the model")

    fake_llm.responder = responder
    done = run_cli(
        "eval",
        questions,
        "--store",
        store,
        "--answers",
        "--json",
        "--base-url",
        fake_llm.base_url,
        "--model",
        "fake-chat",
    )
    assert done.code == 0, done
    answers = done.json()["answers"]
    assert answers["grader"] == "llm-judge" and answers["graded"] == 5
    assert answers["accuracy"] == pytest.approx(0.2)
    judge_prompts = [r for r in fake_llm.chat_requests() if "You grade answers" in r.prompt]
    assert len(judge_prompts) == 5
