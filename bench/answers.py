#!/usr/bin/env python3
"""What a person reads, measured (issue 22): `docsum eval --answers` and
`--unanswerable` on each corpus, for two revisions side by side.

For each revision (a git revision checked out with `git worktree add`, or the
working tree for "HEAD") and each corpus (SEC 10-Q text, SEC 10-Q PDF,
MuSiQue, and the general-prose set in bench/prose), this script builds a fresh store offline with that revision's code,
then runs `docsum eval QUESTIONS --answers --unanswerable --json`. It prints
one row per revision and corpus: figure in the first 50 words, answer words
(median / p90), wrong-entity answers, single-hop short gold in the first 50
words, multi-hop answered without the gold, answer and abstention rates, and
recall@3; and writes everything to bench/results/answers/<revision>-<corpus>.json
("after-<corpus>.json" for the working tree).

    EVAL=../shared/eval/corpora python3 bench/answers.py --old 9b98219 [--old REV …] [--skip-old] [--corpus sec-10-q]

The SEC PDF questions are the text set's (gold .txt names resolve by stem).
A revision's results already on disk are reused unless --force; the machine's
load (`uptime`) is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
EVAL = Path(os.environ.get("EVAL", REPO.parent / "shared" / "eval" / "corpora"))
OUT = HERE / "results" / "answers"
CORPORA = {"sec-10-q": "sec-10-q", "sec-10-q-pdf": "sec-10-q", "musique": "musique", "prose": "prose"}
PROSE = HERE / "prose"  # the general-prose set lives in the clone (bench/prose/README.md)


def documents_of(corpus: str) -> Path:
    return PROSE / "docs" if corpus == "prose" else EVAL / corpus


def questions_of(corpus: str) -> Path:
    return PROSE / "questions.jsonl" if corpus == "prose" else EVAL / CORPORA[corpus] / "questions.jsonl"


def checkout(rev: str, into: Path) -> Path:
    """The source of `rev`: the working tree for HEAD, else a detached worktree."""
    if rev == "HEAD":
        return REPO
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "-f", "--detach", str(into), rev], check=True, capture_output=True
    )
    return into


def docsum(source: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(source), "DOCSUM_HOME": str(home)}
    env.pop("OPENAI_API_KEY", None)
    env.pop("DOCSUM_API_KEY", None)
    # `cli.main` from the revision's own tree: `docsum_cli` would be the
    # installed (working tree's) command line over the old library.
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args], env=env, cwd=source, capture_output=True, text=True
    )


def measure(source: Path, corpus: str, work: Path) -> dict[str, Any]:
    store = work / f"{corpus}.sqlite"
    built = docsum(source, work / "home", "build", str(documents_of(corpus)), "--store", str(store), "-q")
    if built.returncode not in (0, 3):
        raise SystemExit(f"build of {corpus} failed: {built.stderr[-500:]}")
    questions = questions_of(corpus)
    ran = docsum(
        source,
        work / "home",
        "eval",
        str(questions),
        "--store",
        str(store),
        "--answers",
        "--unanswerable",
        "--details",
        "--json",
    )
    if ran.returncode != 0:
        raise SystemExit(f"eval of {corpus} failed: {ran.stderr[-500:]}")
    data: dict[str, Any] = json.loads(ran.stdout)
    return data


def row(label: str, corpus: str, data: dict[str, Any]) -> str:
    m = data["answers"]["measures"]
    kinds = m.get("by_kind", {})
    single = kinds.get("single", {}).get("short_gold_in_first_50_words", {})
    multi = kinds.get("multi", {}).get("short_answered_without_gold", {})
    rates = data.get("abstention", {}).get("by_kind", {}).get("all", {})

    def share(s: dict[str, Any]) -> str:
        return f"{s['rate']:.1%} ({s['hits']}/{s['n']})" if s and s.get("n") else "–"

    words = m["answer_words"]
    return (
        f"| {corpus} | {label} | {share(m['figure_in_first_50_words'])} | {words['median']:.0f} / {words['p90']:.0f} "
        f"| {m['wrong_entity']['hits']} of {m['wrong_entity']['n']} | {share(single)} | {share(multi)} "
        f"| {rates.get('answer_rate')} / {rates.get('abstention_rate')} | {data['metrics']['fused']['all']['recall']:.3f} |"
    )


def rescore() -> None:
    """The figure measure of every stored result that keeps its answers
    (--details), measured again with the working tree's
    docsum.query.answermeasures: a corrected measure applies to every round."""
    sys.path.insert(0, str(REPO))
    from docsum.query.answermeasures import GradedAnswer
    from docsum.query.answermeasures import measure as measure_answers

    lines = (EVAL / "sec-10-q" / "questions.jsonl").read_text().splitlines()
    questions = {q["id"]: q for q in map(json.loads, filter(str.strip, lines))}
    for path in sorted(OUT.glob("*-sec-10-q*.json")):
        data = json.loads(path.read_text())
        if "questions" not in data:
            continue
        graded = [
            GradedAnswer(
                item["kind"],
                questions[item["id"]]["question"],
                item["answer"].get("text", ""),
                item["answer"].get("status") == "ok" and bool(item["answer"].get("text", "").strip()),
                questions[item["id"]].get("answer"),
            )
            for item in data["questions"]
            if item.get("answer")
        ]
        stored = data["answers"]["measures"]["figure_in_first_50_words"]
        now = measure_answers(graded).figure_first_50
        print(f"| {path.stem} | {stored['hits']}/{stored['n']} | {now.hits}/{now.n} ({now.rate:.1%}) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--old",
        action="append",
        help="a revision to compare with, its results kept as REV-CORPUS.json (default: 9b98219, main before issue 22's second round)",
    )
    parser.add_argument("--skip-old", action="store_true")
    parser.add_argument("--corpus", action="append", choices=sorted(CORPORA))
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--rescore", action="store_true", help="only measure the stored answers again (see rescore)")
    args = parser.parse_args()
    if args.rescore:
        rescore()
        return
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), file=sys.stderr)
    OUT.mkdir(parents=True, exist_ok=True)
    revisions = ([] if args.skip_old else [(rev, rev) for rev in args.old or ["9b98219"]]) + [("after", "HEAD")]
    lines = [
        "| corpus | code | figure in first 50 words | words median / p90 | wrong entity | single-hop gold in first 50 "
        "| multi-hop answered without gold | answer / abstention rate | recall@3 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for label, rev in revisions:
            source = checkout(rev, Path(tmp) / label)
            for corpus in args.corpus or list(CORPORA):
                path = OUT / f"{label}-{corpus}.json"
                if path.exists() and not args.force:
                    data = json.loads(path.read_text())
                else:
                    print(f"{label} ({rev}): {corpus} …", file=sys.stderr)
                    data = measure(source, corpus, Path(tmp) / f"{label}-work")
                    path.write_text(json.dumps(data, indent=1))
                lines.append(row(label, corpus, data))
            if source != REPO:
                subprocess.run(
                    ["git", "-C", str(REPO), "worktree", "remove", "--force", str(source)], capture_output=True
                )
    print("\n".join(lines))
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), file=sys.stderr)


if __name__ == "__main__":
    main()
