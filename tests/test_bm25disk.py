"""The BM25 index written to disk in bounded memory (docsum.store.bm25disk)
scores exactly as bm25s does in memory, however many runs and parts it is
cut into, and an update from a kept index equals an index made anew."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from docsum.store import bm25disk
from docsum.store.bm25 import BM25Index
from docsum.store.bm25disk import IndexWriter, index_terms, old_postings

WORDS = [f"w{i}" for i in range(80)] + ["zürich", "café", "ærø"]


def random_texts(seed: int, count: int) -> list[list[str]]:
    rng = random.Random(seed)
    # Some texts empty, some terms in nearly every text, some in one.
    return [[rng.choice(WORDS[: rng.randint(1, len(WORDS))]) for _ in range(rng.randint(0, 40))] for _ in range(count)]


def written(tmp_path: Path, texts: list[list[str]], name: str = "idx") -> BM25Index:
    writer = IndexWriter(tmp_path)
    for row, words in enumerate(texts):
        writer.add_text(row, words)
    writer.write(tmp_path / name, "fp", len(texts), {})
    loaded = BM25Index.load(tmp_path / name, "fp")
    assert loaded is not None
    return loaded[0]


def assert_same_scores(a: BM25Index, b: BM25Index) -> None:
    assert a.size == b.size
    for question in (["w1", "w2"], ["w0"], ["w79", "zürich", "unknown"], ["café", "ærø", "w40"], []):
        assert np.allclose(a.scores_for_terms(question), b.scores_for_terms(question), rtol=1e-6, atol=0)


@pytest.mark.parametrize("run, part", [(1 << 20, 1 << 20), (97, 53), (5, 1)])
def test_the_written_index_scores_as_bm25s_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: int, part: int
) -> None:
    monkeypatch.setattr(bm25disk, "RUN_POSTINGS", run)
    monkeypatch.setattr(bm25disk, "PART_POSTINGS", part)
    texts = random_texts(run, 300)
    assert_same_scores(written(tmp_path, texts), BM25Index.from_terms(texts))
    # Nothing of the scratch runs is left beside the index.
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(("bm25-runs-", ".idx"))]


def test_postings_beyond_a_run_go_to_disk_before_the_index_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bm25disk, "RUN_POSTINGS", 100)
    writer = IndexWriter(tmp_path)
    texts = random_texts(7, 200)
    for row, words in enumerate(texts):
        writer.add_text(row, words)
    postings = sum(len(set(words)) for words in texts)
    on_disk = sum(np.load(run / "terms.npy").size for run in writer.scratch.iterdir() if run.name.startswith("run"))
    assert postings - on_disk < 100  # held in memory: less than one run
    writer.write(tmp_path / "idx", "fp", len(texts), {})
    assert not writer.scratch.exists()


def test_an_index_updated_from_a_kept_one_equals_one_made_anew(tmp_path: Path) -> None:
    texts = random_texts(3, 120)
    written(tmp_path, texts, "old")
    # Rows 0..59 are kept (moved to rows 10..69), the rest replaced by new texts.
    new_texts = random_texts(4, 10) + texts[:60] + [words + ["brandnew"] for words in random_texts(5, 30)]
    writer = IndexWriter(tmp_path, index_terms(tmp_path / "old"))
    moved = np.full(len(texts), -1, dtype=np.int64)
    moved[:60] = np.arange(10, 70)
    lengths = np.load(tmp_path / "old" / "lengths.npy")
    writer.set_lengths(moved[:60], lengths[:60])
    for columns, rows, tfs in old_postings(tmp_path / "old"):
        keep = moved[rows] >= 0
        writer.add_postings(columns[keep], moved[rows][keep], tfs[keep])
    for row, words in enumerate(new_texts):
        if not 10 <= row < 70:
            writer.add_text(row, words)
    writer.write(tmp_path / "updated", "fp", len(new_texts), {})
    updated = BM25Index.load(tmp_path / "updated", "fp")
    assert updated is not None
    assert_same_scores(updated[0], BM25Index.from_terms(new_texts))
    assert updated[0].vocab.get("brandnew") is not None
