"""The offline engine: deterministic, no network, each prompt kind's job done
on the template's variables."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from docsum.lexical import sentences
from docsum.models.extractive import EXTRACTIVE_MODEL, ExtractiveLLM, judge_by_overlap
from docsum.models.llm import track_calls
from docsum.models.prompts import (
    CHOICE_SELECT_PROMPT,
    COMPRESS_PROMPT,
    DEFAULT_SUMMARY_QUERY,
    JUDGE_PROMPT,
    NO_OUTPUT,
    POLISH_PROMPT,
    REFINE_PROMPT,
    RERANK_PROMPT,
    TEXT_QA_PROMPT,
    TREE_SUMMARIZE_PROMPT,
    PromptTemplate,
    structured,
)
from docsum.settings import Limits

BEES = (
    "The apiary keeps twelve hives on the hill. Bees make honey from nectar in late summer. "
    "The railway trust met in October to discuss the timetable. "
    "Honey bees swarm when the hive becomes crowded in spring. Volunteers repainted the station bench."
)
Q = "When do bees swarm?"


def _all_outputs(llm: ExtractiveLLM) -> list[object]:
    numbered = "\n\n".join(f"Document {i}:\n{s}" for i, s in enumerate(sentences(BEES), start=1))
    out: list[object] = [
        llm.predict(TEXT_QA_PROMPT, context_str=BEES, query_str=Q),
        llm.predict(TEXT_QA_PROMPT, json_mode=True, context_str=BEES, query_str=Q),
        llm.predict(TREE_SUMMARIZE_PROMPT, context_str=BEES, query_str=DEFAULT_SUMMARY_QUERY),
        llm.predict(REFINE_PROMPT, existing_answer="Bees make honey.", context_msg=BEES, query_str=Q),
        llm.predict(CHOICE_SELECT_PROMPT, context_str=numbered, query_str=Q),
        llm.predict(RERANK_PROMPT, context_str=numbered, query_str=Q),
        llm.predict(COMPRESS_PROMPT, context_str=BEES, query_str=Q),
        llm.predict(POLISH_PROMPT, existing_answer="Bees swarm.", context_msg=BEES, query_str=Q),
        llm.predict(JUDGE_PROMPT, answer="in spring", reference="bees swarm in spring", query_str=Q),
        "".join(asyncio.run(_stream(llm, TEXT_QA_PROMPT, context_str=BEES, query_str=Q))),
        llm.embed([BEES, Q, ""]).tolist(),
    ]
    return out


async def _stream(llm: ExtractiveLLM, template: PromptTemplate, **values: str) -> list[str]:
    return [p async for p in llm.astream(template, **values)]


def test_deterministic_across_instances_and_without_network(no_network: None) -> None:
    first = _all_outputs(ExtractiveLLM())
    second = _all_outputs(ExtractiveLLM())
    assert first == second
    assert first[0]  # something was answered


def test_metadata_and_repr() -> None:
    llm = ExtractiveLLM(context_window=1000, num_output=50, limits=Limits.of(3))
    assert llm.metadata.extractive and llm.metadata.model == EXTRACTIVE_MODEL
    assert (llm.metadata.context_window, llm.metadata.num_output, llm.limits.requests) == (1000, 50, 3)
    assert repr(llm) == "ExtractiveLLM()"


def test_text_qa_picks_relevant_sentences_copied_verbatim() -> None:
    llm = ExtractiveLLM()
    answer = llm.predict(TEXT_QA_PROMPT, context_str=BEES, query_str=Q)
    assert answer.startswith("Honey bees swarm when the hive becomes crowded in spring.")
    for s in sentences(answer):
        assert s in BEES


def test_answers_respect_the_output_budget() -> None:
    llm = ExtractiveLLM(num_output=20)
    long_text = " ".join(f"Sentence number {i} talks about bees and honey and hives." for i in range(50))
    answer = llm.predict(TEXT_QA_PROMPT, context_str=long_text, query_str="bees honey")
    assert 0 < llm.metadata.tokenizer.count(answer) <= 20
    one_giant = " ".join(["supercalifragilisticexpialidocious"] * 300) + "."
    head = llm.predict(TEXT_QA_PROMPT, context_str=one_giant, query_str="anything")
    assert head and llm.metadata.tokenizer.count(head) <= 20


def test_streaming_pieces_rebuild_the_answer() -> None:
    llm = ExtractiveLLM()
    pieces = asyncio.run(_stream(llm, TEXT_QA_PROMPT, context_str=BEES, query_str=Q))
    assert len(pieces) > 1
    assert "".join(pieces) == llm.predict(TEXT_QA_PROMPT, context_str=BEES, query_str=Q)


def test_choice_select_from_numbered_context() -> None:
    llm = ExtractiveLLM()
    context = "\n\n".join(
        [
            "Document 1:\nBees make honey in hives during summer.",
            "Document 2:\nThe railway trust met in October.",
            "Document 3:\nHoney bees swarm when the hive is crowded.",
        ]
    )
    data = json.loads(llm.predict(CHOICE_SELECT_PROMPT, context_str=context, query_str="Why do bees swarm?"))
    docs = [c["doc"] for c in data["choices"]]
    assert docs == [3, 1]  # best first; the railway document shares no word
    assert all(isinstance(c["relevance"], int) and 1 <= c["relevance"] <= 10 for c in data["choices"])
    assert data["choices"][0]["relevance"] > data["choices"][1]["relevance"]


def test_rerank_with_candidates_value_and_nothing_relevant() -> None:
    llm = ExtractiveLLM()
    data = json.loads(
        llm.predict(
            RERANK_PROMPT,
            context_str="(list)",
            query_str="railway timetable",
            candidates=["bees", "railway timetable change", "timetable"],
        )
    )
    assert {c["doc"] for c in data["choices"]} == {2, 3}
    assert all(1 <= c["relevance"] <= 10 for c in data["choices"])
    empty = json.loads(llm.predict(RERANK_PROMPT, context_str="Document 1:\nbees", query_str="railway"))
    assert empty == {"choices": []}


def test_rate_relevance_range() -> None:
    llm = ExtractiveLLM()
    rated = llm.rate("honey bees", ["honey bees honey bees", "honey", "nothing here", "bees"])
    assert [r["doc"] for r in rated][0] == 1
    assert 3 not in [r["doc"] for r in rated]
    assert all(1 <= r["relevance"] <= 10 for r in rated)
    assert llm.rate("", ["a"]) == [] and llm.rate("bees", []) == []


def test_compress_keeps_relevant_sentences_or_says_no_output() -> None:
    llm = ExtractiveLLM()
    kept = llm.predict(COMPRESS_PROMPT, context_str=BEES, query_str="bees swarm")
    assert "Honey bees swarm when the hive becomes crowded in spring." in kept
    assert "railway" not in kept
    nothing = llm.predict(
        COMPRESS_PROMPT, context_str="The railway trust met. Benches were painted.", query_str="bees swarm"
    )
    assert nothing == NO_OUTPUT


def test_refine_keeps_existing_answer_when_new_context_adds_nothing() -> None:
    llm = ExtractiveLLM()
    existing = "Honey bees swarm when the hive becomes crowded in spring."
    same = llm.predict(
        REFINE_PROMPT, existing_answer=existing, context_msg="The weather was grey and cold all week.", query_str=Q
    )
    assert same == existing
    repeated = llm.predict(REFINE_PROMPT, existing_answer=existing, context_msg=existing, query_str=Q)
    assert repeated == existing
    better = llm.predict(
        REFINE_PROMPT,
        existing_answer=existing,
        context_msg="Bees also swarm in early summer after a strong flow.",
        query_str=Q,
    )
    assert better != existing and "swarm in early summer" in better and existing in better


def test_refine_with_content_free_query_still_refines() -> None:
    llm = ExtractiveLLM()
    out = llm.predict(
        REFINE_PROMPT,
        existing_answer="The apiary keeps twelve hives on the hill.",
        context_msg="Bees make honey from nectar in late summer at the apiary hives.",
        query_str=DEFAULT_SUMMARY_QUERY,
    )
    assert "nectar" in out


def test_json_mode_answer_and_query_satisfied() -> None:
    llm = ExtractiveLLM()
    yes = json.loads(llm.predict(TEXT_QA_PROMPT, json_mode=True, context_str=BEES, query_str=Q))
    assert set(yes) == {"answer", "query_satisfied"}
    assert yes["query_satisfied"] is True and "swarm" in yes["answer"]
    no = json.loads(
        llm.predict(
            TEXT_QA_PROMPT, json_mode=True, context_str="Trains run late on Sundays.", query_str="What do bees make?"
        )
    )
    assert no["query_satisfied"] is False
    ref = json.loads(
        llm.predict(
            structured(REFINE_PROMPT), json_mode=True, existing_answer="Bees swarm.", context_msg=BEES, query_str=Q
        )
    )
    assert set(ref) == {"answer", "query_satisfied"} and ref["query_satisfied"] is True


def test_custom_template_uses_its_longest_value() -> None:
    llm = ExtractiveLLM()
    t = PromptTemplate("Notes: {notes}\nTone: {tone}\nQ: {query_str}")
    out = llm.predict(t, notes=BEES, tone="formal", query_str=Q)
    assert "swarm" in out


def test_judge_by_overlap() -> None:
    llm = ExtractiveLLM()
    data = json.loads(
        llm.predict(JUDGE_PROMPT, answer="Bees swarm in spring.", reference="They swarm in spring.", query_str=Q)
    )
    assert data["correct"] is True and data["reason"]
    assert judge_by_overlap("trains", "bees swarm in spring")[0] is False
    assert judge_by_overlap("x", "") == (False, "the reference answer has no content words")


def test_calls_are_recorded_as_counted_locally() -> None:
    llm = ExtractiveLLM()
    with track_calls() as calls:
        llm.predict(TEXT_QA_PROMPT, context_str=BEES, query_str=Q)
        llm.embed(["a"])  # lexical vectors cost nothing and are not recorded
    (call,) = calls
    assert call.kind == "text_qa" and call.model == EXTRACTIVE_MODEL and call.counted_locally
    assert call.prompt_tokens == llm.count_messages(TEXT_QA_PROMPT.format_messages(context_str=BEES, query_str=Q))


def test_embeddings_are_normalised_lexical_vectors() -> None:
    vecs = ExtractiveLLM().embed(["bees make honey", "Bees make honey!", "railway timetable", ""])
    norms = np.linalg.norm(vecs, axis=1)
    assert np.allclose(norms[:3], 1.0) and norms[3] == 0.0
    assert vecs[0] @ vecs[1] > 0.9 > vecs[0] @ vecs[2]


def test_missing_variable_raises_like_a_real_llm() -> None:
    from docsum.errors import TemplateVariableError

    with pytest.raises(TemplateVariableError):
        ExtractiveLLM().predict(PromptTemplate("{context_str} {tone}"), context_str="x")


def test_a_one_word_name_is_not_met_by_the_word_in_lower_case() -> None:
    from docsum.models.prompts import ABSTENTION_TEXT

    # Before: "Who directed Taken?" was answered with Nigeria's "The name was
    # taken from the Niger River", the only sentence holding "taken"; the
    # film's passage (its plot) never names its director.
    engine = ExtractiveLLM()
    film = "A retired agent tracks the men who kidnapped his daughter in Paris. He finds her on a yacht."
    nigeria = "The name was taken from the Niger River running through the country."
    context = f"[1] (source: Taken_film.txt)\n{film}\n\n[2] (source: Nigeria.txt)\n{nigeria}"
    assert engine.answer("Who directed Taken?", context) == ABSTENTION_TEXT
    # The name written with its capital is still met.
    directed = f"{film} Taken was directed by Pierre Morel."
    context = f"[1] (source: Taken_film.txt)\n{directed}\n\n[2] (source: Nigeria.txt)\n{nigeria}"
    answer = engine.answer("Who directed Taken?", context)
    assert answer.startswith("Taken was directed by Pierre Morel") and "Niger" not in answer


def test_a_name_is_matched_by_its_key_whatever_its_ending() -> None:
    from docsum.models.unitscore import lowered_terms as lowered_names
    from docsum.models.unitscore import one_word_names

    # A name's key drops a final "e" or "s" ("Grease" is "greas"): matched
    # by a pattern on the key, "grease" in lower case was not found, and
    # the sentence kept its credit for the film's name.
    names = one_word_names("Who directed Grease?")
    assert lowered_names(names, "Wipe the grease from the pan before serving.")
    assert not lowered_names(names, "Grease is a 1978 musical film.")
