#!/usr/bin/env python3
"""Answers a person can trust (issue 11), offline, old against new in one run.

For each corpus (SEC 10-Q filings, MuSiQue) this script builds a store with
the older docsum (checked out from REV of this clone with `git worktree add
--detach`) and one with this checkout, both offline, then:

1. recall@3 (and MRR) of the default retriever, old and new (`docsum eval`);
2. answer rate (normal questions answered) and abstention rate (questions
   asked with their gold documents hidden, abstained) per kind, old and new
   (`docsum eval --unanswerable`), and apart for questions about "the
   latest" or "most recent" period, with every question still answered when
   its gold documents were hidden;
3. the share of each question's best gold document that reaches the
   relevance floor (what the floors were calibrated on), per retriever;
4. the offline summaries of four PDFs of ../shared/eval/pdfs, old and new.

    python3 bench/abstention.py                   # old = REV (default: the commit before this work)
    REV=<git revision> EVAL=/path/to/eval python3 bench/abstention.py

Writes bench/results/abstention/*.json and prints Markdown tables. Needs the
evaluation folder (EVAL, default ../shared/eval next to the checkout) and
nothing else outside the repository.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
EVAL = Path(os.environ.get("EVAL", REPO.parent / "shared" / "eval"))
REV = os.environ.get("REV", "e9166f3")  # main before the joint floor, the possessive rule and the figure filter
OUT = Path(os.environ.get("RESULTS", HERE / "results")) / "abstention"
CORPORA = ("sec-10-q", "musique")
# docsum's own folders (the extracted-text cache): a throwaway one.
HOME = tempfile.mkdtemp(prefix="docsum-abstention-home-")
PDFS = ("pdfjs-tracemonkey.pdf", "pdfminer-naacl06-shinyama.pdf", "sf-GeoTopo-komprimiert.pdf", "pdfjs-TAMReview.pdf")
# SEC questions about "the latest" filing: with that filing hidden, the
# company's previous one is the latest the store holds, and answering from it
# is what a person asking that store wants; reported apart.
RELATIVE_PERIOD = re.compile(r"\b(?:latest|most recent)\b", re.IGNORECASE)


def docsum(code: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """One docsum process running the code in `code` (a checkout)."""
    env = dict(os.environ, PYTHONPATH=str(code), DOCSUM_HOME=HOME)
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *map(str, args)],
        cwd=code,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def build(code: Path, folder: Path, store: Path) -> None:
    done = docsum(code, "build", folder, "--store", store)
    if done.returncode not in (0, 3):
        raise SystemExit(f"build of {folder} with {code} failed: {done.stderr[-2000:]}")


def evaluate(code: Path, corpus: Path, store: Path, *extra: str) -> dict[str, Any]:
    done = docsum(code, "eval", corpus / "questions.jsonl", "--store", store, "--json", *extra)
    if done.returncode != 0:
        raise SystemExit(f"eval with {code} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def floor_shares(store: Path, questions: Path) -> dict[str, dict[str, float]]:
    """Per retriever: the share of questions whose best gold document reaches
    the default relevance floor (run in this process, new code)."""
    import asyncio

    from docsum.models.abstain import relevance_floor
    from docsum.models.extractive import ExtractiveLLM
    from docsum.query.corpus import StoreCorpus
    from docsum.query.retrieve import retrieve
    from docsum.store.opening import open_store

    items = [json.loads(line) for line in questions.read_text().splitlines() if line.strip()]
    llm = ExtractiveLLM()
    out: dict[str, dict[str, float]] = {}
    with open_store(store, create=False, readonly=True) as opened:
        corpus = StoreCorpus.beside(opened)
        path_of = {d.doc_id: d.path for d in opened.list_documents()}
        for retriever in ("fused", "bm25", "embedding"):
            floor = relevance_floor(retriever, corpus.embedding_model())
            kept: dict[str, list[bool]] = {"all": []}
            for item in items:
                found = asyncio.run(retrieve(retriever, llm, item["question"], corpus, top_k=3, keep=None))
                gold = set(item["gold_docs"])
                best = max((c.relevance or 0.0 for c in found.candidates if path_of[c.doc_id] in gold), default=0.0)
                ok = floor is None or best >= floor
                kept["all"].append(ok)
                kept.setdefault(item["kind"], []).append(ok)
            out[retriever] = {"floor": floor} | {k: round(sum(v) / len(v), 3) for k, v in kept.items()}
    return out


def relative_period_split(report: dict[str, Any], questions: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Answer and abstention rates of the questions about "the latest" or
    "most recent" period and of the others, with the hidden-gold questions
    still answered."""
    out: dict[str, dict[str, Any]] = {}
    for row in report.get("questions", []):
        outcome = row.get("abstention")
        if outcome is None:
            continue
        group = "latest" if RELATIVE_PERIOD.search(questions.get(row["id"], "")) else "other"
        item = out.setdefault(group, {"n": 0, "answered": 0, "abstained": 0, "missed": []})
        item["n"] += 1
        item["answered"] += outcome["normal"]["status"] == "ok"
        if outcome["hidden_gold"]["status"] != "ok":
            item["abstained"] += 1
        else:
            item["missed"].append(questions.get(row["id"], row["id"]))
    return out


