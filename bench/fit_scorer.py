#!/usr/bin/env python3
"""Fit the offline answer scorer's weights (docsum.models.unitscore) on the
development half of each evaluation set, and report them on the other half.

For every corpus (a folder of documents with questions.jsonl), the script
builds a store offline (cached under --cache), then for each question takes
the passages docsum hands to the answer step (`ask --mode context_only`,
grounding included) and cuts them into the units the offline engine ranks
(docsum.layout.answer_units). A unit is *gold* when it holds the reference
answer: a short answer (or an alias) as whole words, or one of a long
answer's figures (docsum.query.answermeasures, the measure `eval --answers`
reports). Questions whose `split` field says so, or else half of them by a
hash of their id (a multi-hop question and its hops together), form the
development half.

The model is a conditional logit: within one question the units' scores
`w · features` give a softmax, and the fit maximises the log-probability of
the gold units, each corpus weighing the same, with a small L2 penalty.
Reported per corpus and half, for the weights in force and the fitted ones:
the share of questions whose top unit is gold (`top1`), whose gold is in the
answer the engine would write (units within STOP_GAP of the best, at most
three, first 50 words: `answer50`), and how many units that answer has; and
the abstention trade-off of a threshold on the best unit's score.

    .venv/bin/python bench/fit_scorer.py --corpus prose=bench/prose \\
        --corpus sec-10-q=../shared/eval/corpora/sec-10-q --corpus musique=../shared/eval/corpora/musique \\
        [--ablation] [--write]

`--write` rewrites docsum/models/unitweights.py with the fitted weights, the
stop gap and the abstention threshold. Same data, same weights: the fit is
deterministic (no random start, a fixed number of steps).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from splits import split_of  # noqa: E402

from docsum.layout import answer_units  # noqa: E402
from docsum.models import unitweights  # noqa: E402
from docsum.models.abstain import name_terms  # noqa: E402
from docsum.models.answerrank import answer_terms, folded, spelled_out  # noqa: E402
from docsum.models.extractive import ExtractiveLLM  # noqa: E402
from docsum.models.selection import WORDS_PER_ANSWER_SENTENCE, adds_to_answer  # noqa: E402
from docsum.models.unitscore import FEATURES, document_prior, unit_features  # noqa: E402
from docsum.query.answermeasures import FIRST_WORDS, SHORT_ANSWER_WORDS, amounts, contains, figures  # noqa: E402

MOST_UNITS = 3  # --answer-sentences' default
ROW_LABEL = FEATURES.index("row_label")
L2 = 0.01
STEPS = 600


@dataclass
class Item:
    """One question's units: features (rows), gold flags, and words."""

    corpus: str
    qid: str
    split: str
    answerable: bool
    declined_before: bool  # grounding or retrieval declined before any passage
    x: np.ndarray = field(default_factory=lambda: np.zeros((0, len(FEATURES))))
    gold: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    words: list[int] = field(default_factory=list)
    asked_in: list[set[str]] = field(default_factory=list)  # the question's terms each unit holds
    texts: list[str] = field(default_factory=list)
    golds: list[str] = field(default_factory=list)
    reference: str = ""
    question: str = ""


def is_gold(unit: str, reference: str, aliases: list[str], question: str) -> bool:
    if len(reference.split()) <= SHORT_ANSWER_WORDS:
        return any(contains(unit, g) for g in [reference, *aliases] if g.strip())
    wanted = figures(reference) - figures(question)
    scaled = amounts(reference) - amounts(question)
    return bool(wanted & figures(unit) or scaled & amounts(unit))


def labelled(row: dict[str, Any]) -> bool:
    """A question whose gold units can be told: a short answer, or a long one with figures."""
    reference = row.get("answer") or ""
    if not reference:
        return False
    if len(reference.split()) <= SHORT_ANSWER_WORDS:
        return True
    return bool(figures(reference) - figures(row["question"]))


