"""The project's fake OpenAI-compatible server (tests/fakeopenai.py) as a
process of its own, for benchmarks: prints its base URL on stdout, serves
until killed.

    python bench/fakeserver.py --latency 0.3 --dim 1536

Choice prompts (LLM retrieval) get a parseable answer naming the first
document, so `--retriever hybrid` does real work instead of falling back. The
server's request log is cleared every few seconds: a 100,000-document build
would otherwise keep every prompt in memory. With `--trace FILE` the finished
requests are written to FILE instead (path, start and end on the machine's
monotonic clock), from which bench/scale.py tells how many were in flight when.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fakeopenai import FakeOpenAI, Reply  # noqa: E402


def respond(body: dict[str, Any]) -> Reply | str:
    text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []) if isinstance(m, dict))
    if "numbered list of documents" in text:
        return '{"choices": [{"doc": 1, "relevance": 8}]}'
    # A summary (or an answer) made of the first words of the material between
    # the prompt's two rules, so that summaries differ as documents do.
    lines = text.splitlines()
    rules = [i for i, line in enumerate(lines) if len(line) > 8 and set(line) == {"-"}]
    if len(rules) >= 2:
        words = " ".join(lines[rules[0] + 1 : rules[1]]).split()
        return " ".join(words[:40]) or "Nothing."
    return Reply()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--dim", type=int, default=1536)
    parser.add_argument(
        "--trace",
        type=Path,
        help="append `path started finished` (time.monotonic seconds) of every finished request to this file, each second",
    )
    args = parser.parse_args()
    fake = FakeOpenAI(responder=respond, latency=args.latency, embedding_dim=args.dim).start()
    print(fake.base_url, flush=True)
    while True:
        time.sleep(1 if args.trace else 5)
        if args.trace is None:
            fake.reset()
            continue
        finished = fake.take_finished()
        with open(args.trace, "a") as trace:
            trace.writelines(f"{r.path} {r.started:.4f} {r.finished:.4f}\n" for r in finished)


if __name__ == "__main__":
    main()
