#!/usr/bin/env python3
"""The dev / held-out halves of every measured set, and `docsum eval`'s
figures per half.

    python3 bench/splits.py bench/results/answers/after-prose.json bench/prose/questions.jsonl

A question line's `split` ("dev" or "heldout") decides its half; without one,
a hash of its id does (a multi-hop question and its hops share one half).
Weights and thresholds are fitted on "dev" only (bench/fit_scorer.py); the
figures that count are "heldout". For a result written by
`docsum eval --answers --unanswerable --details --json` (bench/answers.py),
this prints per half: short gold in the first 50 words, figure in the first
50 words, answerable declined, unanswerable declined and recall@3.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from docsum.query.answermeasures import GradedAnswer, measure  # noqa: E402

HALVES = ("dev", "heldout")


def split_of(row: dict[str, Any]) -> str:
    if row.get("split") in HALVES:
        return str(row["split"])
    base = str(row["id"]).split("__hop")[0]
    return "dev" if int(hashlib.sha1(base.encode()).hexdigest(), 16) % 2 == 0 else "heldout"


def read_questions(path: Path) -> dict[str, dict[str, Any]]:
    rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return {str(r["id"]): r for r in rows}


def share(hits: int, n: int) -> str:
    return f"{hits / n:.1%} ({hits}/{n})" if n else "–"


def by_half(data: dict[str, Any], questions: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Figures per half (and "all") of one `docsum eval --details --json` result."""
    out: dict[str, dict[str, Any]] = {}
    for half in (*HALVES, "all"):
        items = [q for q in data["questions"] if half == "all" or split_of(questions[str(q["id"])]) == half]
        graded = []
        declined = {"answerable": [0, 0], "unanswerable": [0, 0]}
        recall = [0.0, 0]
        for item in items:
            row = questions[str(item["id"])]
            normal = (item.get("abstention") or {}).get("normal") or {}
            group = "unanswerable" if row.get("kind") == "unanswerable" else "answerable"
            if normal:
                declined[group][0] += int(bool(normal.get("abstained")))
                declined[group][1] += 1
            if group == "unanswerable":
                continue
            recall[0] += item["fused"]["recall"]
            recall[1] += 1
            answer = item.get("answer") or {}
            text = answer.get("text", "")
            graded.append(
                GradedAnswer(
                    str(row.get("kind", "")),
                    row["question"],
                    text,
                    answer.get("status") == "ok" and bool(text.strip()),
                    row.get("answer"),
                    tuple(row.get("answer_aliases", [])),
                )
            )
        m = measure(graded, split=False)
        out[half] = {
            "short_gold_first_50": share(m.short_gold_first_50.hits, m.short_gold_first_50.n),
            "figure_first_50": share(m.figure_first_50.hits, m.figure_first_50.n),
            "answerable_declined": share(*declined["answerable"]),
            "unanswerable_declined": share(*declined["unanswerable"]),
            "recall_at_3": f"{recall[0] / recall[1]:.3f}" if recall[1] else "–",
        }
    return out


def main() -> None:
    result, questions = Path(sys.argv[1]), Path(sys.argv[2])
    halves = by_half(json.loads(result.read_text()), read_questions(questions))
    print(
        "| half | short gold in first 50 | figure in first 50 | answerable declined | unanswerable declined | recall@3 |"
    )
    print("|---|---|---|---|---|---|")
    for half, m in halves.items():
        print(f"| {half} | {' | '.join(m.values())} |")


if __name__ == "__main__":
    main()
