"""CPU time of `docsum --help` and of an offline `docsum ask` on the sample
store, for an older docsum ("before") and this tree ("after"), side by side in
one run with `llm --help` (simonw's llm, installed in a venv of its own), and
whether the two trees' answers are byte for byte the same.

    git archive main | tar -x -C /tmp/docsum-before
    python3 -m venv /tmp/docsum-before/.venv && /tmp/docsum-before/.venv/bin/pip install -q -e /tmp/docsum-before
    python3 -m venv /tmp/llm-venv && /tmp/llm-venv/bin/pip install -q llm
    .venv/bin/python bench/cpu_side_by_side.py --before /tmp/docsum-before --llm /tmp/llm-venv/bin/llm

Each command runs RUNS times (default 7) after one untimed warm-up, the
commands alternated run by run so that a drift in the machine's load hits all
alike; reported: the median and the minimum CPU time (user + system, from
wait4) and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUESTION = "How much did Brindle & Daughter pay for the oven, and when was the auction?"


def cpu_seconds(command: list[str], env: dict[str, str]) -> tuple[float, bytes]:
    """Run `command` to the end; its CPU time (user + system) and its stdout."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env, cwd=tempfile.gettempdir()
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(command)} exited with {proc.returncode}")
        out.seek(0)
        return usage.ru_utime + usage.ru_stime, out.read()


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", type=Path, required=True, help="an older docsum tree with its own .venv")
    parser.add_argument("--llm", type=Path, required=True, help="the llm command, from a venv of its own")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="docsum-cpu-"))
    try:
        trees = {"before": args.before.resolve(), "after": REPO}
        commands: dict[str, tuple[list[str], dict[str, str]]] = {}
        for name, tree in trees.items():
            env = {**os.environ, "DOCSUM_HOME": str(work / f"home-{name}")}
            env = {k: v for k, v in env.items() if not k.startswith("DOCSUM_") or k == "DOCSUM_HOME"}
            env.pop("OPENAI_API_KEY", None)
            docsum = str(tree / ".venv" / "bin" / "docsum")
            store = str(work / f"{name}.sqlite")
            built = subprocess.run(
                [docsum, "build", str(tree / "sample_data" / "docs"), "--store", store],
                env=env,
                capture_output=True,
                cwd=work,
            )
            if built.returncode != 0:
                raise SystemExit(f"the {name} build failed ({built.returncode}): {built.stderr.decode()[-2000:]}")
            commands[f"docsum --help ({name})"] = ([docsum, "--help"], env)
            commands[f"ask offline ({name})"] = ([docsum, "ask", QUESTION, "--store", store], env)
        commands["llm --help"] = ([str(args.llm), "--help"], dict(os.environ))
        load_before = loadavg()
        times: dict[str, list[float]] = {name: [] for name in commands}
        answers: dict[str, bytes] = {}
        for run in range(args.runs + 1):
            for name, (command, env) in commands.items():
                seconds, out = cpu_seconds(command, env)
                if run:  # the first round warms the caches
                    times[name].append(seconds)
                answers[name] = out
        print(f"load average {load_before} before, {loadavg()} after; {os.cpu_count()} cores; {args.runs} runs each")
        print(f"{'command':<26} {'median CPU s':>12} {'min CPU s':>10}")
        for name, values in times.items():
            print(f"{name:<26} {statistics.median(values):>12.3f} {min(values):>10.3f}")
        same = answers["ask offline (before)"] == answers["ask offline (after)"]
        print(f"offline answers byte-identical: {same}")
        if not same:
            print("before:", answers["ask offline (before)"].decode(errors="replace"))
            print("after:", answers["ask offline (after)"].decode(errors="replace"))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
