"""Citations to the page: numbered passages, `[n]` markers validated and mapped
to document, pages and quote, unsupported sentences flagged; sources that list
only the pages used, as ranges, and tell same-named files apart."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fakeopenai import FakeOpenAI
from helpers import first_choice_then, kind_of, user_text
from helpers import run_cli_parts as run

from docsum.citations import cite, page_ranges, validate_markers
from docsum.lexical import sentences
from docsum.schema import Node, NodeWithScore

SAMPLE_DOCS = Path(__file__).resolve().parents[1] / "sample_data" / "docs"
QUICK_START = "How much did Brindle & Daughter pay for the oven, and when was the auction?"
LIBRARY = "When did the library reopen after the renovation?"


@pytest.mark.parametrize(
    "pages, text",
    [
        ([12, 13, 14, 31], "pp. 12–14, 31"),
        ([4], "p. 4"),
        ([3, 1, 2, 2], "pp. 1–3"),
        ([1, 3, 5], "pp. 1, 3, 5"),
        ([], ""),
    ],
)
def test_page_ranges(pages: list[int], text: str) -> None:
    assert page_ranges(pages) == text


def test_markers_pointing_at_no_passage_are_removed() -> None:
    cleaned, removed = validate_markers("Alpha [1]. Beta [7]. Gamma [1, 9][2].", 2)
    assert cleaned == "Alpha [1]. Beta. Gamma [1][2]." and removed == [7, 9]


def test_unsupported_sentence_is_flagged() -> None:
    nodes = [
        NodeWithScore(Node("The ferry crosses to Northbank every thirty minutes.", "d1", "ferry.txt", pages=(3,))),
        NodeWithScore(Node("Tickets cost two dollars for adults.", "d2", "tickets.txt", pages=(7, 8))),
    ]
    answer = "The ferry crosses every thirty minutes [1]. Tickets cost two dollars [2]. The captain owns three red bicycles [2]."
    cleaned, report = cite(answer, nodes)
    assert cleaned == answer
    assert [c.marker for c in report.citations] == [1, 2]
    assert report.citations[1].as_dict() == {
        "marker": 2,
        "doc": "d2",
        "path": "tickets.txt",
        "root": "",
        "pages": [7, 8],
        "quote": "Tickets cost two dollars for adults.",
    }
    assert [u.sentence for u in report.unsupported] == ["The captain owns three red bicycles."]


def test_markers_are_renumbered_in_order_of_first_use_one_per_passage_quote() -> None:
    # Before: markers were the passages' numbers ([3], [1]), and two
    # overlapping passages quoting the same sentence were two markers.
    same = "The ferry crosses to Northbank every thirty minutes."
    nodes = [
        NodeWithScore(Node("Tickets cost two dollars for adults.", "d2", "tickets.txt", pages=(7,))),
        NodeWithScore(Node(f"Boats.\n\n{same}", "d1", "ferry.txt", pages=(3,))),
        NodeWithScore(Node(f"{same} It is the oldest route.", "d1", "ferry.txt", pages=(3, 4))),
    ]
    answer = "The ferry crosses to Northbank every thirty minutes [3]. It runs every thirty minutes [2]. Tickets cost two dollars [1]."
    cleaned, report = cite(answer, nodes)
    assert cleaned == (
        "The ferry crosses to Northbank every thirty minutes [1]. It runs every thirty minutes [1]. "
        "Tickets cost two dollars [2]."
    )
    assert [(c.marker, c.path, c.quote) for c in report.citations] == [
        (1, "ferry.txt", same),
        (2, "tickets.txt", "Tickets cost two dollars for adults."),
    ]


def test_offline_answer_cites_every_sentence_it_quotes(offline_sample_store: Path) -> None:
    code, out, err = run("ask", QUICK_START, "--store", offline_sample_store, "--json")
    assert code == 0, err
    data = json.loads(out)
    answer_sentences = sentences(data["answer"])
    assert answer_sentences and all(re.search(r"\[\d+\][.!?]?$", s) for s in answer_sentences)
    by_marker = {c["marker"]: c for c in data["citations"]}
    texts = {s["doc_id"]: s["text"] for s in data["sources"]}
    for sentence in answer_sentences:
        marker = int(re.search(r"\[(\d+)\]", sentence).group(1))  # type: ignore[union-attr]
        citation = by_marker[marker]
        assert set(citation) >= {"marker", "doc", "path", "pages", "quote"}
        # The quoted sentence is really in the passage it cites.
        plain = re.sub(r"\s*\[\d+\]", "", sentence)
        assert plain.rstrip(".") in " ".join(texts[citation["doc"]].split())
    assert data["unsupported"] == []


def test_quick_start_names_the_price_and_the_auction_date_first(offline_sample_store: Path) -> None:
    code, out, err = run("ask", QUICK_START, "--store", offline_sample_store)
    assert code == 0, err
    first_two = " ".join(sentences(out.split("\n\nSources:")[0])[:2])
    assert "$1,850" in first_two and "14 September 2019" in first_two


def test_text_sources_map_markers_to_document_pages_and_quote(offline_sample_store: Path) -> None:
    code, out, err = run("ask", LIBRARY, "--store", offline_sample_store)
    assert code == 0, err
    answer, sources = out.split("\n\nSources:\n")
    lines = sources.strip().splitlines()
    assert lines and all(re.match(r'^\[\d+\] \S+( pp?\. [\d–, ]+)?: ".+"$', line) for line in lines), lines
    markers = {int(m) for m in re.findall(r"\[(\d+)\]", answer)}
    assert markers == {int(line[1 : line.index("]")]) for line in lines}
    # The fact sheet is a PDF: its citation names its page.
    assert any(re.match(r"^\[\d+\] library_renovation_fact_sheet\.pdf p\. \d+: ", line) for line in lines), lines


def test_llm_gets_numbered_passages_and_its_markers_are_checked(offline_sample_store: Path) -> None:
    reply = "The library reopened on Saturday 3 June 2023 [1]. It had closed in July [9]. The mayor owns four purple kayaks [1]."
    with FakeOpenAI(responder=first_choice_then(reply)) as fake:
        code, out, err = run(
            "ask",
            LIBRARY,
            "--store",
            offline_sample_store,
            "--base-url",
            fake.base_url,
            "--model",
            "fake-chat",
            "--json",
            "--explain",
            "--top-k",
            "1",
        )
        [qa] = [r for r in fake.chat_requests() if kind_of(r.body) != "choice"]
    assert code == 0, err
    prompt = user_text(qa.body)
    assert "[1] (source: library_renovation_fact_sheet.pdf, p" in prompt and "square brackets" in prompt
    data = json.loads(out)
    assert "[9]" not in data["answer"] and "It had closed in July." in data["answer"]
    assert any("[9]" in w and "no such passage" in w for w in data["warnings"])
    assert [c["marker"] for c in data["citations"]] == [1]
    assert data["citations"][0]["path"] == "library_renovation_fact_sheet.pdf" and data["citations"][0]["pages"]
    assert [u["sentence"] for u in data["unsupported"]] == ["The mayor owns four purple kayaks."]
    assert "citation check: not supported by [1]" in err and "purple kayaks" in err


@pytest.mark.parametrize("mode", ["refine", "tree_summarize", "simple_summarize", "accumulate", "compact_accumulate"])
def test_every_text_mode_numbers_the_passages(offline_sample_store: Path, mode: str) -> None:
    with FakeOpenAI(responder=first_choice_then("The library reopened on Saturday 3 June 2023 [1].")) as fake:
        code, out, err = run(
            "ask",
            LIBRARY,
            "--store",
            offline_sample_store,
            "--base-url",
            fake.base_url,
            "--model",
            "fake-chat",
            "--mode",
            mode,
            "--no-stream",
        )
        prompts = [user_text(r.body) for r in fake.chat_requests() if kind_of(r.body) != "choice"]
    assert code == 0, err
    assert prompts and all("(source: " in p and "square brackets" in p for p in prompts)
    assert "\n[1] " in out.split("Sources:")[1]


def test_same_file_name_in_two_folders_is_told_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for folder, town in (("north", "Ashby"), ("south", "Brill")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "notes.txt").write_text(
            f"The {town} ferry timetable changed in May. The {town} ferry sails hourly.\n"
        )
    store = tmp_path / "store.sqlite"
    monkeypatch.chdir(tmp_path)
    for folder in ("north", "south"):
        assert run("build", folder, "--store", store)[0] == 0
    code, out, err = run("ask", "How often does the ferry sail?", "--store", store, "--no-stream")
    assert code == 0, err
    sources = out.split("Sources:")[1]
    assert "north/notes.txt" in sources and "south/notes.txt" in sources
    code, out, err = run("ask", "How often does the ferry sail?", "--store", store, "--json")
    data = json.loads(out)
    roots = {s["root"] for s in data["sources"]} | {c["root"] for c in data["citations"]}
    assert roots == {str(tmp_path / "north"), str(tmp_path / "south")}
    # The listing of the store tells them apart too.
    code, out, err = run("summaries", "--store", store, "--json")
    assert code == 0, err
    assert sorted((d["path"], d["root"]) for d in json.loads(out)) == [
        ("notes.txt", str(tmp_path / "north")),
        ("notes.txt", str(tmp_path / "south")),
    ]


def test_the_library_numbers_passages_when_asked() -> None:
    """get_response_synthesizer(..., numbered_passages=True), as the README
    says; an unknown keyword is a TypeError naming it."""
    from docsum.synthesizers import get_response_synthesizer

    passages = [NodeWithScore(Node("The ferry crosses hourly.", "d1", "ferry.txt", pages=(3,)))]
    numbered = get_response_synthesizer("context_only", numbered_passages=True).synthesize("q", passages)
    assert numbered.response == "[1] (source: ferry.txt, p. 3)\nThe ferry crosses hourly."
    assert get_response_synthesizer("context_only").synthesize("q", passages).response == "The ferry crosses hourly."
    with pytest.raises(TypeError, match="numbered_pasages"):
        get_response_synthesizer("context_only", numbered_pasages=True)


def test_a_part_of_a_context_that_starts_inside_a_passage_carries_its_label() -> None:
    from docsum.citations import labelled_parts, split_numbered

    joined = "[1] (source: a.txt)\nAlpha one. Alpha two. Alpha three.\n\n[2] (source: b.txt)\nBravo one. Bravo two."
    parts = ["[1] (source: a.txt)\nAlpha one. Alpha two.", "Alpha two. Alpha three.", "Bravo two."]
    labelled = labelled_parts(joined, parts)
    # Before: the second and third parts had no label, and the sentences read
    # from them no passage number (an answer quoting them carried no marker).
    assert [marker for part in labelled for marker, _ in split_numbered(part)] == [1, 1, 2]
    assert labelled[0] == parts[0]


def test_an_answer_from_a_long_passage_split_across_prompts_cites_every_sentence(tmp_path: Path) -> None:
    # A passage longer than the window is cut into parts; before, the parts
    # after the first had no passage label and their sentences were quoted
    # without a marker.
    docs = tmp_path / "docs"
    docs.mkdir()
    filler = " ".join(f"The harbour log for day {i} lists the tides and the weather." for i in range(1, 120))
    (docs / "log.txt").write_text(
        f"{filler}\nThe new crane on the east quay cost $2.4 million and lifts forty tonnes.\n{filler}\n"
    )
    store = tmp_path / "s.sqlite"
    assert run("build", docs, "--store", store, "-q", "--chunk-size", "4000")[0] == 0
    code, out, err = run(
        "ask", "How much did the new crane cost?", "--store", store, "--json", "--context-window", "900"
    )
    assert code == 0, err
    answer = json.loads(out)["answer"]
    assert "$2.4 million" in answer
    assert all(re.search(r"\[\d+\][.!?]?$", s) for s in sentences(answer)), answer
