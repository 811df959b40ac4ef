"""`docsum build --watch` with real file events: the real command as a child
process (offline engine, --json: one line per batch on stdout), real files
written, renamed and removed under it. The batching rule itself is tested
alone (Batcher)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import make_docs, run_cli_subprocess, spawn_cli, store_count, stored_paths, subprocess_env, wait_for

from docsum.builder.watch import Batcher

pytestmark = pytest.mark.process  # the watch runs as a docsum subprocess

watchfiles = pytest.importorskip("watchfiles", reason="--watch needs the [watch] extra")

# Generous: the machine running the suite may be busy; a batch is normally well under a second.
BATCH_TIMEOUT = 90.0


class Watcher:
    """A running `docsum build --watch --json`, its batches read as they come."""

    def __init__(self, folder: Path, store: Path, tmp_path: Path, *extra: str) -> None:
        self.env = subprocess_env(DOCSUM_HOME=str(tmp_path / "home"))
        self.proc = spawn_cli(
            "build", folder, "--watch", "--json", "--store", store, "--watch-settle", "0.3", *extra, env=self.env
        )
        self.batches: queue.Queue[dict[str, Any]] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.batches.put(json.loads(line))  # every stdout line is one JSON batch

    def next(self, timeout: float = BATCH_TIMEOUT) -> dict[str, Any]:
        try:
            return self.batches.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no batch within {timeout}s; stderr so far: {self.stop()!r}") from None

    def quiet_for(self, seconds: float) -> bool:
        try:
            self.batches.get(timeout=seconds)
        except queue.Empty:
            return True
        return False

    def stop(self, signum: int = signal.SIGINT) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        try:
            _out, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _out, err = self.proc.communicate()
        return err

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def added(batch: dict[str, Any]) -> tuple[int, int, int]:
    docs = batch["documents"]
    return docs["added"], docs["updated"], docs["removed"]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    make_docs(tmp_path / "docs", 3)
    return tmp_path / "docs"


def test_add_change_rename_delete_and_ignore_each_make_one_batch(folder: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    with Watcher(folder, store, tmp_path) as watch:
        first = watch.next()
        assert first["batch"] == 0 and added(first) == (3, 0, 0)

        (folder / "new.txt").write_text("A note on zebras and their stripes, from the savanna.\n")
        assert added(watch.next()) == (1, 0, 0)
        with (folder / "doc001.txt").open("a") as f:
            f.write("An added line about lighthouses.\n")
        assert added(watch.next()) == (0, 1, 0)
        (folder / "new.txt").rename(folder / "renamed.txt")
        assert added(watch.next()) == (1, 0, 1)
        assert "renamed.txt" in stored_paths(store) and "new.txt" not in stored_paths(store)

        # Questions are answered while the watch holds the store; a second builder is refused.
        asked = run_cli_subprocess("ask", "zebras stripes", "--store", store, "--json", env=watch.env)
        assert asked.code == 0 and "renamed.txt" in asked.stdout
        second = run_cli_subprocess("build", folder, "--store", store, env=watch.env)
        assert second.code == 4 and "locked by a build running as pid" in second.stderr

        (folder / "renamed.txt").unlink()
        assert added(watch.next()) == (0, 0, 1)
        (folder / ".docsumignore").write_text("doc002.txt\n")
        assert added(watch.next()) == (0, 0, 1)
        assert stored_paths(store) == {"doc000.txt", "doc001.txt"}
        assert watch.quiet_for(2.0)  # the store's own writes start no batch
        err = watch.stop()
    assert watch.proc.returncode == 130 and "docsum: interrupted by SIGINT" in err


def test_watch_keeps_a_postgresql_store_current(folder: Path, tmp_path: Path, pg_url: str) -> None:
    """The team store: the same batches, and questions answered while the watch holds its lock."""

    def paths() -> set[str]:
        listed = run_cli_subprocess("summaries", "--store", pg_url, "--json", env=watch.env)
        assert listed.code == 0, listed
        return {d["path"] for d in json.loads(listed.stdout)}

    with Watcher(folder, pg_url, tmp_path) as watch:  # type: ignore[arg-type]
        assert added(watch.next()) == (3, 0, 0)
        (folder / "new.txt").write_text("A note on zebras and their stripes, from the savanna.\n")
        assert added(watch.next()) == (1, 0, 0)
        asked = run_cli_subprocess("ask", "zebras stripes", "--store", pg_url, "--json", env=watch.env)
        assert asked.code == 0 and "new.txt" in asked.stdout, asked
        (folder / "doc000.txt").unlink()
        assert added(watch.next()) == (0, 0, 1)
        assert paths() == {"doc001.txt", "doc002.txt", "new.txt"}
        err = watch.stop(signal.SIGTERM)
    assert watch.proc.returncode == 143, err


def test_plain_output_offline_speaks_of_no_llm_calls(folder: Path, tmp_path: Path) -> None:
    """Without --json: the first reconcile's file lines and each batch line say
    no model is used, as `docsum build` does (they counted LLM calls)."""
    store = tmp_path / "s.sqlite"
    env = subprocess_env(DOCSUM_HOME=str(tmp_path / "home"))
    proc = spawn_cli("build", folder, "--watch", "-v", "--store", store, "--watch-settle", "0.3", env=env)
    try:
        wait_for(lambda: store.exists() and store_count(store) == 3, timeout=BATCH_TIMEOUT, what="first reconcile")
        (folder / "new.txt").write_text("A note on zebras and their stripes, from the savanna.\n")
        wait_for(lambda: store_count(store) == 4, timeout=BATCH_TIMEOUT, what="the new file stored")
        time.sleep(0.5)  # its batch line is written after the store's commit
    finally:
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    assert "batch 1 (1 change): 1 added" in err and "no model used" in err, err
    assert "LLM calls" not in err, err


def test_a_burst_of_1000_files_summarizes_each_exactly_once(folder: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    with Watcher(folder, store, tmp_path) as watch:
        assert added(watch.next()) == (3, 0, 0)
        make_docs(folder, 1000, words=20, start=100)
        total_added = calls = 0
        while total_added < 1000:
            batch = watch.next()
            assert batch["documents"]["updated"] == 0 and batch["documents"]["failed"] == 0
            total_added += batch["documents"]["added"]
            calls += batch["offline"]["extractive_steps"]  # offline: no LLM call, one summary step each
        assert total_added == 1000 and calls == 1000  # one summary per new file, none twice
        # Events of the burst that arrive while its batch runs start one more
        # batch (on a loaded machine): it finds every file stored and
        # summarizes nothing again. Then the watch falls quiet.
        late: list[dict[str, Any]] = []
        while True:
            try:
                late.append(watch.batches.get(timeout=2.0))
            except queue.Empty:
                break
            assert len(late) <= 2, f"the watch never fell quiet after the burst: {late}"
        for batch in late:
            assert added(batch) == (0, 0, 0) and batch["offline"]["extractive_steps"] == 0, batch
    assert store_count(store) == 1003


def test_a_file_written_slowly_is_built_once_when_it_settles(folder: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    with Watcher(folder, store, tmp_path) as watch:
        watch.next()
        with (folder / "slow.txt").open("w") as f:
            for i in range(15):  # 3 s of writing, a piece every 0.2 s (settle is 0.3 s)
                f.write(f"Part {i} of the slow report on ferries. ")
                f.flush()
                time.sleep(0.2)
            f.write("SLOWEND the last words.\n")
        batch = watch.next()
        assert added(batch) == (1, 0, 0) and batch["offline"]["extractive_steps"] == 1
        assert watch.quiet_for(2.0)  # no second summary of the same file
    asked = run_cli_subprocess("ask", "SLOWEND", "--store", store, "--json", env=watch.env)
    assert "SLOWEND" in json.dumps(json.loads(asked.stdout)["sources"])


def test_a_folder_removed_removes_nothing_and_is_watched_again_when_back(folder: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    away = tmp_path / "away"
    with Watcher(folder, store, tmp_path) as watch:
        watch.next()
        folder.rename(away)
        gone = watch.next()
        assert gone["exit_code"] == 2 and "no such file or directory" in gone["error"] and "kept" in gone["error"]
        assert store_count(store) == 3
        away.rename(folder)
        back = watch.next()
        assert back["documents"]["unchanged"] == 3 and back["documents"]["removed"] == 0
        (folder / "after.txt").write_text("Written after the folder came back, about canals.\n")
        assert added(watch.next()) == (1, 0, 0)  # the new folder is watched


def test_sigint_mid_batch_keeps_every_finished_document(folder: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    watch = Watcher(folder, store, tmp_path)
    watch.next()
    make_docs(folder, 400, words=400, start=100)
    deadline = time.monotonic() + BATCH_TIMEOUT
    while store_count(store) <= 3:  # the batch has started storing documents
        assert time.monotonic() < deadline, watch.stop()
        time.sleep(0.05)
    err = watch.stop(signal.SIGINT)
    assert watch.proc.returncode == 130 and "interrupted by SIGINT" in err
    kept = store_count(store)
    assert 3 < kept < 403, "the interrupt came after the batch; nothing was tested"
    # The next build adds exactly what the interrupted batch had not finished.
    rebuilt = run_cli_subprocess("build", folder, "--store", store, "--json", env=watch.env)
    assert rebuilt.code == 0, rebuilt.stderr
    assert json.loads(rebuilt.stdout)["documents"]["added"] == 403 - kept


def test_sigterm_ends_an_idle_watch_with_143(folder: Path, tmp_path: Path) -> None:
    with Watcher(folder, tmp_path / "s.sqlite", tmp_path) as watch:
        watch.next()
        err = watch.stop(signal.SIGTERM)
    assert watch.proc.returncode == 143 and "interrupted by SIGTERM" in err


def test_max_calls_applies_to_each_batch(folder: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    with Watcher(folder, store, tmp_path, "--max-calls", "3") as watch:
        assert added(watch.next()) == (3, 0, 0)  # the first reconcile is within the limit
        make_docs(folder, 4, start=10)
        refused = watch.next()
        assert refused["exit_code"] == 2 and "more than --max-calls 3; nothing was sent" in refused["error"]
        assert store_count(store) == 3


def test_a_first_reconcile_over_max_calls_is_exit_2(folder: Path, tmp_path: Path) -> None:
    env = subprocess_env(DOCSUM_HOME=str(tmp_path / "home"))
    result = run_cli_subprocess(
        "build", folder, "--watch", "--store", tmp_path / "s.sqlite", "--max-calls", "2", env=env
    )
    assert result.code == 2 and "more than --max-calls 2" in result.stderr


def test_without_watchfiles_the_flag_says_how_to_install_it(folder: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "blocker" / "watchfiles"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('blocked for the test')\n")
    env = subprocess_env(DOCSUM_HOME=str(tmp_path / "home"))
    env["PYTHONPATH"] = f"{blocker.parent}{os.pathsep}{env['PYTHONPATH']}"
    result = run_cli_subprocess("build", folder, "--watch", "--store", tmp_path / "s.sqlite", env=env)
    assert result.code == 2 and result.stderr.strip().endswith("pip install 'docsum[watch]'")
    assert not (tmp_path / "s.sqlite").exists()  # refused before anything was built


# --------------------------------------------------------------------------- the batching rule alone


def test_a_batch_waits_for_quiet_then_takes_everything_pending() -> None:
    batcher = Batcher(settle=0.5, max_wait=10.0)
    assert batcher.wait(0.0) is None and not batcher.due(0.0)
    batcher.add({"a"}, 0.0)
    batcher.add({"b"}, 0.4)
    assert not batcher.due(0.8) and batcher.wait(0.8) == pytest.approx(0.1)
    assert batcher.due(0.9)
    assert batcher.take() == {"a", "b"} and batcher.wait(1.0) is None


def test_a_folder_that_never_falls_quiet_is_still_built_by_max_wait() -> None:
    batcher = Batcher(settle=0.5, max_wait=10.0)
    for tick in range(0, 100):  # a change every 0.1 s for 10 s
        batcher.add({f"f{tick}"}, tick / 10)
        assert not batcher.due(tick / 10)
    assert batcher.due(10.0) and len(batcher.take()) == 100
    assert Batcher.for_settle(2.0).max_wait == 40.0 and Batcher.for_settle(0.1).max_wait == 10.0


def test_no_change_no_batch() -> None:
    batcher = Batcher(settle=0.5, max_wait=10.0)
    batcher.add(set(), 0.0)
    assert not batcher.due(100.0) and batcher.take() == set()


def test_watch_and_dry_run_are_refused_together(folder: Path, tmp_path: Path) -> None:
    env = subprocess_env(DOCSUM_HOME=str(tmp_path / "home"))
    result = run_cli_subprocess("build", folder, "--watch", "--dry-run", "--store", tmp_path / "s.sqlite", env=env)
    assert result.code == 2 and "--watch and --dry-run" in result.stderr
    assert not (tmp_path / "s.sqlite").exists()  # refused before the store was opened
