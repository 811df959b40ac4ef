"""BM25 scoring (through bm25s), the evidence of summaries and nodes, the
fused retriever that ranks documents by both, and the BM25 index kept beside
the store (private, rebuilt when the documents change, rebuilt when damaged).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO, run_cli, subprocess_env

from docsum.models.extractive import ExtractiveLLM
from docsum.query.retrieve import EntryCorpus, SummaryEntry, aligned_scores, reciprocal_rank_fusion, retrieve
from docsum.store.bm25 import BM25Index, SortedTerms
from docsum.store.evidence import DocumentEvidence, cache_dir, load_evidence, sum_of_best
from docsum.store.records import DocumentRecord
from docsum.store.sqlite import Store

TOPICS = {
    "bees.txt": "Beekeeping notes\n\nThe apiary keeps forty hives of honey bees. Bees swarm in spring and the honey harvest is in August.",
    "ferry.txt": "Ferry timetable\n\nThe river ferry crosses to Northbank every thirty minutes. Ferry tickets cost two dollars for adults.",
    "bakery.txt": "Bakery history\n\nThe bakery on Quarry Street bakes sourdough bread and rye loaves. The baker starts the ovens at four.",
    "storm.txt": "Storm report\n\nThe storm flooded Mill Lane and cut the power. Rainfall reached 142 millimetres in two days.",
}


def test_bm25_scores_shared_words_and_weighs_rare_ones_more() -> None:
    index = BM25Index.from_texts(
        [
            "the harbour crane lifted containers",
            "the harbour ferry and the harbour crane",
            "a recipe for rye bread",
        ]
    )
    scores = index.scores("crane containers")
    assert scores[2] == 0.0  # shares nothing
    assert scores[0] > scores[1] > 0  # "containers" is rarer than "crane"
    assert not index.scores("zeppelin").any()  # an unknown word scores nothing
    assert not index.scores("the and a").any()  # stopwords only
    assert BM25Index.from_texts(["", "the of"]).scores("anything").tolist() == [0.0, 0.0]


def test_fusion_rewards_agreement_and_ignores_signals_that_found_nothing() -> None:
    summary = np.array([3.0, 2.0, 0.0, 0.0], dtype=np.float32)
    nodes = np.array([5.0, 0.0, 4.0, 0.0], dtype=np.float32)
    fused = reciprocal_rank_fusion([summary, nodes])
    assert fused[0] == pytest.approx(1.0)  # first by every signal
    assert fused[3] == 0.0  # no signal found anything in it
    assert 0 < fused[1] < fused[0] and 0 < fused[2] < fused[0]
    assert reciprocal_rank_fusion([np.zeros(0, dtype=np.float32)]).size == 0


def test_documents_tied_at_the_cut_are_kept_the_same_whatever_order_the_store_lists_them() -> None:
    """Which of several equally scored documents make the kept candidates must
    not depend on the store's listing order: SQLite, PostgreSQL and pgvector
    list the same folder in different orders, and `--explain` (and the
    documents a question reads) differed between them at the cut."""
    from docsum.lexical import LEXICAL_EMBED_MODEL, lexical_vectors
    from docsum.query.retrieve import retrieve_by_embedding

    texts = {
        f"d{i}": f"Notes on topic {word}." for i, word in enumerate(["quartz", "slate", "flint", "chalk", "basalt"])
    }
    texts["d9"] = "The ferry timetable for the river crossing."
    vectors = lexical_vectors(list(texts.values()))
    entries = [
        SummaryEntry(doc_id, f"{doc_id}.txt", text, vectors[i], LEXICAL_EMBED_MODEL)
        for i, (doc_id, text) in enumerate(texts.items())
    ]

    def kept(order: list[SummaryEntry]) -> list[str]:
        found = asyncio.run(retrieve_by_embedding(ExtractiveLLM(), "ferry timetable", order, top_k=1, keep=3))
        return [c.doc_id for c in found.candidates]

    first = kept(entries)
    assert first[0] == "d9" and len(first) == 3
    assert kept(entries[::-1]) == first
    assert kept(entries[2:] + entries[:2]) == first


def test_sum_of_best_adds_each_documents_best_passages_only() -> None:
    scores = np.array([1.0, 4.0, 0.0, 2.0, 3.0, 5.0, 0.5], dtype=np.float32)
    owners = np.array([0, 0, 0, 0, 0, 1, 2])
    assert sum_of_best(scores, owners, 4, 3).tolist() == [9.0, 5.0, 0.5, 0.0]  # 4 + 3 + 2; doc 3 has no nodes
    assert sum_of_best(np.zeros(3, dtype=np.float32), np.array([0, 1, 1]), 2, 3).tolist() == [0.0, 0.0]


def test_fused_retriever_finds_a_document_by_a_detail_only_its_nodes_hold() -> None:
    entries = [
        SummaryEntry("a", "kestrel.txt", "Annual report of the Kestrel Mining company."),
        SummaryEntry("b", "osprey.txt", "Annual report of the Osprey Shipping company."),
        SummaryEntry("c", "heron.txt", "Annual report of the Heron Farming company."),
    ]
    evidence = DocumentEvidence.from_texts(
        [e.doc_id for e in entries],
        [e.index_text for e in entries],
        [
            ["The Kestrel mine produced forty tonnes of cobalt in the year.", "Board members met twice."],
            ["Osprey ships carried grain and timber."],
            ["Heron farms grew barley."],
        ],
    )

    class WithNodes(EntryCorpus):
        def bm25_evidence(self) -> DocumentEvidence:
            return evidence

    question = "Who produced cobalt?"
    llm = ExtractiveLLM()
    summaries_only = asyncio.run(retrieve("bm25", llm, question, WithNodes(entries), top_k=1))
    assert summaries_only.chosen == []  # no summary mentions cobalt
    fused = asyncio.run(retrieve("fused", llm, question, WithNodes(entries), top_k=1))
    [top] = fused.chosen
    assert top.doc_id == "a" and 0 < (top.score or 0) <= 1
    assert top.signals["node_bm25"] > 0 and top.signals["summary_bm25"] == 0
    # Without a store to read nodes from, the fused retriever has the summaries alone.
    bare = asyncio.run(retrieve("fused", llm, "Kestrel mining", entries, top_k=1))
    assert [c.doc_id for c in bare.chosen] == ["a"]


def _write(folder: Path, docs: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / name).write_text(text + "\n", encoding="utf-8")


def _top_path(store: Path, question: str, retriever: str = "fused") -> str | None:
    done = run_cli("ask", question, "--store", store, "--mode", "no_text", "--json", "--retriever", retriever)
    assert done.code in (0, 5), done
    docs = done.json()["documents"]
    return docs[0]["path"] if docs else None


def test_the_bm25_index_beside_the_store_is_private_and_follows_the_documents(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    _write(folder, TOPICS)
    store = tmp_path / "store" / "s.sqlite"
    assert run_cli("build", folder, "--store", store, "-q").code == 0
    done = run_cli("ask", "When does the baker bake sourdough?", "--store", store, "--mode", "no_text", "--json")
    assert done.code == 0, done
    assert done.json()["retriever"] == "fused"  # the offline default
    assert done.json()["documents"][0]["path"] == "bakery.txt"
    assert set(done.json()["documents"][0]["signals"]) == {"summary_bm25", "node_bm25", "document_bm25"}

    cache = cache_dir(Path(str(store) + ".vectors"))
    assert cache == Path(str(store) + ".bm25")
    assert cache.is_dir()
    for path in [cache, *cache.rglob("*")]:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path

    # A changed document is searched in its new text, not the cached one.
    _write(folder, {"storm.txt": TOPICS["storm.txt"] + " A zeppelin hangar lost its roof."})
    assert run_cli("build", folder, "--store", store, "-q").code == 0
    assert _top_path(store, "What happened to the zeppelin hangar?") == "storm.txt"

    # A damaged index is rebuilt, not trusted and not fatal.
    for path in cache.rglob("*"):
        if path.is_file():
            path.write_bytes(b"\x00garbage")
    assert _top_path(store, "What happened to the zeppelin hangar?") == "storm.txt"
    assert json.loads((cache / "nodes" / "docsum.json").read_text())["size"] >= len(TOPICS)


def test_unknown_retriever_is_a_usage_error(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    _write(folder, TOPICS)
    store = tmp_path / "s.sqlite"
    assert run_cli("build", folder, "--store", store, "-q").code == 0
    assert run_cli("ask", "bees", "--store", store, "--retriever", "nosuch").code == 2
    for name in ("bm25", "embedding", "fused"):
        assert _top_path(store, "How many hives does the apiary keep?", name) == "bees.txt", name


def test_a_question_after_the_first_reads_the_kept_index_without_importing_bm25s(tmp_path: Path) -> None:
    """bm25s (and the tqdm it imports) is needed to build the index, not to
    read it: `docsum ask` starts as fast as before once the index is kept."""
    folder = tmp_path / "docs"
    _write(folder, TOPICS)
    store = tmp_path / "s.sqlite"
    assert run_cli("build", folder, "--store", store, "-q").code == 0
    assert _top_path(store, "How much is a ferry ticket?") == "ferry.txt"  # builds and keeps the index
    probe = (
        "import sys; from cli.main import app\n"
        "try: app(['ask', 'How much is a ferry ticket?', '--store', sys.argv[1], '--mode', 'no_text', '-q'], standalone_mode=False)\n"
        "except SystemExit: pass\n"
        "print('BM25S', 'bm25s' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(store)],
        cwd=REPO,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "ferry.txt" in done.stdout and "BM25S False" in done.stdout, (done.stdout, done.stderr)


class _CountingStore(Store):
    """A real SQLite store that counts the whole-store reads an index check makes."""

    versions_read = 0
    listed = 0
    texts_read: list[list[str]] = []

    def document_versions(self) -> list[tuple[str, str]]:
        self.versions_read += 1
        return super().document_versions()

    def list_documents(self, with_embeddings: bool = False, with_summaries: bool = True) -> list[DocumentRecord]:
        self.listed += 1
        return super().list_documents(with_embeddings, with_summaries)

    def get_documents(self, doc_ids: list[str]) -> list[DocumentRecord]:
        self.texts_read = [*getattr(self, "texts_read", []), list(doc_ids)]
        return super().get_documents(doc_ids)


def test_a_kept_index_is_trusted_without_reading_a_row_until_the_store_changes(tmp_path: Path) -> None:
    """At 100,000 documents reading every document's version took seconds
    per question: an unchanged store is now recognised by its change log."""
    folder = tmp_path / "docs"
    _write(folder, TOPICS)
    store = tmp_path / "s.sqlite"
    assert run_cli("build", folder, "--store", store, "-q").code == 0
    assert _top_path(store, "How much is a ferry ticket?") == "ferry.txt"  # builds and keeps the index

    with _CountingStore.open(store, create=False, readonly=True) as counting:
        assert isinstance(counting, _CountingStore)
        evidence = load_evidence(counting)
        assert (counting.versions_read, counting.listed) == (0, 0)
        assert sorted(evidence.doc_ids) == sorted(d for d, _ in counting.document_versions())
        assert evidence.doc_ids[int(np.argmax(evidence.score("ferry tickets").summary))] == next(
            d.doc_id for d in counting.list_documents() if d.path == "ferry.txt"
        )

    # A new vector with the same text moves the change log but not the
    # index: the versions are read once, the index is kept and re-stamped.
    with Store.open(store, create=False) as writer:
        doc = next(d for d in writer.list_documents(with_embeddings=True) if d.path == "bees.txt")
        assert doc.embedding is not None and doc.embedding_model is not None
        writer.update_embedding(doc.doc_id, doc.embedding, doc.embedding_model)
    nodes_dir = cache_dir(Path(str(store) + ".vectors")) / "nodes"
    written = (nodes_dir / "docsum.json").stat().st_mtime_ns
    for expected_reads in (1, 0):
        with _CountingStore.open(store, create=False, readonly=True) as counting:
            load_evidence(counting)
            assert (counting.versions_read, counting.listed) == (expected_reads, 0)
    assert (nodes_dir / "docsum.json").stat().st_mtime_ns == written

    # A changed document is read again (and its new words found) by the
    # build itself: the question after it reads nothing.
    _write(folder, {"storm.txt": TOPICS["storm.txt"] + " A zeppelin hangar lost its roof."})
    assert run_cli("build", folder, "--store", store, "-q").code == 0
    with _CountingStore.open(store, create=False, readonly=True) as counting:
        evidence = load_evidence(counting)
        assert (counting.versions_read, counting.listed, counting.texts_read) == (0, 0, [])
        assert evidence.score("zeppelin hangar").summary.max() > 0

    # A change made outside a build (here a document removed and another
    # rewritten in the store) is caught up by the next question, which reads
    # the text of the rewritten document only.
    with Store.open(store, create=False) as writer:
        docs = {d.path: d for d in writer.list_documents(with_embeddings=True)}
        writer.remove_document(docs["bees.txt"].doc_id)
        writer.put_document(
            dataclasses.replace(docs["storm.txt"], sha256="f" * 64, summary="A storm over the albatross colony."), []
        )
    with _CountingStore.open(store, create=False) as counting:
        evidence = load_evidence(counting)
        assert counting.versions_read == 1 and counting.listed == 0
        assert counting.texts_read == [[docs["storm.txt"].doc_id]]
        assert evidence.doc_ids[int(np.argmax(evidence.score("albatross").summary))] == docs["storm.txt"].doc_id
        assert docs["bees.txt"].doc_id not in evidence.doc_ids
        assert evidence.score("zeppelin hangar").best_nodes.max() == 0  # its nodes went with the rewrite


def test_the_kept_vocabulary_finds_every_term_by_bisection(tmp_path: Path) -> None:
    texts = ["Zürich harbour ferry", "ferry tickets", "café crème au lait", "naïve Ærø ferries", "zebra"]
    index = BM25Index.from_texts(texts)
    index.save(tmp_path / "idx", "fp")
    loaded = BM25Index.load(tmp_path / "idx", "fp")
    assert loaded is not None
    kept = loaded[0]
    assert isinstance(kept.vocab, SortedTerms) and isinstance(index.vocab, dict)
    for term, column in index.vocab.items():
        assert kept.vocab.get(term) == column
    for missing in ("", "aaa", "zzzz", "ferr", "ferryz", "zürichs"):
        assert kept.vocab.get(missing) == index.vocab.get(missing)
    for question in ("Zürich ferry", "café", "zebra ferries", "nothing shared"):
        assert np.array_equal(kept.scores(question), index.scores(question))
    empty = BM25Index.from_texts(["", ""])
    empty.save(tmp_path / "empty", "fp")
    reloaded = BM25Index.load(tmp_path / "empty", "fp")
    assert reloaded is not None and reloaded[0].scores("anything").tolist() == [0.0, 0.0]


def test_fused_aligns_cosines_to_the_evidence_order() -> None:
    scores = np.asarray([0.5, 0.25, 0.75], dtype=np.float32)
    assert aligned_scores(["a", "b", "c"], ["a", "b", "c"], scores).tolist() == [0.5, 0.25, 0.75]
    assert aligned_scores(["c", "x", "a"], ["a", "b", "c"], scores).tolist() == [0.75, -1.0, 0.5]
    assert aligned_scores(["a"], [], np.zeros(0, dtype=np.float32)).tolist() == [-1.0]


def test_the_whole_text_signal_scores_the_document_as_one_text_on_disk_and_in_memory(tmp_path: Path) -> None:
    """Issue 43, item 4: the fused retriever reads BM25 of each document's
    whole text beside its summary and best nodes (whole-document BM25 had
    found more SEC gold documents than the two fused); the index kept beside
    the store gives the scores the in-memory one does."""
    import numpy as np

    from docsum.store.evidence import DocumentEvidence, load_evidence
    from docsum.store.opening import open_store

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "ferry.txt").write_text("The Northbank ferry crosses the river.\n\nTickets cost two dollars.\n")
    (folder / "garden.txt").write_text("The Orvale garden grows beans.\n\nVolunteers water it on Sundays.\n")
    store = tmp_path / "s.sqlite"
    assert run_cli("build", folder, "--store", store, "--llm", "extractive").code == 0
    with open_store(store) as opened:
        kept = load_evidence(opened)
        docs = {d.doc_id: d for d in opened.get_documents(kept.doc_ids)}
        nodes = opened.nodes_for(kept.doc_ids)
    from docsum.store.evidence import node_index_text
    from docsum.store.records import summary_index_text

    fresh = DocumentEvidence.from_texts(
        kept.doc_ids,
        [summary_index_text(docs[d].path, docs[d].title, docs[d].summary) for d in kept.doc_ids],
        [[node_index_text(docs[d].path, docs[d].title, n.text) for n in nodes[d]] for d in kept.doc_ids],
    )
    found, expected = kept.score("volunteers water"), fresh.score("volunteers water")
    assert np.allclose(found.whole, expected.whole)
    garden = [i for i, d in enumerate(kept.doc_ids) if docs[d].path.endswith("garden.txt")][0]
    assert found.whole[garden] > 0 and found.whole[1 - garden] == 0
