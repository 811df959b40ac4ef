"""Post-retrieval steps: similarity cutoff, LLM rerank, contextual
compression and long-context reorder. Each is checked for its effect and for
its "removed everything" path, first on the library functions (LLM = a
FakeOpenAI server through its base URL, or the offline engine), then through
`docsum ask`.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from fakeopenai import FakeOpenAI, Reply
from helpers import user_text
from typer.testing import CliRunner

from cli.main import app
from docsum.builder.pipeline import BuildOptions, build
from docsum.models.extractive import ExtractiveLLM
from docsum.models.openaillm import OpenAILLM
from docsum.query.postprocess import compress, llm_rerank, long_context_reorder, reorder_positions, similarity_cutoff
from docsum.schema import Node, NodeWithScore

# --------------------------------------------------------------------------- helpers


def node(text: str, doc: str = "d1", seq: int = 0, score: float | None = None) -> NodeWithScore:
    return NodeWithScore(Node(text, doc, f"{doc}.txt", seq, token_count=len(text.split())), score)


def server_llm(fake: FakeOpenAI) -> OpenAILLM:
    return OpenAILLM(model="fake-chat", base_url=fake.base_url, api_key="test", max_retries=0, timeout=10)


def on_server(fake: FakeOpenAI, step: Any, *args: Any, **kwargs: Any) -> Any:
    """Run one async step with an LLM on the fake server, closing its client."""

    async def go() -> Any:
        llm = server_llm(fake)
        try:
            return await step(llm, *args, **kwargs)
        finally:
            await llm.aclose()

    return asyncio.run(go())


_BLOCK = re.compile(r"^Document (\d+):\n(.*?)(?=^Document \d+:\n|^-{21}$)", re.MULTILINE | re.DOTALL)


def blocks(prompt: str) -> dict[int, str]:
    return {int(m.group(1)): m.group(2).strip() for m in _BLOCK.finditer(prompt)}


def run(*args: Any) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def rate_by_tag(delay: float = 0.0):  # type: ignore[no-untyped-def]
    """Rerank responder: a passage tagged `rN` gets relevance N; `r0` is left out."""

    def respond(body: dict[str, Any]) -> Reply:
        picks = []
        for n, text in blocks(user_text(body)).items():
            m = re.search(r"\br(\d+)\b", text)
            if m and int(m.group(1)) > 0:
                picks.append({"doc": n, "relevance": int(m.group(1))})
        return Reply(text=json.dumps({"choices": picks}), delay=delay)

    return respond


# --------------------------------------------------------------------------- cutoff


def test_cutoff_drops_below_keeps_equal_and_unscored() -> None:
    nodes = [
        node("a", seq=0, score=0.9),
        node("b", seq=1, score=0.5),
        node("c", seq=2, score=None),
        node("d", seq=3, score=0.49),
    ]
    kept, report = similarity_cutoff(nodes, 0.5)
    assert [n.node.text for n in kept] == ["a", "b", "c"]  # order unchanged
    assert report.removed == ["d1:3"] and report.before == 4 and report.after == 3
    assert "kept 1 node(s) that have no score" in report.note
    assert not report.emptied


def test_cutoff_removing_everything_is_reported() -> None:
    kept, report = similarity_cutoff([node("a", score=0.1), node("b", seq=1, score=0.2)], 0.5)
    assert kept == [] and report.emptied and report.after == 0
    kept, report = similarity_cutoff([], 0.5)
    assert kept == [] and not report.emptied


# --------------------------------------------------------------------------- reorder

REORDER_TABLE = {
    1: ["R1"],
    2: ["R2", "R1"],
    3: ["R1", "R3", "R2"],
    4: ["R2", "R4", "R3", "R1"],
    5: ["R1", "R3", "R5", "R4", "R2"],
    6: ["R2", "R4", "R6", "R5", "R3", "R1"],
}


@pytest.mark.parametrize("n", sorted(REORDER_TABLE))
def test_reorder_positions_match_the_table(n: int) -> None:
    assert [f"R{r + 1}" for r in reorder_positions(n)] == REORDER_TABLE[n]


@pytest.mark.parametrize("n", sorted(REORDER_TABLE))
def test_reorder_is_per_document_and_keeps_reading_order(n: int) -> None:
    # Document R{k} has score 1 - k/10 and three nodes; they arrive shuffled
    # (worst document first, each document's nodes out of order).
    nodes = []
    for k in reversed(range(1, n + 1)):
        for seq in (2, 0, 1):
            nodes.append(node(f"R{k} part {seq}", doc=f"R{k}", seq=seq, score=1 - k / 10))
    out, report = long_context_reorder(nodes)
    doc_order = list(dict.fromkeys(x.node.doc_id for x in out))
    assert doc_order == REORDER_TABLE[n]
    for doc in doc_order:
        assert [x.node.seq for x in out if x.node.doc_id == doc] == [0, 1, 2]  # reading order inside
    assert report.before == report.after == 3 * n and not report.removed


def test_reorder_ranks_a_document_by_its_best_node_and_unscored_last() -> None:
    nodes = [
        node("a0", doc="A", seq=0, score=0.2),
        node("a1", doc="A", seq=1, score=0.95),  # A is best (0.95)
        node("b0", doc="B", seq=0, score=0.5),
        node("c0", doc="C", seq=0, score=None),  # no score: ranked last
    ]
    out, _ = long_context_reorder(nodes)
    # ranks: A=R1, B=R2, C=R3 -> R1, R3, R2
    assert list(dict.fromkeys(x.node.doc_id for x in out)) == ["A", "C", "B"]


# --------------------------------------------------------------------------- rerank


def test_rerank_batches_concurrently_and_keeps_the_best(fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = rate_by_tag(delay=0.2)
    # 25 passages; passage i is tagged with relevance (i * 7) % 10 (0 = left out).
    nodes = [node(f"passage {i} tag r{(i * 7) % 10}", doc=f"d{i}", score=0.5) for i in range(25)]
    kept, report = on_server(fake_llm, llm_rerank, "question", nodes, top_n=4, batch_size=10)
    requests = fake_llm.chat_requests()
    assert len(requests) == 3 and fake_llm.max_inflight > 1
    assert sorted(len(blocks(user_text(r.body))) for r in requests) == [5, 10, 10]
    # Best four: relevance 9 (i=7, 17), then 8 (i=4, 14); ties keep retrieval order.
    assert [n.node.text.split(" tag")[0] for n in kept] == ["passage 7", "passage 17", "passage 4", "passage 14"]
    assert [n.score for n in kept] == pytest.approx([0.9, 0.9, 0.8, 0.8])
    assert report.before == 25 and report.after == 4 and len(report.removed) == 21 and not report.emptied


def test_rerank_unparseable_keeps_order_with_note(fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = lambda body: "I think they are all quite good, honestly."
    nodes = [node(f"p{i}", doc=f"d{i}", score=0.5) for i in range(5)]
    kept, report = on_server(fake_llm, llm_rerank, "question", nodes, top_n=3)
    assert [n.node.text for n in kept] == ["p0", "p1", "p2"]
    assert "could not be parsed" in report.note and "kept the retrieval order" in report.note
    assert not report.emptied


def test_rerank_one_unparseable_batch_keeps_its_nodes_after_rated_ones(fake_llm: FakeOpenAI) -> None:
    def respond(body: dict[str, Any]) -> str:
        shown = blocks(user_text(body))
        if any("second" in t for t in shown.values()):
            return "no idea"
        return json.dumps({"choices": [{"doc": 2, "relevance": 9}]})

    fake_llm.responder = respond
    nodes = [node("first a", doc="a"), node("first b", doc="b"), node("second c", doc="c"), node("second d", doc="d")]
    kept, report = on_server(fake_llm, llm_rerank, "q", nodes, top_n=10, batch_size=2)
    assert [n.node.text for n in kept] == ["first b", "second c", "second d"]
    assert "1 batch(es) could not be parsed" in report.note


def test_rerank_leaving_out_everything_empties(fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = lambda body: '{"choices": []}'
    kept, report = on_server(fake_llm, llm_rerank, "q", [node("x"), node("y", seq=1)], top_n=2)
    assert kept == [] and report.emptied
    assert "none of the 2 node(s)" in report.note


def test_rerank_offline_prefers_the_relevant_passage() -> None:
    nodes = [
        node("The ferry leaves at noon.", doc="a"),
        node("Bees make honey in summer.", doc="b"),
        node("Trains run late.", doc="c"),
    ]
    kept, report = asyncio.run(llm_rerank(ExtractiveLLM(), "When do bees make honey?", nodes, top_n=1))
    assert [n.node.doc_id for n in kept] == ["b"]
    assert kept[0].score is not None and 0 < kept[0].score <= 1


# --------------------------------------------------------------------------- compress


def test_compress_drops_no_output_nodes_and_shrinks_the_rest(fake_llm: FakeOpenAI) -> None:
    def respond(body: dict[str, Any]) -> str:
        text = user_text(body)
        if "Hives need care" in text:
            return "Bees make honey in summer."
        return "NO_OUTPUT"

    fake_llm.responder = respond
    nodes = [
        node("The ferry leaves at noon. It is red.", doc="a", score=0.4),
        node("Bees make honey in summer. Hives need care. Wasps are a pest.", doc="b", score=0.8),
        node("Trains run late.", doc="c", score=0.3),
    ]
    kept, report = on_server(fake_llm, compress, "When do bees make honey?", nodes)
    assert len(fake_llm.chat_requests()) == 3  # one call per node
    assert [(n.node.doc_id, n.node.text, n.score) for n in kept] == [("b", "Bees make honey in summer.", 0.8)]
    assert kept[0].node.node_id == "b:0" and kept[0].node.path == "b.txt"
    assert report.before == 3 and report.after == 1 and sorted(report.removed) == ["a:0", "c:0"]
    assert not report.emptied


def test_compress_all_no_output_keeps_uncompressed_with_note(fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = lambda body: "NO_OUTPUT"
    nodes = [node("alpha text", doc="a"), node("beta text", doc="b")]
    kept, report = on_server(fake_llm, compress, "q", nodes)
    assert [n.node.text for n in kept] == ["alpha text", "beta text"]
    assert report.emptied and "kept the nodes uncompressed" in report.note


def test_compress_offline() -> None:
    nodes = [node("Bees make honey in summer. The ferry is red.", doc="a"), node("Trains run late.", doc="b")]
    kept, _ = asyncio.run(compress(ExtractiveLLM(), "When do bees make honey?", nodes))
    assert [n.node.text for n in kept] == ["Bees make honey in summer."]


# --------------------------------------------------------------------------- through `docsum ask`

DOCS = {
    "alpha.txt": "Alpha r9 report\n\nThe alpha station counts otters. Otters rest near the weir. The weir was rebuilt in spring.",
    "beta.txt": "Beta r7 report\n\nThe beta station counts herons. Herons nest in the alder trees. The alders line the river bank.",
    "gamma.txt": "Gamma r5 report\n\nThe gamma station counts voles. Voles dig along the dyke. The dyke holds back the tide.",
    "delta.txt": "Delta r3 report\n\nThe delta station counts newts. Newts breed in the pond. The pond freezes in January.",
}


@pytest.fixture(scope="module")
def station_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("stations")
    folder = root / "docs"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text + "\n", encoding="utf-8")
    store = root / "store.sqlite"
    # Small nodes, so every document has several and reading order can be checked.
    report = asyncio.run(build(store, ExtractiveLLM(), BuildOptions(paths=[folder], chunk_size=16, chunk_overlap=0)))
    assert report.counts["added"] == 4
    return store


def choose_by_tag(body: dict[str, Any]) -> str:
    """Choice: rate each numbered summary by its rN tag (alpha 9 ... delta 3);
    rerank: leave every passage out; compress: NO_OUTPUT; answers: fixed."""
    prompt = user_text(body)
    if "numbered list of documents" in prompt:
        picks = [
            {"doc": n, "relevance": int(m.group(1))}
            for n, t in blocks(prompt).items()
            if (m := re.search(r"\br(\d+)\b", t))
        ]
        return json.dumps({"choices": picks})
    if "numbered list of passages" in prompt:
        return '{"choices": []}'
    if "Relevant sentences:" in prompt:
        return "NO_OUTPUT"
    return "The stations count animals."


def test_ask_reorder_orders_documents_and_keeps_reading_order(station_store: Path) -> None:
    with FakeOpenAI(responder=choose_by_tag) as fake:
        code, out, err = run(
            "ask",
            "What do the stations count?",
            "--store",
            station_store,
            "--base-url",
            fake.base_url,
            "--retriever",
            "llm",
            "--top-k",
            "4",
            "--reorder",
            "--mode",
            "context_only",
            "--json",
        )
    assert code == 0, err
    data = json.loads(out)
    assert [d["path"] for d in data["documents"]] == ["alpha.txt", "beta.txt", "gamma.txt", "delta.txt"]  # R1..R4
    order = list(dict.fromkeys(s["path"] for s in data["sources"]))
    assert order == ["beta.txt", "delta.txt", "gamma.txt", "alpha.txt"]  # R2, R4, R3, R1
    texts: dict[str, list[str]] = {}
    for s in data["sources"]:
        texts.setdefault(s["path"], []).append(s["text"])
    for path, parts in texts.items():
        assert len(parts) > 1, "each document should have several nodes"
        assert parts[0].startswith(path.split(".")[0].title())  # reading order: the title node first
    assert data["answer"].startswith("Beta r7 report")  # context_only: the reordered passages
    assert [s["step"] for s in data["steps"]] == ["reorder"]


def test_ask_cutoff_drops_low_documents_and_exit_5_when_all_go(station_store: Path) -> None:
    with FakeOpenAI(responder=choose_by_tag) as fake:
        srv = [
            "--store",
            station_store,
            "--base-url",
            fake.base_url,
            "--retriever",
            "llm",
            "--top-k",
            "4",
            "--mode",
            "no_text",
        ]
        code, out, err = run("ask", "What do the stations count?", *srv, "--cutoff", "0.6", "--json")
        assert code == 0, err
        data = json.loads(out)
        assert {s["path"] for s in data["sources"]} == {"alpha.txt", "beta.txt"}
        [step] = data["steps"]
        assert step["step"] == "cutoff" and step["removed"] == step["before"] - step["after"] > 0
        code, out, err = run("ask", "What do the stations count?", *srv, "--cutoff", "0.95")
    assert code == 5
    last = err.strip().splitlines()[-1]
    assert "cutoff removed every passage" in last and "0.95" in last


def test_ask_rerank_that_leaves_everything_out_is_exit_5(station_store: Path) -> None:
    with FakeOpenAI(responder=choose_by_tag) as fake:
        code, out, err = run(
            "ask",
            "What do the stations count?",
            "--store",
            station_store,
            "--base-url",
            fake.base_url,
            "--retriever",
            "llm",
            "--rerank",
            "2",
            "--json",
        )
        kinds = [("passages" in user_text(r.body), "documents" in user_text(r.body)) for r in fake.chat_requests()]
    assert code == 5
    data = json.loads(out)
    assert data["status"] == "empty" and "rerank removed every passage" in data["reason"]
    assert "rerank removed every passage" in err
    assert not any(k == (False, False) for k in kinds)  # no synthesis call was made


def test_ask_compress_all_no_output_answers_from_uncompressed(station_store: Path) -> None:
    with FakeOpenAI(responder=choose_by_tag) as fake:
        code, out, err = run(
            "ask",
            "What do the stations count?",
            "--store",
            station_store,
            "--base-url",
            fake.base_url,
            "--retriever",
            "llm",
            "--top-k",
            "2",
            "--compress",
        )
    assert code == 0, err
    assert "The stations count animals." in out
    assert "kept the nodes uncompressed" in err  # said without --explain


def test_rerank_batches_fit_the_window_even_with_long_passages(fake_llm: FakeOpenAI) -> None:
    """Ten 1024-token nodes in one rerank prompt would overflow a 3900-token
    model; batches close early so every prompt fits the window."""
    window, output = 1500, 64
    llm = OpenAILLM(
        model="fake-chat",
        base_url=fake_llm.base_url,
        api_key="k",
        context_window=window,
        num_output=output,
        max_retries=0,
    )
    words = "granite basalt quarry " * 180  # about 540 tokens a passage
    nodes = [NodeWithScore(Node(f"Passage {i}. {words}", doc_id=f"d{i}", seq=0), 0.5) for i in range(6)]
    fake_llm.responder = lambda body: Reply(json.dumps({"choices": [{"doc": 1, "relevance": 7}]}))
    kept, report = asyncio.run(llm_rerank(llm, "Which quarry has granite?", nodes, top_n=3))
    requests = fake_llm.chat_requests()
    assert len(requests) >= 3  # six long passages cannot share one window-sized prompt
    for request in requests:
        assert llm.count_messages(request.messages) <= window - output
    # Every passage was shown to the LLM exactly once (batches go out concurrently).
    shown = [p for r in requests for p in re.findall(r"Passage (\d+)\.", r.prompt)]
    assert sorted(shown) == [str(i) for i in range(6)]
