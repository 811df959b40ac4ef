#!/usr/bin/env python3
"""The plain method docsum's offline answers must beat: BM25 over whole
documents picks 3, BM25 over their sentences answers with the top 2.

    python3 bench/bm25_baseline.py bench/prose [../shared/eval/corpora/musique …] [--json OUT]

For each corpus folder (documents, or documents under docs/, with
questions.jsonl beside them) it prints, per split (dev / heldout / all), the
share of short-answer questions whose gold is in the answer's first 50 words,
the share of questions with a figure for answer whose figure is there, and the documents' recall@3. Grading uses docsum's own measure
(docsum.query.answermeasures), so the figures sit beside `docsum eval`'s.
Unanswerable questions are not asked: the baseline never declines.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from splits import split_of  # noqa: E402

from docsum.query.answermeasures import FIRST_WORDS, SHORT_ANSWER_WORDS, amounts, contains, figures  # noqa: E402

K1, B = 1.5, 0.75
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])|\n+")
WORD = re.compile(r"\w+")
STOP = frozenset(
    "a an and are as at be by did do does for from had has have how in is it its of on or that the this to was "
    "were what when where which who whom whose why with".split()
)


def terms(text: str) -> list[str]:
    return [w for w in WORD.findall(text.lower()) if w not in STOP]


class BM25:
    def __init__(self, texts: list[str]) -> None:
        self.docs = [Counter(terms(t)) for t in texts]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.mean = sum(self.lengths) / max(1, len(self.lengths))
        df = Counter(w for d in self.docs for w in d)
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}

    def scores(self, query: str) -> list[float]:
        asked = set(terms(query))
        out = []
        for d, length in zip(self.docs, self.lengths):
            norm = K1 * (1 - B + B * length / max(self.mean, 1e-9))
            out.append(sum(self.idf[w] * d[w] * (K1 + 1) / (d[w] + norm) for w in asked if w in d))
        return out


def top(scores: list[float], k: int) -> list[int]:
    return sorted(range(len(scores)), key=lambda i: -scores[i])[:k]


def run(folder: Path) -> dict[str, dict[str, float | int]]:
    source = folder / "docs" if (folder / "docs").is_dir() else folder
    paths = sorted(p for p in source.iterdir() if p.suffix in (".txt", ".md"))
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in paths]
    index = BM25(texts)
    sentences = [[s.strip() for s in SENTENCE_END.split(t) if s.strip()] for t in texts]
    counts: dict[str, Counter[str]] = {}
    for line in (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("kind") == "unanswerable":
            continue
        picked = top(index.scores(row["question"]), 3)
        gold = set(row["gold_docs"])
        pool = [s for i in picked for s in sentences[i]]
        best = top(BM25(pool).scores(row["question"]), 2) if pool else []
        head = " ".join(" ".join(pool[i] for i in best).split()[:FIRST_WORDS])
        for split in (split_of(row), "all"):
            c = counts.setdefault(split, Counter())
            c["recall_hits"] += len(gold & {paths[i].name for i in picked})
            c["recall_n"] += len(gold)
            answer = row.get("answer") or ""
            wanted = figures(answer) - figures(row["question"])
            if wanted:
                scaled = amounts(answer) - amounts(row["question"])
                c["figure_n"] += 1
                c["figure_50"] += int(bool(wanted & figures(head) or scaled & amounts(head)))
            if answer and len(answer.split()) <= SHORT_ANSWER_WORDS:
                c["short_n"] += 1
                c["first_50"] += int(any(contains(head, g) for g in [answer, *row.get("answer_aliases", [])] if g))
    return {
        split: {
            "gold_in_first_50_words": c["first_50"] / max(1, c["short_n"]),
            "n": c["short_n"],
            "figure_in_first_50_words": c["figure_50"] / max(1, c["figure_n"]),
            "figure_n": c["figure_n"],
            "recall_at_3": c["recall_hits"] / max(1, c["recall_n"]),
        }
        for split, c in sorted(counts.items())
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="+", type=Path)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results = {str(folder): run(folder) for folder in args.corpus}
    for folder, splits in results.items():
        for split, m in splits.items():
            print(
                f"| {Path(folder).name} | {split} | {m['gold_in_first_50_words']:.1%} (n={m['n']}) "
                f"| {m['figure_in_first_50_words']:.1%} (n={m['figure_n']}) | {m['recall_at_3']:.3f} |"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
