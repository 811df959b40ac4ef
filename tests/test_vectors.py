"""The vector file beside the store: a question scans it instead of loading
the store, it always answers as the store stands (catching up on changes it
has not seen), and it survives crashes, foreign files and read-only folders.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from helpers import SAMPLE_DOCS, run_as_nobody, run_cli, subprocess_env

from docsum.lexical import LEXICAL_EMBED_MODEL, lexical_vectors
from docsum.models.extractive import ExtractiveLLM
from docsum.query.corpus import StoreCorpus
from docsum.query.retrieve import SummaryEntry, retrieve, score_by_embedding
from docsum.store import vectors as vectors_mod
from docsum.store.records import DocumentRecord, summary_index_text
from docsum.store.sqlite import Store
from docsum.store.vectors import cache_path_for, load_vectors, refresh_vectors

TOPICS = [
    "ferry river crossing",
    "bakery ovens bread",
    "library renovation books",
    "orchard apples harvest",
    "railway timetable trains",
    "harbour fishing boats",
    "theatre play rehearsal",
]


def make_doc(
    i: int, summary: str, vector: np.ndarray | None, model: str | None = LEXICAL_EMBED_MODEL
) -> DocumentRecord:
    return DocumentRecord(
        f"doc{i:05d}",
        f"notes/{i:05d}.txt",
        "/data",
        10,
        1,
        "0" * 64,
        "",
        "text",
        5,
        None,
        "s",
        "f",
        summary,
        "extractive",
        vector,
        model,
    )


def fill(store: Store, count: int, start: int = 0) -> None:
    summaries = [f"Note {i} about {TOPICS[i % len(TOPICS)]} number {i}." for i in range(start, start + count)]
    vectors = lexical_vectors(
        [summary_index_text(f"notes/{i:05d}.txt", "", s) for i, s in zip(range(start, start + count), summaries)]
    )
    for i, summary, vector in zip(range(start, start + count), summaries, vectors):
        store.put_document(make_doc(i, summary, vector), [])


def reference_scores(store: Store, query: str) -> dict[str, float]:
    """What every question computed before the vector file: all entries in memory."""
    docs = store.list_documents(with_embeddings=True)
    entries = [SummaryEntry(d.doc_id, d.path, d.summary, d.embedding, d.embedding_model, d.title) for d in docs]
    scores, _ = asyncio.run(score_by_embedding(ExtractiveLLM(), query, entries))
    return {e.doc_id: float(s) for e, s in zip(entries, scores)}


def file_scores(store: Store, query: str, path: Path | None) -> dict[str, float]:
    ids, scores, _ = asyncio.run(StoreCorpus(store, path).embedding_scores(ExtractiveLLM(), query))
    assert len(ids) == len(set(ids))
    return dict(zip(ids, (float(s) for s in scores)))


def assert_same(found: dict[str, float], expected: dict[str, float]) -> None:
    assert found.keys() == expected.keys()
    assert max(abs(found[k] - expected[k]) for k in expected) < 1e-5


def test_scores_from_the_file_equal_the_whole_store_scores_through_every_change(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    vectors = cache_path_for(path)
    with Store.open(path) as store:
        fill(store, 300)
        query = "When do the bakery ovens start?"
        assert_same(file_scores(store, query, vectors), reference_scores(store, query))
        written = vectors.stat().st_mtime_ns
        assert oct(vectors.stat().st_mode & 0o777) == "0o600"  # private, like the store

        # Changes after the file was written are laid over it, without rewriting it.
        store.remove_document("doc00003")
        fill(store, 5, start=1000)
        store.update_embedding("doc00010", lexical_vectors(["ferry ferry river"])[0], LEXICAL_EMBED_MODEL)
        assert_same(file_scores(store, query, vectors), reference_scores(store, query))
        assert_same(file_scores(store, "ferry", vectors), reference_scores(store, "ferry"))
        assert vectors.stat().st_mtime_ns == written

        # A build's refresh folds them in; the answer stays the same.
        refresh_vectors(store, vectors)
        view = load_vectors(store, vectors)
        assert not view.overlay and view.generation == store.vector_changes(0).generation
        assert_same(file_scores(store, "ferry", vectors), reference_scores(store, "ferry"))


def test_many_changes_rewrite_the_file_from_the_old_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.sqlite"
    vectors = cache_path_for(path)
    monkeypatch.setattr(vectors_mod, "OVERLAY_LIMIT", 3)
    monkeypatch.setattr(vectors_mod, "BLOCK_ROWS", 7)  # several blocks, a partial last one
    with Store.open(path) as store:
        fill(store, 40)
        refresh_vectors(store, vectors)
        for doc_id in ("doc00000", "doc00020", "doc00039"):
            store.remove_document(doc_id)
        fill(store, 4, start=500)
        view = load_vectors(store, vectors)
        assert not view.overlay and view.base is not None and view.base.header.count == 41
        assert_same(file_scores(store, "harbour boats", vectors), reference_scores(store, "harbour boats"))


@pytest.mark.parametrize("damage", ["truncated", "garbage", "other store", "future generation"])
def test_a_damaged_or_foreign_file_is_replaced_not_trusted(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "s.sqlite"
    vectors = cache_path_for(path)
    with Store.open(path) as store:
        fill(store, 50)
        refresh_vectors(store, vectors)
    if damage == "truncated":  # e.g. a disk that filled up under another tool
        with open(vectors, "r+b") as fh:
            fh.truncate(vectors.stat().st_size // 2)
    elif damage == "garbage":
        vectors.write_bytes(b"not a vector file at all")
    elif damage == "other store":  # the store was deleted and a new one built at the same path
        other = tmp_path / "other.sqlite"
        with Store.open(other) as store:
            fill(store, 60, start=100)
            refresh_vectors(store, cache_path_for(other))
        shutil.copy(cache_path_for(other), vectors)
    else:  # the store restored from a copy older than its vector file
        with Store.open(path) as store:
            fill(store, 1, start=900)
            refresh_vectors(store, vectors)
        saved = vectors.read_bytes()
        path.unlink()
        for suffix in ("-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        with Store.open(path) as store:
            store.set_meta("store_id", load_vectors(store, None).store_id)
        vectors.write_bytes(saved)
        with Store.open(path) as store:
            store.set_meta("store_id", vectors_mod._Base.read(vectors).header.store_id)  # type: ignore[union-attr]
            fill(store, 50)
    with Store.open(path, create=False, readonly=True) as store:
        assert_same(file_scores(store, "orchard apples", vectors), reference_scores(store, "orchard apples"))


def test_documents_without_vectors_fall_back_to_lexical_scores_as_before(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with Store.open(path) as store:
        fill(store, 10)
        store.put_document(make_doc(99, "Ferry timetable for the river.", None, None), [])
        ids, scores, notes = asyncio.run(StoreCorpus.beside(store).embedding_scores(ExtractiveLLM(), "ferry river"))
        assert len(ids) == 11 and "some summaries have no stored embedding" in notes[0]
        assert ids[int(np.argmax(scores))] == "doc00099"


class CountingStore(Store):
    """Records which documents a question reads rows of."""

    read: list[str]
    listed: int

    def get_documents(self, doc_ids: list[str]) -> list[DocumentRecord]:
        self.read.extend(doc_ids)
        return super().get_documents(doc_ids)

    def list_documents(self, with_embeddings: bool = False) -> list[DocumentRecord]:
        self.listed += 1
        return super().list_documents(with_embeddings)


@pytest.mark.parametrize("retriever", ["embedding", "hybrid"])
def test_a_question_reads_summaries_only_of_the_documents_it_keeps(tmp_path: Path, retriever: str) -> None:
    path = tmp_path / "s.sqlite"
    with Store.open(path) as store:
        fill(store, 400)
    with CountingStore.open(path, create=False, readonly=True) as store:
        assert isinstance(store, CountingStore)
        store.read, store.listed = [], 0
        corpus = StoreCorpus.beside(store)
        found = asyncio.run(
            retrieve(retriever, ExtractiveLLM(), "railway trains", corpus, top_k=3, candidates=12, keep=30)
        )
        assert found.chosen and all("railway" in c.summary for c in found.chosen)
        assert store.listed == 0 and len(set(store.read)) <= 30
        assert len(found.candidates) <= 30


def test_ask_in_a_read_only_folder_keeps_the_vectors_in_memory(shared_dir: Path) -> None:
    """Run as an unprivileged user (root writes anywhere): a reader that
    cannot write the file beside the store still answers from the store."""
    tmp_path = shared_dir
    folder = tmp_path / "ro"
    folder.mkdir()
    store = folder / "s.sqlite"
    shutil.copytree(SAMPLE_DOCS, tmp_path / "docs")
    assert run_cli("build", tmp_path / "docs", "--store", store, "--llm", "extractive").code == 0
    # A document changed after the last build, and the file removed: the reader must rebuild it.
    cache_path_for(store).unlink()
    with Store.open(store) as s:
        s.remove_document(s.list_documents()[0].doc_id)
        # Out of WAL mode: reading a WAL store from a read-only folder is another matter.
        s.conn.execute("PRAGMA journal_mode = DELETE")
    for f in [folder, *folder.iterdir()]:
        f.chmod(0o755 if f.is_dir() else 0o644)
    folder.chmod(0o555)
    try:
        proc = run_as_nobody(
            [
                "-m",
                "cli.main",
                "ask",
                "When did the library reopen after the renovation?",
                "--store",
                store,
                "--llm",
                "extractive",
                "--json",
            ],
            subprocess_env(DOCSUM_HOME=str(tmp_path / "nobody-home")),
        )
    finally:
        folder.chmod(0o755)
    assert proc.returncode == 0, proc.stderr
    assert "library_renovation_fact_sheet.pdf" in proc.stdout
    assert not cache_path_for(store).exists() and not [p for p in folder.iterdir() if p.suffix == ".tmp"]


def test_build_leaves_the_file_up_to_date(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    shutil.copytree(SAMPLE_DOCS, tmp_path / "docs")
    assert run_cli("build", tmp_path / "docs", "--store", store, "--llm", "extractive").code == 0
    with Store.open(store, create=False, readonly=True) as s:
        view = load_vectors(s, cache_path_for(store))
        assert view.base is not None and not view.overlay
        assert view.base.header.count == s.document_count() and view.base.header.model == LEXICAL_EMBED_MODEL
    (tmp_path / "docs" / "new.txt").write_text("The lighthouse keeper lights the lamp at dusk every evening.\n")
    assert run_cli("build", tmp_path / "docs", "--store", store, "--llm", "extractive").code == 0
    with Store.open(store, create=False, readonly=True) as s:
        view = load_vectors(s, cache_path_for(store))
        assert view.base is not None and not view.overlay and view.base.header.count == s.document_count()
    result = run_cli("ask", "Who lights the lamp at dusk?", "--store", store, "--llm", "extractive", "--json")
    assert result.code == 0 and result.json()["documents"][0]["path"] == "new.txt"


class StreamingSource:
    """A store's changes in batches that notes, whenever the writer asks for
    the next batch, how many vectors handed over earlier are still alive."""

    def __init__(self, batches: list[list[vectors_mod.VectorChange]]) -> None:
        self._batches = batches
        self.alive_when_asked: list[int] = []

    def changes(self) -> vectors_mod.VectorChanges:
        import weakref

        handed: list[weakref.ref[np.ndarray]] = []

        def batches() -> Iterator[list[vectors_mod.VectorChange]]:
            while self._batches:
                self.alive_when_asked.append(sum(ref() is not None for ref in handed))
                batch = self._batches.pop(0)
                handed.extend(weakref.ref(c.vector) for c in batch if c.vector is not None)
                yield batch

        count = sum(len(b) for b in self._batches)
        return vectors_mod.VectorChanges("store-1", 7, count, batches())


def change_batches(count: int, per_batch: int, dim: int = 32) -> list[list[vectors_mod.VectorChange]]:
    rng = np.random.default_rng(count)
    return [
        [
            vectors_mod.VectorChange(f"d{i}", rng.random(dim, dtype=np.float32), "m")
            for i in range(s, min(s + per_batch, count))
        ]
        for s in range(0, count, per_batch)
    ]


def test_the_file_is_written_a_batch_at_a_time_not_collected_first(tmp_path: Path) -> None:
    batches = change_batches(600, 50)
    expected = np.vstack([c.vector for b in batches for c in b])
    source = StreamingSource(batches)
    written = vectors_mod.write_vectors(tmp_path / "v", None, source.changes())
    # When a batch is asked for, at most the one before it is still held:
    # the writer wrote it and let it go (collected first, all 11 earlier
    # batches' vectors were alive when the last was asked for).
    assert len(source.alive_when_asked) == 12
    assert max(source.alive_when_asked) <= 50
    assert written.ids == [f"d{i}" for i in range(600)] and written.header.uniform
    rows = np.vstack([block.copy() for _, block in written.blocks()])  # read back from the file
    assert np.array_equal(rows, expected)


def test_a_document_without_a_vector_late_in_the_stream_leaves_a_file_without_matrix(tmp_path: Path) -> None:
    batches = change_batches(120, 50)
    batches[-1][-1] = vectors_mod.VectorChange("d119", None, None)
    written = vectors_mod.write_vectors(tmp_path / "v", None, StreamingSource(batches).changes())
    assert not written.header.uniform and written.header.model == "m" and written.header.count == 120
    assert written.ids == [f"d{i}" for i in range(120)] and list(written.blocks()) == []
    # The rows written before the document without a vector were cut off.
    assert (tmp_path / "v").stat().st_size == vectors_mod.HEADER_BYTES + 120 * written.header.id_width