def show(code: Path, store: Path, name: str) -> str:
    done = docsum(code, "show", name, "--store", store)
    return done.stdout if done.returncode == 0 else f"(failed: {done.stderr.strip()[-300:]})"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    old = Path(tempfile.mkdtemp(prefix="docsum-old-"))
    shutil.rmtree(old)
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(old), REV], check=True, capture_output=True
    )
    sys.path.insert(0, str(REPO))
    stores = Path(tempfile.mkdtemp(prefix="docsum-abstention-"))
    results: dict[str, Any] = {"rev": REV, "load": os.getloadavg()}
    try:
        for corpus in CORPORA:
            folder = EVAL / "corpora" / corpus
            row: dict[str, Any] = {}
            questions = {
                q["id"]: q["question"]
                for q in map(json.loads, (folder / "questions.jsonl").read_text().splitlines())
                if q
            }
            for label, code in (("old", old), ("new", REPO)):
                store = stores / f"{label}-{corpus}.sqlite"
                build(code, folder, store)
                report = evaluate(code, folder, store, "--unanswerable", "--details")
                row[label] = {
                    "metrics": report["metrics"],
                    "abstention": report.get("abstention"),
                    "split": relative_period_split(report, questions),
                }
            row["floors"] = floor_shares(stores / f"new-{corpus}.sqlite", folder / "questions.jsonl")
            results[corpus] = row
        pdfs = stores / "pdfs"
        pdfs.mkdir()
        for name in PDFS:
            shutil.copy(EVAL / "pdfs" / name, pdfs / name)
        results["summaries"] = {}
        for label, code in (("old", old), ("new", REPO)):
            store = stores / f"{label}-pdfs.sqlite"
            build(code, pdfs, store)
            results["summaries"][label] = {name: show(code, store, name) for name in PDFS}
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old)], capture_output=True)
        shutil.rmtree(stores, ignore_errors=True)
    (OUT / "abstention.json").write_text(json.dumps(results, indent=1))
    print_tables(results)


def print_tables(results: dict[str, Any]) -> None:
    print(f"old = {results['rev']}, load average at start {results['load']}\n")
    print("| corpus | kind | n | recall@3 old → new | answer rate old → new | abstention rate old → new |")
    print("|---|---|---|---|---|---|")
    for corpus in CORPORA:
        row = results[corpus]
        for kind, rates in row["new"]["abstention"]["by_kind"].items():
            before = row["old"]["abstention"]["by_kind"][kind]
            old = row["old"]["metrics"]["summary"].get(kind, {}).get("recall")
            new = row["new"]["metrics"]["summary"].get(kind, {}).get("recall")
            print(
                f"| {corpus} | {kind} | {rates['n']} | {old:.3f} → {new:.3f} | {before['answer_rate']:.3f} → {rates['answer_rate']:.3f}"
                f" | {before['abstention_rate']:.3f} → {rates['abstention_rate']:.3f} |"
            )
    print("\n| corpus | questions | n | answered (new) | abstained with gold hidden (old → new) |")
    print("|---|---|---|---|---|")
    for corpus in CORPORA:
        for group, item in results[corpus]["new"]["split"].items():
            before = results[corpus]["old"]["split"].get(group, {}).get("abstained", 0)
            print(f"| {corpus} | {group} | {item['n']} | {item['answered']} | {before} → {item['abstained']} |")
    for corpus in CORPORA:
        print(f"\nStill answered with the gold hidden, {corpus} (new):")
        for group, item in results[corpus]["new"]["split"].items():
            for question in item["missed"]:
                print(f"- [{group}] {question}")
    print("\n| corpus | retriever | floor | best gold document reaches it (all / single / multi) |")
    print("|---|---|---|---|")
    for corpus in CORPORA:
        for retriever, shares in results[corpus]["floors"].items():
            print(
                f"| {corpus} | {retriever} | {shares['floor']} | {shares['all']} / {shares.get('single')} / {shares.get('multi')} |"
            )
    for label in ("old", "new"):
        print(f"\n### Summaries, {label}\n")
        for text in results["summaries"][label].values():
            print(f"```\n{text.strip()[:1200]}\n```\n")


if __name__ == "__main__":
    main()
