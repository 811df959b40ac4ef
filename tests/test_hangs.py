"""Nothing docsum opens blocks, and SIGINT/SIGTERM always stop it within
seconds, whatever a thread is doing (issue 26: a FIFO named .docsumignore
once held a build forever, signals ignored, the lock held).

Every case runs the real `docsum` as a child process."""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from helpers import make_docs, run_cli_subprocess, spawn_cli, subprocess_env, wait_for

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")

# A custom synthesizer that blocks its thread in open() on a FIFO nobody
# writes: the kind of call no cancellation can interrupt.
STUCK_PLUGIN = textwrap.dedent(
    """
    import os
    from pathlib import Path

    from docsum import BaseSynthesizer


    class Stuck(BaseSynthesizer):
        def plan(self, query_str, text_chunks, **kw):
            return 0

        def get_response(self, query_str, text_chunks, **kw):
            fifo = Path(os.environ["STUCK_FIFO"])
            (fifo.parent / "entered").write_text("x")
            with open(fifo) as fh:
                return fh.read()
    """
)


def _finishes(proc: subprocess.Popen[str], within: float) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"docsum still running {within:g} s later")
    return proc.returncode, err


def test_fifo_ignore_file_is_refused_not_waited_on(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    make_docs(folder, 2)
    os.mkfifo(folder / ".docsumignore")
    result = run_cli_subprocess("build", folder, "--store", tmp_path / "s.db", timeout=60)
    assert result.code == 3, result.stderr
    lines = [line for line in result.stderr.splitlines() if ".docsumignore" in line and "named pipe" in line]
    assert lines == [
        f"docsum: failed {folder / '.docsumignore'}: cannot read exclusions: is a named pipe (FIFO), not a regular file"
    ]


@pytest.mark.parametrize("option", ["DOCSUM_CONFIG", "--questions", "--summary-prompt"])
def test_fifo_named_as_an_input_file_is_refused(tmp_path: Path, option: str) -> None:
    fifo = tmp_path / "input.fifo"
    os.mkfifo(fifo)
    store = ["--store", str(tmp_path / "s.db")]
    if option == "DOCSUM_CONFIG":
        result = run_cli_subprocess("ask", "what?", *store, env=subprocess_env(DOCSUM_CONFIG=str(fifo)), timeout=60)
    elif option == "--questions":
        result = run_cli_subprocess("ask", "--questions", fifo, *store, timeout=60)
    else:
        result = run_cli_subprocess("build", tmp_path, "--summary-prompt", fifo, *store, timeout=60)
    assert result.code == 2, result.stderr
    assert "named pipe (FIFO), not a regular file" in result.stderr
    assert str(fifo) in result.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_a_command_whose_thread_is_stuck(tmp_path: Path, signum: int) -> None:
    folder = tmp_path / "d"
    make_docs(folder, 2)
    store = tmp_path / "s.db"
    assert run_cli_subprocess("build", folder, "--store", store).code == 0
    (tmp_path / "stuckplugin.py").write_text(STUCK_PLUGIN)
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)
    env = subprocess_env(STUCK_FIFO=str(fifo))
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{env['PYTHONPATH']}"
    proc = spawn_cli("ask", "what do the bees reports say?", "--store", store, "--mode", "stuckplugin:Stuck", env=env)
    wait_for(lambda: (tmp_path / "entered").exists() or proc.poll() is not None, what="the plugin to block")
    assert proc.poll() is None, proc.communicate()
    started = time.monotonic()
    proc.send_signal(signum)
    code, err = _finishes(proc, 30)
    assert time.monotonic() - started < 15
    assert code == (143 if signum == signal.SIGTERM else 130), err
    assert f"interrupted by {signal.Signals(signum).name}" in err
    assert "Traceback" not in err


def test_fifo_among_documents_fails_alone_and_frees_the_lock(tmp_path: Path) -> None:
    """A FIFO named like a document fails on its own line; the build ends,
    and the next one gets the lock (exit 3 again, not 4)."""
    folder = tmp_path / "d"
    make_docs(folder, 3)
    store = tmp_path / "s.db"
    os.mkfifo(folder / "late.txt")
    proc = spawn_cli("build", folder, "--store", store)
    code, err = _finishes(proc, 60)
    assert code == 3 and "late.txt: is a named pipe (FIFO), not a regular file" in err, err
    again = run_cli_subprocess("build", folder, "--store", store, timeout=60)
    assert again.code == 3, again.stderr
