#!/usr/bin/env python3
"""Units of an offline answer a reader cannot place, counted per results
file of bench/answers.py (issue 22's tenth round).

The figure measure of `docsum eval --answers` says whether a gold figure
leads; it does not see a row quoted with figures nobody can tie to a
period, a chart's text, or a word broken at a line's end. This script reads
the answers `bench/answers.py` stored and counts, per kind, the quoted
units that show one, and the answers holding any:

    python3 bench/unplaced.py bench/results/answers/d73e2dc-sec-10-q.json bench/results/answers/after-sec-10-q.json

It reads the quote format of docsum.tablerows ("Label: value, heading;
value, heading [n]."), so it measures the offline engine's answers only.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter

# Written here, not imported from docsum: a measure that used the engine's
# own rule could not see where the rule misses.
_AMOUNT_CELL = r"(?:\(?\$\s?\d[\d,.]*\)?|\(?\d[\d,.]*\)?%)"
_CELLS_RUN_TOGETHER = re.compile(rf"{_AMOUNT_CELL}(?:\s+{_AMOUNT_CELL}){{3}}")
_ROW = re.compile(r"(?P<label>.{1,200}?): (?P<body>.*) \[\d+\]\.?$")
_BROKEN_COMPOUND = re.compile(r"[A-Za-z0-9]- [A-Za-z]")
_DASHES = ("—", "–")


def units(answer: str) -> list[str]:
    """An answer's quoted units, each with its marker."""
    return [u for u in re.split(r"(?<=\])\.? ", answer) if u]


def row_faults(label: str, body: str) -> list[str]:
    faults: list[str] = []
    parts = body.split("; ")
    if len(parts) >= 2 and not any(", " in p for p in parts):
        faults.append("figures without headings")
    seen: dict[str, str] = {}
    for part in parts:
        value, _, heading = part.partition(", ")
        if heading and not re.search(r"\d", heading) and seen.setdefault(heading, value) != value:
            faults.append("one heading over two figures")
            break
    if re.match(r"[a-z]+\b", label):
        faults.append("lower-case label")
    if all(p.split(",")[0].strip() in _DASHES for p in parts):
        faults.append("empty cells only")
    if any(d in label for d in _DASHES):
        faults.append("empty cells in the label")
    return faults


def faults_of(unit: str) -> list[str]:
    row = _ROW.match(unit)
    faults = row_faults(row["label"], row["body"]) if row else []
    if _CELLS_RUN_TOGETHER.search(unit):
        faults.append("cells run together")
    if _BROKEN_COMPOUND.search(unit):
        faults.append("broken compound")
    return faults


def main() -> None:
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        counts: Counter[str] = Counter()
        answers = 0
        for question in data.get("questions", []):
            answer = question.get("answer") or {}
            if answer.get("status") != "ok":
                continue
            found = [fault for unit in units(answer.get("text", "")) for fault in faults_of(unit)]
            counts.update(found)
            answers += bool(found)
        print(f"{path}: {answers} answers; " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
