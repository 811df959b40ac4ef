#!/usr/bin/env python3
"""Build the general-prose development set from a SQuAD 2.0 *train* file.

    python3 bench/prose/make_prose_set.py train-v2.0.json [--per-article 20] [--unanswerable 25]

Writes bench/prose/docs/<article>.txt (one Wikipedia article per file: its
title, then its paragraphs) and bench/prose/questions.jsonl in the shape
`docsum eval` reads. The set is for measuring, never for tuning one question:

- Articles alternate between the "dev" half (fitted on) and the "heldout" half
  (only reported) in the source file's order, so a refit never sees the
  held-out articles' text or questions.
- Answerable questions: `--per-article` per article, taken in the order of a
  hash of their id (reproducible, no choice by hand). The first answer is the
  gold; the other distinct answers are aliases.
- Unanswerable questions: SQuAD 2.0's own "is_impossible" questions (written
  to look answerable from the article's paragraph), `--unanswerable` per
  article that has them.

The articles are SQuAD's (CC BY-SA 4.0; see bench/prose/README.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import unicodedata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def file_name(title: str) -> str:
    """An ASCII file name for an article title ("Frédéric_Chopin" -> "Frederic_Chopin.txt")."""
    plain = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    return re.sub(r"[^A-Za-z0-9]+", "_", plain).strip("_") + ".txt"


def order(qid: str) -> str:
    return hashlib.sha1(qid.encode()).hexdigest()


def article_text(article: dict[str, Any]) -> str:
    title = str(article["title"]).replace("_", " ")
    paragraphs = [str(p["context"]).strip() for p in article["paragraphs"]]
    return "\n\n".join([title, *paragraphs]) + "\n"


def questions_of(
    article: dict[str, Any], name: str, split: str, per_article: int, unanswerable: int
) -> list[dict[str, Any]]:
    asked = [q for p in article["paragraphs"] for q in p["qas"]]
    answerable = sorted(
        (q for q in asked if not q.get("is_impossible") and q.get("answers")), key=lambda q: order(q["id"])
    )
    impossible = sorted((q for q in asked if q.get("is_impossible")), key=lambda q: order(q["id"]))
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for q in answerable:
        text = " ".join(q["question"].split())
        if text.lower() in seen or len(rows) >= per_article:
            continue
        seen.add(text.lower())
        answers = list(dict.fromkeys(a["text"].strip() for a in q["answers"] if a["text"].strip()))
        rows.append(
            {
                "id": q["id"],
                "question": text,
                "answer": answers[0],
                "answer_aliases": answers[1:],
                "gold_docs": [name],
                "kind": "single",
                "split": split,
                "source": "SQuAD 2.0 train",
            }
        )
    for q in impossible[:unanswerable]:
        rows.append(
            {
                "id": q["id"],
                "question": " ".join(q["question"].split()),
                "gold_docs": [name],
                "kind": "unanswerable",
                "split": split,
                "source": "SQuAD 2.0 train (is_impossible)",
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a SQuAD 2.0 train JSON file")
    parser.add_argument("--per-article", type=int, default=20)
    parser.add_argument("--unanswerable", type=int, default=25)
    args = parser.parse_args()
    data = json.loads(args.source.read_text(encoding="utf-8"))["data"]
    docs = HERE / "docs"
    docs.mkdir(exist_ok=True)
    rows: list[dict[str, Any]] = []
    for index, article in enumerate(data):
        name = file_name(article["title"])
        split = "dev" if index % 2 == 0 else "heldout"
        (docs / name).write_text(article_text(article), encoding="utf-8")
        rows.extend(questions_of(article, name, split, args.per_article, args.unanswerable))
    with (HERE / "questions.jsonl").open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    kinds = {k: sum(1 for r in rows if r["kind"] == k) for k in ("single", "unanswerable")}
    print(f"{len(data)} articles, {kinds['single']} answerable and {kinds['unanswerable']} unanswerable questions")


if __name__ == "__main__":
    main()
