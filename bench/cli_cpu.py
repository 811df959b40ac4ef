"""CPU seconds (user + system) of short docsum commands, median of N runs,
for two checkouts side by side in one run: the start-up cost a person feels
at the command line (`--help`, a command's help, a listing, an offline
question on the sample store).

    python bench/cli_cpu.py [--runs 7] [--before DIR]   # DIR: another checkout to compare with

Each checkout runs as `python -m cli.main` from its own folder (so its own
`cli` and `docsum` packages are imported), with DOCSUM_HOME in a fresh
temporary folder and the sample store built once per checkout, offline.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUESTION = "When is the auction, and what did the oven cost?"


def cpu_of(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    """CPU seconds of one child process (its own, from the rusage delta)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(checkout: Path, runs: int) -> dict[str, float]:
    home = Path(tempfile.mkdtemp(prefix="docsum-cpu-"))
    env = {**os.environ, "DOCSUM_HOME": str(home), "PYTHONPATH": str(checkout)}
    for name in [n for n in env if n.startswith(("DOCSUM_", "OPENAI_")) and n != "DOCSUM_HOME"]:
        del env[name]
    docsum = [sys.executable, "-m", "cli.main"]
    store = home / "sample.sqlite"
    subprocess.run(
        [*docsum, "build", str(REPO / "sample_data" / "docs"), "--store", str(store), "-q"],
        cwd=checkout,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    commands = {
        "docsum --help": ["--help"],
        "docsum ask --help": ["ask", "--help"],
        "docsum summaries": ["summaries", "--store", str(store)],
        "docsum ask (offline, sample store)": ["ask", QUESTION, "--store", str(store), "--no-stream"],
    }
    out = {}
    for label, args in commands.items():
        cpu_of([*docsum, *args], checkout, env)  # warm the file cache and the bytecode
        out[label] = statistics.median(cpu_of([*docsum, *args], checkout, env) for _ in range(runs))
    shutil.rmtree(home, ignore_errors=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--before", type=Path, help="another checkout to measure in the same run")
    args = parser.parse_args()
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")
    results = {"this checkout": measure(REPO, args.runs)}
    if args.before:
        results["before"] = measure(args.before.resolve(), args.runs)
    names = list(results)
    print("| command | " + " | ".join(f"{n} (CPU s)" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    for label in results[names[0]]:
        print(f"| `{label}` | " + " | ".join(f"{results[n][label]:.2f}" for n in names) + " |")
    print(f"load after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
