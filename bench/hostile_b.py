"""Issue 26, hangs/workers/limits slice: the figures behind docs/robustness.md.

    python bench/hostile_b.py

Measures (each a real `docsum` process, offline engine):
  1. a build whose .docsumignore is a FIFO: time to exit (it used to block forever);
  2. a build whose .docsumignore has 500,000 lines over six files: time to exit;
  3. matching cost at the pattern cap: compile once, then per path;
  4. SIGKILL of a build mid-parse: time until its fork server, worker and
     resource tracker are all gone (they used to run on 40-45 s);
  5. SIGTERM to `ask` whose thread is stuck in open() on a FIFO: time to exit 143.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from helpers import cli_command, make_docs, subprocess_env  # noqa: E402
from test_hangs import STUCK_PLUGIN  # noqa: E402
from test_workers import cpu_seconds, descendants, running, slow_folder, worker_pids  # noqa: E402


def timed_build(*args: str | Path) -> tuple[float, int]:
    started = time.monotonic()
    done = subprocess.run(cli_command("build", *args), cwd=REPO, env=subprocess_env(), capture_output=True, timeout=600)
    return time.monotonic() - started, done.returncode


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["DOCSUM_HOME"] = str(root / "home")
        folder = root / "six"
        make_docs(folder, 6)
        os.mkfifo(folder / ".docsumignore")
        seconds, code = timed_build(folder, "--store", root / "a.db")
        print(f"1. FIFO .docsumignore: exit {code} after {seconds:.2f} s")
        os.unlink(folder / ".docsumignore")
        (folder / ".docsumignore").write_text("".join(f"pattern{i}*\n" for i in range(500_000)))
        seconds, code = timed_build(folder, "--store", root / "b.db")
        print(f"2. 500,000-line .docsumignore: exit {code} after {seconds:.2f} s")

        from docsum.ingest.discover import MAX_PATTERNS, exclusion_spec

        started = time.monotonic()
        spec = exclusion_spec([f"dir{i}/file{i}*.txt" for i in range(MAX_PATTERNS)], "bench")
        compiled = time.monotonic() - started
        assert spec is not None
        started = time.monotonic()
        for i in range(1000):
            spec.match_file(f"a/b/c{i}.txt")
        per_path = (time.monotonic() - started) / 1000
        print(f"3. {MAX_PATTERNS} patterns: compiled in {compiled:.2f} s, {per_path * 1000:.2f} ms per path")

        slow = root / "slow"
        slow.mkdir()
        log = (root / "build.log").open("wb")
        build = subprocess.Popen(
            cli_command("build", slow_folder(slow), "--store", root / "c.db", "--jobs", "1"),
            cwd=REPO,
            env=subprocess_env(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        while build.poll() is None and not any(cpu_seconds(p) >= 0.5 for p in worker_pids(build.pid)):
            time.sleep(0.05)
        tree = descendants(build.pid)
        build.send_signal(signal.SIGKILL)
        build.wait()
        killed = time.monotonic()
        while any(running(p) for p in tree) and time.monotonic() - killed < 120:
            time.sleep(0.01)
        print(f"4. SIGKILL mid-parse: {len(tree)} helper processes gone {time.monotonic() - killed:.2f} s later")

        store = root / "d.db"
        (folder / ".docsumignore").unlink()
        timed_build(folder, "--store", store)
        (root / "stuckplugin.py").write_text(STUCK_PLUGIN)
        fifo = root / "never-written"
        os.mkfifo(fifo)
        env = subprocess_env(STUCK_FIFO=str(fifo))
        env["PYTHONPATH"] = f"{root}{os.pathsep}{env['PYTHONPATH']}"
        ask = subprocess.Popen(
            cli_command("ask", "what do the bees reports say?", "--store", store, "--mode", "stuckplugin:Stuck"),
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while not (root / "entered").exists() and ask.poll() is None:
            time.sleep(0.05)
        started = time.monotonic()
        ask.send_signal(signal.SIGTERM)
        code = ask.wait(timeout=60)
        print(f"5. SIGTERM with a thread stuck in open(): exit {code} after {time.monotonic() - started:.2f} s")
    print("load:", os.getloadavg())


if __name__ == "__main__":
    main()
