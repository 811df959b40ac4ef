"""Issue 23, from a clone, offline, in one run: `docsum mcp` against
`docsum ask --questions`, and `docsum build --watch` at 1,000 documents.

1. MCP `ask` overhead. The sample store (sample_data/docs), the ten sample
   questions. `ask --questions` is run with the ten questions once and with
   them repeated R times: its cost per question is the difference of the two
   wall times over the extra questions (start-up cancels out). The MCP figure
   is the client-side latency of each `ask` tool call to a warm server,
   sequential, through the SDK's stdio client. Also the wall time of a whole
   one-question `ask --questions` process, what a script without a server pays.
2. Watch latency. A watch over 1,000 stored documents; one file is rewritten
   with a new word, five times: the seconds from its last write to the batch
   line that reports it stored (the vector file and BM25 index refreshed, so a
   question finds it), checked once by `docsum ask`.
3. A burst: 1,000 new files into the watched folder; the summaries made
   (LLM calls summed over the batches) and the documents added.
4. Idle: the watch process's CPU time over IDLE seconds with nothing changing.

`.venv/bin/python bench/agents.py` (about 5 min); JSON in results/agents.json.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DOCSUM = [sys.executable, "-m", "cli.main"]
REPEAT = int(os.environ.get("REPEAT", "5"))
IDLE = float(os.environ.get("IDLE", "30"))
TOPICS = ["bees", "bridges", "ferries", "orchards", "libraries", "storms", "mills", "canals"]


def env(home: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("DOCSUM_", "OPENAI_"))}
    out.update(DOCSUM_HOME=str(home), PYTHONPATH=str(REPO))
    return out


def docsum(*args: Any, home: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*DOCSUM, *map(str, args)], cwd=REPO, env=env(home), capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if check and proc.returncode not in (0, 5):
        raise SystemExit(f"docsum {args} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc


def timed(*args: Any, home: Path) -> float:
    started = time.perf_counter()
    docsum(*args, home=home)
    return time.perf_counter() - started


def write_docs(folder: Path, count: int, start: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(start, start + count):
        topic = TOPICS[i % len(TOPICS)]
        body = " ".join(f"The {topic} report number {i} says item {j} is fine." for j in range(6))
        (folder / f"doc{i:05d}.txt").write_text(f"MARK{i:05d} Notes on {topic}.\n\n{body}\n")


# --------------------------------------------------------------------------- 1. MCP against ask --questions


def mcp_overhead(work: Path) -> dict[str, Any]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    home, store = work / "home", work / "sample.sqlite"
    docsum("build", REPO / "sample_data" / "docs", "--store", store, "-q", home=home)
    questions = [json.loads(line)["question"] for line in (REPO / "sample_data" / "QUESTIONS.jsonl").open()][:10]
    once, many, single = work / "q10.txt", work / "qmany.txt", work / "q1.txt"
    once.write_text("\n".join(questions) + "\n")
    many.write_text("\n".join(questions * (REPEAT + 1)) + "\n")
    single.write_text(questions[0] + "\n")
    ask = ("ask", "--store", store, "--questions")
    docsum(*ask, once, home=home)  # the BM25 index and caches warm, as the server's would be
    t_once = statistics.median(timed(*ask, once, home=home) for _ in range(3))
    t_many = statistics.median(timed(*ask, many, home=home) for _ in range(3))
    per_question = (t_many - t_once) / (len(questions) * REPEAT)
    one_process = statistics.median(timed(*ask, single, home=home) for _ in range(5))

    async def client() -> tuple[list[float], float]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "cli.main", "mcp", "--store", str(store)], env=env(home), cwd=str(REPO)
        )
        started = time.perf_counter()
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    ready = time.perf_counter() - started
                    await session.call_tool("ask", {"question": questions[0]})  # the first opens the store
                    latencies = []
                    for _ in range(REPEAT):
                        for q in questions:
                            t = time.perf_counter()
                            result = await session.call_tool("ask", {"question": q})
                            latencies.append(time.perf_counter() - t)
                            assert not result.is_error, result
        return latencies, ready

    latencies, ready = asyncio.run(client())
    mcp = statistics.median(latencies)
    return {
        "questions": len(questions) * REPEAT,
        "ask_questions_per_question_s": round(per_question, 4),
        "ask_questions_one_question_process_s": round(one_process, 3),
        "mcp_ask_median_s": round(mcp, 4),
        "mcp_ask_p90_s": round(sorted(latencies)[int(0.9 * len(latencies))], 4),
        "mcp_server_ready_s": round(ready, 3),
        "overhead_ms": round((mcp - per_question) * 1000, 1),
    }


# --------------------------------------------------------------------------- 2-4. the watch


class Watch:
    def __init__(self, folder: Path, store: Path, home: Path) -> None:
        self.proc = subprocess.Popen(
            [*DOCSUM, "build", str(folder), "--watch", "--json", "--store", str(store)],
            cwd=REPO, env=env(home), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True,
        )  # fmt: skip
        self.lines: queue.Queue[tuple[float, dict[str, Any]]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put((time.perf_counter(), json.loads(line)))

    def next(self, timeout: float = 600) -> tuple[float, dict[str, Any]]:
        return self.lines.get(timeout=timeout)

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.send_signal(2)
        self.proc.wait(timeout=60)


def watch_figures(work: Path) -> dict[str, Any]:
    home, store, folder = work / "home", work / "watch.sqlite", work / "docs"
    write_docs(folder, 1000)
    watch = Watch(folder, store, home)
    started = time.perf_counter()
    _t, first = watch.next()
    first_s = time.perf_counter() - started
    assert first["documents"]["added"] == 1000, first

    latencies = []
    target = folder / "doc00007.txt"
    for round_ in range(REPEAT):
        word = f"ZEBRA{round_}QUOKKA"
        with target.open("w") as f:
            f.write(f"MARK00007 Notes on bridges. The word of this round is {word}.\n")
        last_write = time.perf_counter()
        while True:
            seen, batch = watch.next()
            if batch.get("documents", {}).get("updated"):
                break
        latencies.append(seen - last_write)
    asked = docsum("ask", f"{word}", "--store", store, "--json", home=home)
    answered = word in asked.stdout

    write_docs(folder, 1000, start=1000)
    burst_started = time.perf_counter()
    added = calls = batches = updated = 0
    while added < 1000:
        _seen, batch = watch.next()
        docs = batch.get("documents", {})
        added += docs.get("added", 0)
        updated += docs.get("updated", 0)
        # offline, a summary is an extractive step, not an LLM call
        calls += batch.get("offline", {}).get("extractive_steps", batch.get("usage", {}).get("llm_calls", 0))
        batches += 1
    burst_s = time.perf_counter() - burst_started

    time.sleep(3)  # let the last refresh settle
    cpu_before, wall_before = watch.cpu_seconds(), time.perf_counter()
    time.sleep(IDLE)
    idle_share = (watch.cpu_seconds() - cpu_before) / (time.perf_counter() - wall_before)
    watch.stop()
    return {
        "first_reconcile_1000_s": round(first_s, 2),
        "changed_file_to_stored_s": [round(x, 3) for x in latencies],
        "changed_file_median_s": round(statistics.median(latencies), 3),
        "changed_file_max_s": round(max(latencies), 3),
        "answerable_checked_by_ask": answered,
        "burst_files": 1000,
        "burst_added": added,
        "burst_updated": updated,
        "burst_summaries": calls,
        "burst_batches": batches,
        "burst_s": round(burst_s, 2),
        "idle_seconds": IDLE,
        "idle_core_share_pct": round(100 * idle_share, 3),
    }


def main() -> None:
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="docsum-agents-") as scratch:
        work = Path(scratch)
        results = {"load_before": load_before, "mcp": mcp_overhead(work), "watch": watch_figures(work)}
    results["load_after"] = os.getloadavg()
    out = REPO / "bench" / "results" / "agents.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
