#!/usr/bin/env python3
"""A question that quotes a stored passage is answered from it.

    python3 bench/quoted.py [--n 20] CORPUS_DIR …

For each corpus folder (documents, or documents under docs/), this builds a
store offline, takes `--n` sentences of 12 to 60 words spread over the
documents (every k-th sentence of the sorted documents: no choice by hand),
asks each sentence as the question, and counts it answered when docsum
answers citing a document that holds the sentence word for word (the one it
came from, or another with the same sentence: a company's filings repeat
their risk factors every quarter). It prints one
line per corpus and each miss with its reason.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from docsum.lexical import sentences  # noqa: E402
from docsum.models.extractive import ExtractiveLLM  # noqa: E402
from docsum.query.ask import ask  # noqa: E402
from docsum.query.options import AskOptions  # noqa: E402


def picked(folder: Path, n: int) -> list[tuple[str, str]]:
    """(file name, sentence) pairs, spread evenly over every document's sentences."""
    pool: list[tuple[str, str]] = []
    for path in sorted(p for p in folder.iterdir() if p.suffix in (".txt", ".md")):
        text = path.read_text(encoding="utf-8", errors="replace")
        pool += [(path.name, s) for s in sentences(text) if 12 <= len(s.split()) <= 60 and "\n" not in s.strip()]
    step = max(1, len(pool) // n)
    return pool[::step][:n]


async def run(folder: Path, n: int, work: Path) -> tuple[int, int, list[str]]:
    source = folder / "docs" if (folder / "docs").is_dir() else folder
    store = work / f"{folder.name}.sqlite"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "DOCSUM_API_KEY")}
    env |= {"DOCSUM_HOME": str(work / "home"), "PYTHONPATH": str(REPO)}
    subprocess.run(
        [sys.executable, "-m", "cli.main", "build", str(source), "--store", str(store), "-q"],
        env=env,
        cwd=REPO,
        check=False,
        stdout=subprocess.DEVNULL,
    )
    llm = ExtractiveLLM()
    texts = {p.name: " ".join(p.read_text(encoding="utf-8", errors="replace").split()) for p in source.iterdir()}
    hits = 0
    misses: list[str] = []
    questions = picked(source, n)
    for name, sentence in questions:
        result = await ask(store, llm, sentence, AskOptions())
        cited = {Path(c.path).name for c in result.citations} | {Path(s.path).name for s in result.sources}
        holding = {c for c in cited if " ".join(sentence.split()) in texts.get(c, "")}
        if result.status.value == "ok" and holding:
            hits += 1
        else:
            misses.append(f"{name}: {sentence[:80]}… -> {result.status.value}: {result.reason or sorted(cited)}")
    return hits, len(questions), misses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="+", type=Path)
    parser.add_argument("--n", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for folder in args.corpus:
            hits, n, misses = asyncio.run(run(folder, args.n, Path(tmp)))
            print(f"| {folder.name} | {hits} of {n} answered from the quoted document |")
            for miss in misses:
                print(f"    miss: {miss}")


if __name__ == "__main__":
    main()
