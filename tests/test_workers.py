"""Parse workers never outlive their build, and enforce their own limits
(issue 26: after SIGKILL of a build mid-parse its worker, the fork server and
the resource tracker ran on for 40 s, and an endless parse would never stop).

Real processes: a build reading a large text file (several MB: read and
split in a worker for many seconds) is killed or frozen, and its process
tree is watched through /proc."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
from pathlib import Path

import pytest
from helpers import REPO, cli_command, subprocess_env, wait_for

pytestmark = [
    pytest.mark.process,  # every test starts a build and kills it
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc"),
]


def children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def descendants(pid: int) -> set[int]:
    tree, found, todo = children(), set(), [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def running(pid: int) -> bool:
    """Alive and not a zombie (a dead orphan the container's init has not reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _kill_all(pids: set[int]) -> None:
    """Leave no process behind when the test fails."""
    for pid in pids:
        if running(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def slow_folder(root: Path) -> Path:
    folder = root / "d"
    folder.mkdir()
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "report", "bridge", "river", "orchard"]
    lines = (" ".join(f"{rng.choice(words)}{rng.randint(0, 99999)}" for _ in range(12)) + ".\n" for _ in range(200_000))
    (folder / "big.txt").write_text("".join(lines))  # ~20 MB: past the in-process limit, a minute or more to split
    return folder


def worker_pids(pid: int) -> set[int]:
    """The processes below the build's children: workers, forked by the fork server."""
    return set().union(*(descendants(child) for child in children().get(pid, [])))


def _spawn_build(tmp_path: Path, *extra: str) -> subprocess.Popen[bytes]:
    """A build whose output goes to a file: a pipe the test closes would end
    orphaned workers by SIGPIPE and hide what this file tests."""
    log = (tmp_path / "build.log").open("wb")
    command = cli_command("build", slow_folder(tmp_path), "--store", tmp_path / "s.db", "--jobs", "1", *extra)
    with log:
        return subprocess.Popen(
            command, cwd=REPO, env=subprocess_env(), stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_for_worker(build: subprocess.Popen[bytes]) -> tuple[set[int], set[int]]:
    """Once a worker is reading the file: every process of the build, and the
    workers. Reading shows as processor time: a fresh worker forked from the
    warm fork server has spent almost none."""

    def reading() -> bool:
        return build.poll() is not None or any(cpu_seconds(pid) >= 0.5 for pid in worker_pids(build.pid))

    wait_for(reading, timeout=120, interval=0.1, what="a parse worker reading the file")
    assert build.poll() is None, (build.args[-1:], build.returncode)
    return descendants(build.pid), worker_pids(build.pid)


def test_workers_die_with_a_killed_build(tmp_path: Path) -> None:
    build = _spawn_build(tmp_path)
    tree, _ = _wait_for_worker(build)
    build.send_signal(signal.SIGKILL)
    build.wait()
    try:
        # Without a watch they run on until the parse ends (a minute or more here).
        wait_for(lambda: not any(running(pid) for pid in tree), timeout=10, what="the build's workers to end")
    finally:
        _kill_all(tree)


def test_a_worker_enforces_its_own_time_limit(tmp_path: Path) -> None:
    """With the build frozen (SIGSTOP), nothing outside the worker can stop
    it: it stops itself at --parse-timeout (8 s) plus a short grace, long
    before the parse would end (half a minute or more). Its limit is the
    kernel's alarm: a thread watching a clock was starved by library calls
    that hold the interpreter, and CI saw a worker run on past 40 s."""
    build = _spawn_build(tmp_path, "--parse-timeout", "8")
    workers: set[int] = set()
    try:
        _, workers = _wait_for_worker(build)
        build.send_signal(signal.SIGSTOP)
        wait_for(lambda: not any(running(pid) for pid in workers), timeout=30, what="the worker to stop itself")
        build.send_signal(signal.SIGCONT)
        # Resumed, the build reports the file as too slow: the worker was
        # stopped, it did not finish the file and sit idle.
        assert build.wait(timeout=60) == 3
        assert "still being read after 8 s" in (tmp_path / "build.log").read_text()
    finally:
        if build.poll() is None:
            build.send_signal(signal.SIGCONT)
            build.kill()
            build.wait()
        _kill_all(workers)