def build_store(name: str, folder: Path, cache: Path) -> Path:
    docs = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix != ".jsonl" and not p.name.startswith("."))
    digest = hashlib.sha1("".join(f"{p.name}:{p.stat().st_size}" for p in docs).encode()).hexdigest()[:12]
    home = cache / f"{name}-{digest}"
    store = home / "store.sqlite"
    if not store.exists():
        home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "DOCSUM_API_KEY")}
        env |= {"DOCSUM_HOME": str(home), "PYTHONPATH": str(REPO)}
        source = folder if not (folder / "docs").is_dir() else folder / "docs"
        subprocess.run(
            [sys.executable, "-m", "cli.main", "build", str(source), "--store", str(store), "--llm", "extractive"],
            env=env,
            cwd=REPO,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return store


async def collect(name: str, folder: Path, cache: Path, limit: int | None) -> list[Item]:
    from docsum.query.ask import ask
    from docsum.query.options import AskOptions

    store = build_store(name, folder, cache)
    rows = [json.loads(line) for line in (folder / "questions.jsonl").read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r.get("kind") == "unanswerable" or labelled(r)][:limit]
    llm = ExtractiveLLM()
    options = AskOptions(mode="context_only", retriever="fused")
    items: list[Item] = []
    for row in rows:
        answerable = row.get("kind") != "unanswerable"
        result = await ask(store, llm, row["question"], options)
        # Each unit's document by retrieval rank, as the engine reads it from
        # the passages' numbering (best document first).
        rank = {doc_id: i for i, doc_id in enumerate(dict.fromkeys(source.doc_id for source in result.sources))}
        placed = [(u, rank[source.doc_id]) for source in result.sources for u in answer_units(source.text)]
        units = [u for u, _ in placed]
        documents = [document_prior(rank) for _, rank in placed]
        item = Item(name, str(row["id"]), split_of(row), answerable, declined_before=not units)
        item.question, item.reference = row["question"], row.get("answer") or ""
        item.golds = [item.reference, *row.get("answer_aliases", [])]
        found = unit_features(row["question"], units, documents=documents)
        kept = [(u, f) for u, f in zip(units, found) if f is not None]
        item.texts = [u for u, _ in kept]
        item.x = np.array([[f[k] for k in FEATURES] for _, f in kept]).reshape(len(kept), len(FEATURES))
        item.words = [len(u.split()) for u in item.texts]
        asked = set(answer_terms(spelled_out(row["question"]))) - {folded(t) for t in name_terms(row["question"])}
        item.asked_in = [set(answer_terms(u)) & asked for u in item.texts]
        if answerable:
            item.gold = np.array([is_gold(u, item.reference, item.golds[1:], row["question"]) for u in item.texts])
        else:
            item.gold = np.zeros(len(kept), dtype=bool)
        items.append(item)
    return items


def fit(items: list[Item], features: list[int], steps: int = STEPS, split: str = "dev") -> np.ndarray:
    """Conditional-logit weights over `features` (indexes), by Adam from zero,
    on the development half only (`split`): the held-out half is what the
    weights are reported on."""
    train = [i for i in items if i.split == split and i.answerable and i.gold.any()]
    per_corpus = {c: sum(1 for i in train if i.corpus == c) for c in {i.corpus for i in train}}
    w = np.zeros(len(FEATURES))
    mask = np.zeros(len(FEATURES))
    mask[features] = 1.0
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for step in range(1, steps + 1):
        grad = L2 * w
        for item in train:
            s = item.x @ w
            p = np.exp(s - s.max())
            p /= p.sum()
            q = p * item.gold
            q /= q.sum()
            grad += (item.x.T @ (p - q)) / (per_corpus[item.corpus] * len(per_corpus))
        grad *= mask
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        w -= 0.05 * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    return w * mask


def answer_of(item: Item, w: np.ndarray, gap: float) -> tuple[list[int], float]:
    """The units the engine would quote (indexes, best first) and the best
    score: selection's stopping rules (docsum.models.selection._pick) over
    the units read."""
    if not len(item.texts):
        return [], -math.inf
    s = item.x @ w
    order = sorted(range(len(s)), key=lambda k: (-s[k], k))
    chosen: list[int] = []
    quoted = 0
    covered: set[str] = set()
    for k in order:
        if chosen and (len(chosen) >= MOST_UNITS or s[k] < s[order[0]] - gap):
            break
        if chosen and quoted + item.words[k] > WORDS_PER_ANSWER_SENTENCE * MOST_UNITS:
            continue
        far = s[k] < s[order[0]] - unitweights.NEAR_GAP and item.x[k, ROW_LABEL] <= 0
        if chosen and far and not adds_to_answer(item.asked_in[k], set().union(*item.asked_in), covered):
            continue
        chosen.append(k)
        covered |= item.asked_in[k]
        quoted += item.words[k]
    return chosen, float(s[order[0]])


def in_first_words(item: Item, chosen: list[int]) -> bool:
    head = " ".join(" ".join(item.texts[k] for k in chosen).split()[:FIRST_WORDS])
    return is_gold(head, item.reference, item.golds[1:], item.question)


def report(items: list[Item], w: np.ndarray, gap: float, floor: float) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for corpus in sorted({i.corpus for i in items}):
        for split in ("dev", "heldout"):
            group = [i for i in items if i.corpus == corpus and i.split == split]
            answerable = [i for i in group if i.answerable]
            if not answerable:
                continue
            top1 = hits = units = declined = 0
            for item in answerable:
                chosen, best = answer_of(item, w, gap)
                if item.declined_before or best < floor:
                    declined += 1
                    continue
                top1 += int(bool(item.gold[chosen[0]]))
                hits += int(in_first_words(item, chosen))
                units += len(chosen)
            unanswerable = [i for i in group if not i.answerable]
            un_declined = sum(1 for i in unanswerable if i.declined_before or answer_of(i, w, gap)[1] < floor)
            n = len(answerable)
            out[f"{corpus}/{split}"] = {
                "n": n,
                "reachable": round(sum(1 for i in answerable if i.gold.any()) / n, 3),
                "top1": round(top1 / n, 3),
                "answer50": round(hits / n, 3),
                "units": round(units / max(1, n - declined), 2),
                "answerable_declined": round(declined / n, 3),
                "unanswerable_declined": round(un_declined / len(unanswerable), 3) if unanswerable else None,
            }
    return out


def dev_rates(items: list[Item], w: np.ndarray, gap: float) -> list[float]:
    """The development answer50 of each corpus."""
    rates = []
    for corpus in sorted({i.corpus for i in items}):
        dev = [i for i in items if i.corpus == corpus and i.split == "dev" and i.answerable]
        hits = sum(1 for i in dev if not i.declined_before and in_first_words(i, answer_of(i, w, gap)[0]))
        rates.append(hits / max(1, len(dev)))
    return rates


def search(items: list[Item], w0: np.ndarray, gap0: float, rounds: int = 3) -> tuple[np.ndarray, float]:
    """Coordinate ascent on `objective` from the weights in force: each weight
    (and the stop gap) in turn takes the value of a small grid around it that
    raises the development answer50 most (averaged over the corpora) while
    lowering no corpus's: a change that helps one kind of document at the cost
    of another is not taken. It fits what is measured (the gold in the
    answer's first words), where the logit fits the best unit alone."""
    w, gap = w0.copy(), gap0
    rates = dev_rates(items, w, gap)
    best = sum(rates) / len(rates)
    for _ in range(rounds):
        moved = False
        for k in range(len(FEATURES) + 1):
            here = gap if k == len(FEATURES) else float(w[k])
            grid = {here * f for f in (0.0, 0.5, 0.8, 1.25, 2.0)} | {
                here + d for d in (-1, -0.5, -0.25, -0.1, 0.1, 0.25, 0.5, 1)
            }
            if k == len(FEATURES):
                grid = {round(g, 2) for g in grid if g >= 0}
            for value in sorted(grid):
                trial_w, trial_gap = w.copy(), gap
                if k == len(FEATURES):
                    trial_gap = value
                else:
                    trial_w[k] = value
                trial = dev_rates(items, trial_w, trial_gap)
                got = sum(trial) / len(trial)
                if got > best + 1e-9 and all(t >= r for t, r in zip(trial, rates)):
                    best, rates, w, gap, moved = got, trial, trial_w, trial_gap, True
        if not moved:
            break
    return w, gap


def choose_gap(items: list[Item], w: np.ndarray) -> float:
    """The smallest gap whose development answer50 is within 1% of the best gap's."""
    dev = [i for i in items if i.split == "dev" and i.answerable and len(i.texts)]
    grid = [round(0.05 * k, 2) for k in range(0, 41)]
    rates = [sum(in_first_words(i, answer_of(i, w, g)[0]) for i in dev) / max(1, len(dev)) for g in grid]
    best = max(rates)
    return next(g for g, r in zip(grid, rates) if r >= best - 0.01)


def choose_floor(items: list[Item], w: np.ndarray, gap: float, most_declined: float = 0.08) -> float:
    """The highest threshold on the best unit's score that declines at most
    `most_declined` of every development corpus's answerable questions."""
    dev = [i for i in items if i.split == "dev" and i.answerable]
    floor = -math.inf
    for t in sorted({round(answer_of(i, w, gap)[1], 3) for i in dev if len(i.texts)}):
        ok = True
        for corpus in {i.corpus for i in dev}:
            group = [i for i in dev if i.corpus == corpus]
            declined = sum(1 for i in group if i.declined_before or answer_of(i, w, gap)[1] < t)
            ok &= declined / len(group) <= most_declined
        if not ok:
            break
        floor = t
    return floor


def write_weights(w: np.ndarray, gap: float, floor: float) -> None:
    path = REPO / "docsum" / "models" / "unitweights.py"
    text = path.read_text()
    head = text[: text.index("WEIGHTS: dict[str, float] = {")]
    lines = [f'    "{name}": {round(float(w[k]), 3)!r},' for k, name in enumerate(FEATURES)]
    body = "WEIGHTS: dict[str, float] = {\n" + "\n".join(lines) + "\n}\n"
    body += (
        "# A further unit joins the answer only when its score is within this much of\n"
        "# the best unit's: the answer stops after the fact.\n"
        f"STOP_GAP = {gap!r}\n"
        "# One further than this from the best joins only when it holds a term of the\n"
        "# question the units before it lack (it answers another part of the question).\n"
        f"NEAR_GAP = {unitweights.NEAR_GAP!r}\n"
        "# The offline engine declines when no unit scores this much (fitted to\n"
        "# decline at most 8% of any development set's answerable questions).\n"
        f"ANSWER_SCORE_FLOOR = {round(floor, 3)!r}\n"
    )
    path.write_text(head + body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", required=True, help="NAME=DIR (repeatable)")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "docsum-fit")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--ablation", action="store_true", help="refit without each feature in turn")
    parser.add_argument(
        "--write",
        choices=("fitted", "searched"),
        default=None,
        help="write those weights to docsum/models/unitweights.py",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    items: list[Item] = []
    for spec in args.corpus:
        name, _, folder = spec.partition("=")
        items += asyncio.run(collect(name, Path(folder), args.cache, args.limit))
        print(f"{name}: {sum(1 for i in items if i.corpus == name)} questions read", file=sys.stderr)
    now = np.array([unitweights.WEIGHTS.get(f, 0.0) for f in FEATURES])
    floor_now = float(getattr(unitweights, "ANSWER_SCORE_FLOOR", -math.inf))
    figures_out: dict[str, Any] = {"in_force": report(items, now, unitweights.STOP_GAP, floor_now)}
    # The weights in force with their stop gap and threshold chosen on the
    # development halves (the same choice the fitted weights get).
    gap_now = choose_gap(items, now)
    floor_tuned = choose_floor(items, now, gap_now)
    figures_out["in_force_tuned"] = report(items, now, gap_now, floor_tuned)
    figures_out["in_force_gap"], figures_out["in_force_floor"] = gap_now, floor_tuned
    w = fit(items, list(range(len(FEATURES))))
    gap = choose_gap(items, w)
    floor = choose_floor(items, w, gap)
    figures_out["fitted"] = report(items, w, gap, floor)
    figures_out["weights"] = {f: round(float(w[k]), 3) for k, f in enumerate(FEATURES)}
    figures_out["stop_gap"], figures_out["floor"] = gap, floor
    ws, gap_s = search(items, now, unitweights.STOP_GAP)
    floor_s = choose_floor(items, ws, gap_s)
    figures_out["searched"] = report(items, ws, gap_s, floor_s)
    figures_out["searched_weights"] = {f: round(float(ws[k]), 3) for k, f in enumerate(FEATURES)}
    figures_out["searched_gap"], figures_out["searched_floor"] = gap_s, floor_s
    for label in ("in_force", "in_force_tuned", "fitted", "searched"):
        print(f"\n{label}")
        for key, row in figures_out[label].items():
            print(f"  {key:24} " + "  ".join(f"{k} {v}" for k, v in row.items()))
    print("\nweights", figures_out["weights"], "stop gap", gap, "floor", round(floor, 3))
    print("in force: stop gap", gap_now, "floor", round(floor_tuned, 3))
    print("searched", figures_out["searched_weights"], "stop gap", gap_s, "floor", round(floor_s, 3))
    if args.ablation:
        figures_out["ablation"] = {}
        for k, name in enumerate(FEATURES):
            wk = fit(items, [j for j in range(len(FEATURES)) if j != k])
            rows = report(items, wk, gap, floor)
            figures_out["ablation"][name] = rows
            held = {key: row["answer50"] for key, row in rows.items() if key.endswith("heldout")}
            print(f"without {name:12} held-out answer50 {held}")
    if args.json:
        args.json.write_text(json.dumps(figures_out, indent=1) + "\n")
    if args.write == "fitted":
        write_weights(w, gap, floor)
    elif args.write == "in_force_tuned":
        write_weights(now, gap_now, floor_tuned)
    elif args.write == "searched":
        write_weights(ws, gap_s, floor_s)


if __name__ == "__main__":
    main()
