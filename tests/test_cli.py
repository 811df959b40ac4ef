"""The command line's plumbing: help text, output discipline (stdout carries
results, stderr everything else), quiet and terminal modes, never prompting,
configuration display, and keeping an API key out of every output and file."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from fakeopenai import FakeOpenAI, Reply
from helpers import (
    PLANTED_KEY,
    REPO,
    SAMPLE_DOCS,
    cli_command,
    llm_args,
    make_docs,
    run_cli,
    run_cli_subprocess,
    subprocess_env,
)

COMMANDS = ("build", "ask", "summaries", "show", "remove", "config")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store.sqlite"


@pytest.fixture
def built(store: Path) -> Path:
    result = run_cli("build", SAMPLE_DOCS, "--store", store, "-q")
    assert result.code == 0, result
    return store


# --------------------------------------------------------------------------- help


def test_help_lists_the_commands_and_the_exit_codes() -> None:
    result = run_cli("--help")
    assert result.code == 0
    for command in COMMANDS:
        assert re.search(rf"^\s+{command}\b", result.stdout, re.MULTILINE), command
    text = result.stdout
    assert "Exit codes" in text
    for code, words in (
        ("0", "ok"),
        ("1", "error"),
        ("2", "usage"),
        ("3", "failed"),
        ("4", "locked"),
        ("5", "nothing to answer"),
        ("130", "SIGINT"),
        ("143", "SIGTERM"),
    ):
        assert re.search(rf"\b{code}\b.*{words}", text), (code, words)


def test_no_arguments_shows_help_and_does_nothing(docsum_home: Path) -> None:
    result = run_cli()
    assert "build" in result.stdout + result.stderr
    assert not (docsum_home / "data").exists()


def test_build_help_documents_its_options() -> None:
    text = run_cli("build", "--help").stdout
    for option in (
        "--dry-run",
        "--no-prune",
        "--wait",
        "--summary-query",
        "--summary-prompt",
        "--summary-language",
        "--chunk-size",
        "--chunk-overlap",
        "--follow-symlinks",
    ):
        assert option in text, option


def test_bad_option_values_are_usage_errors(store: Path) -> None:
    for args in (
        ["build", SAMPLE_DOCS, "--chunk-size", "100", "--chunk-overlap", "200"],
        ["build", SAMPLE_DOCS, "--llm", "bogus"],
        ["build", SAMPLE_DOCS, "--index", "../escape"],
        ["build", SAMPLE_DOCS, "--concurrency", "0"],
        ["build", "--store", store],
    ):
        result = run_cli(*args, "--store", store) if "--store" not in args else run_cli(*args)
        assert result.code == 2, (args, result)
        assert result.stdout == ""
    assert not store.exists()


# --------------------------------------------------------------------------- stdout / stderr


def test_json_output_is_exactly_one_document_for_every_command(built: Path) -> None:
    doc_id = run_cli("summaries", "--store", built, "--json").json()[0]["doc_id"]
    for args in (
        ["build", SAMPLE_DOCS],
        ["build", SAMPLE_DOCS, "--dry-run"],
        ["summaries"],
        ["show", doc_id],
        ["config", "show"],
        ["ask", "When did the library reopen after the renovation?"],
        ["remove", doc_id],
    ):
        result = run_cli(*args, "--store", built, "--json")
        assert result.code == 0, (args, result)
        json.loads(result.stdout)  # exactly one document: trailing text would fail here
        assert result.stdout.lstrip()[0] in "[{"


def test_progress_goes_to_stderr_one_line_per_file_off_a_terminal(store: Path) -> None:
    result = run_cli("build", SAMPLE_DOCS, "--store", store)
    assert result.code == 0, result
    # stdout: the one-line result only.
    assert result.stdout.count("\n") == 1
    assert result.stdout.startswith("8 added, 0 updated, 0 unchanged, 0 removed, 0 failed")
    per_file = [line for line in result.stderr.splitlines() if line.startswith("added ")]
    assert sorted(line.split()[1] for line in per_file) == sorted(p.name for p in SAMPLE_DOCS.iterdir())
    assert "\x1b[" not in result.stderr  # no terminal control codes off a terminal

    again = run_cli("build", SAMPLE_DOCS, "--store", store)
    assert again.stdout.startswith("0 added, 0 updated, 8 unchanged")
    assert not any(line.startswith(("added", "updated")) for line in again.stderr.splitlines())


def test_forced_terminal_uses_a_progress_bar(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCSUM_FORCE_TTY", "1")
    result = run_cli("build", SAMPLE_DOCS, "--store", store)
    assert result.code == 0, result
    assert "\x1b[" in result.stderr  # the bar is drawn with control codes
    assert "8/8" in result.stderr
    assert not re.search(r"^added\s", result.stderr, re.MULTILINE)  # no per-file lines
    assert result.stdout.startswith("8 added")


def test_no_color_and_NO_COLOR_turn_colours_off(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCSUM_FORCE_TTY", "1")
    monkeypatch.setenv("NO_COLOR", "1")
    result = run_cli("build", SAMPLE_DOCS, "--store", store)
    assert result.code == 0
    assert "8/8" in result.stderr
    # Bold may stay (NO_COLOR is about colour); no foreground/background colours.
    assert not re.search(r"\x1b\[(?:[0-9;]*;)?(?:3[0-8]|9[0-7]|4[0-8]|10[0-7])(?:;[0-9;]*)?m", result.stderr)


def test_quiet_silences_everything_but_errors(tmp_path: Path, store: Path) -> None:
    folder = tmp_path / "docs"
    make_docs(folder, 2)
    result = run_cli("build", folder, "--store", store, "-q")
    assert result.code == 0
    assert result.stderr == ""
    (folder / "empty.txt").write_text("")
    (folder / "latin1.txt").write_bytes("Caf\xe9 cr\xe8me br\xfbl\xe9e recipes for the fair.\n".encode("latin-1"))
    result = run_cli("build", folder, "--store", store, "-q")
    assert result.code == 3
    assert result.stderr.splitlines() == ["docsum: failed empty.txt: empty file: no text"]


def test_never_prompts_with_stdin_not_a_terminal(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    folder = tmp_path / "docs"
    make_docs(folder, 2)
    env = subprocess_env()
    for args in (
        ["build", folder],
        ["remove", "doc000.txt"],
        ["ask", "What do the reports on bridges say?"],
        ["build", folder],
    ):
        result = run_cli_subprocess(*args, "--store", store, timeout=60, env=env)  # would time out if it waited
        assert result.code == 0, (args, result)


def test_verbose_lists_unchanged_files(built: Path) -> None:
    result = run_cli("build", SAMPLE_DOCS, "--store", built, "-v")
    assert result.code == 0
    assert len([line for line in result.stderr.splitlines() if line.startswith("unchanged")]) == 8


# --------------------------------------------------------------------------- configuration


def test_config_show_reports_values_and_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text('model = "from-file"\ntop_k = 7\n')
    monkeypatch.setenv("DOCSUM_CONFIG", str(config))
    monkeypatch.setenv("DOCSUM_TOP_K", "5")
    result = run_cli("config", "show", "--json", "--concurrency", "3")
    assert result.code == 0, result
    rows = {r["name"]: r for r in result.json()["settings"]}
    assert rows["model"]["value"] == "from-file" and rows["model"]["source"].startswith("file")
    assert rows["top_k"]["value"] == 5 and rows["top_k"]["source"] == "env DOCSUM_TOP_K"
    assert rows["concurrency"]["value"] == 3 and rows["concurrency"]["source"] == "flag"
    assert rows["chunk_size"]["value"] == 1024 and rows["chunk_size"]["source"] == "default"
    text = run_cli("config", "show").stdout
    # Values as a user types them; offline, a server's settings are marked unused.
    assert re.search(r"^model = from-file  \(file .*config.toml, not used offline\)$", text, re.MULTILINE), text
    assert re.search(r"^top_k = 5  \(env DOCSUM_TOP_K\)$", text, re.MULTILINE), text


def test_bad_config_file_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text("modle = 'typo'\n")
    monkeypatch.setenv("DOCSUM_CONFIG", str(config))
    result = run_cli("config", "show")
    assert result.code == 2
    assert "modle" in result.stderr


# --------------------------------------------------------------------------- secrets


def _assert_no_key(*texts: str | bytes) -> None:
    for text in texts:
        data = text.encode() if isinstance(text, str) else text
        assert PLANTED_KEY.encode() not in data
        assert b"PLANTED" not in data


def test_api_key_never_leaves_the_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_KEY)
    store = tmp_path / "store" / "s.sqlite"
    folder = tmp_path / "docs"
    shutil.copytree(SAMPLE_DOCS, folder)
    (folder / "empty.txt").write_text("")  # a failure, with its message
    outputs: list[str] = []
    with FakeOpenAI() as fake:
        fake_args = [*llm_args(fake), "--store", store]
        for args in (
            ["build", folder, "--dry-run", "-v"],
            ["build", folder, "-v"],
            ["build", folder, "--json"],
            ["summaries", "--json"],
            ["show", "storm_wren_incident_report.txt"],
            ["ask", "What happened to the storm wren?", "--explain"],
            ["ask", "What happened to the storm wren?", "--json", "--explain", "-v"],
            ["config", "show"],
            ["config", "show", "--json"],
        ):
            result = run_cli(*args, *fake_args)
            assert result.code in (0, 3), (args, result)
            outputs += [result.stdout, result.stderr]
        # The key was really used: the server saw it.
        assert fake.requests and all(r.headers.get("authorization") == f"Bearer {PLANTED_KEY}" for r in fake.requests)

        # A server that echoes the key back in its error message.
        fake.script(*[Reply(status=401, error_message=f"Incorrect API key provided: {PLANTED_KEY}")] * 20)
        (folder / "new.txt").write_text("A new document about the harbour master and the ferry timetable.\n")
        result = run_cli("build", folder, *fake_args, "--json", "-v")
        assert result.code == 3, result
        assert "401" in result.stdout
        outputs += [result.stdout, result.stderr]

    # An internal error (a bug) whose message carries the key, with and without -v.
    import docsum.builder.plan

    def buggy_discover(*args: object, **kwargs: object) -> None:
        raise RuntimeError(f"bug while holding {os.environ['OPENAI_API_KEY']}")

    monkeypatch.setattr(docsum.builder.plan, "discover", buggy_discover)
    for verbose in ([], ["-v"]):
        result = run_cli("build", folder, "--store", store, "--base-url", "http://127.0.0.1:9/v1", *verbose)
        assert result.code == 1, result
        assert "internal error: RuntimeError: bug while holding ***" in result.stderr
        assert ("Traceback" in result.stderr) == bool(verbose)
        outputs += [result.stdout, result.stderr]

    _assert_no_key(*outputs)
    shown = run_cli("config", "show", "--json")
    assert {r["name"]: r for r in shown.json()["settings"]}["api_key"]["value"] == "(set)"
    assert re.search(r"^api_key = \(set\)  \(env OPENAI_API_KEY\)$", run_cli("config", "show").stdout, re.MULTILINE)
    for path in store.parent.rglob("*"):  # the store, its -wal and -shm, the lock file, the BM25 cache
        if path.is_file():
            _assert_no_key(path.read_bytes())
    conn = sqlite3.connect(store)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    _assert_no_key(store.read_bytes())


def test_a_reader_that_stops_early_gets_a_quiet_exit(tmp_path: Path) -> None:
    """`docsum ask … | head -c 100`: the reader closes the pipe while docsum
    still has most of its output to write. That is the reader's choice, not an
    error: exit 0, and no traceback or 'Broken pipe' on stderr."""
    store = tmp_path / "s.sqlite"
    make_docs(tmp_path / "docs", 1, words=30_000)  # context_only prints ~200 KB, beyond any pipe buffer
    assert run_cli("build", tmp_path / "docs", "--store", store, "-q").code == 0
    proc = subprocess.Popen(
        cli_command("ask", "bees report", "--store", store, "--mode", "context_only", "-q"),
        cwd=REPO,
        env=subprocess_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    head = proc.stdout.read(100)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=60)
    assert head.startswith(b"DOCMARK000") or b"bees" in head
    assert code == 0, err
    assert err == ""
