"""`docsum build` through the real CLI: reconciliation, cost of re-runs, the
dry-run plan, the store's files, and the summaries/show/remove commands.

The LLM is the offline engine or a FakeOpenAI server reached with --base-url.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import time
from pathlib import Path

import pytest
from fakeopenai import FakeOpenAI, Reply
from helpers import (
    SAMPLE_DOCS,
    llm_args,
    make_docs,
    marker,
    only_the_error_document,
    requests_per_marker,
    run_cli,
    stored_paths,
)

BUILD_KEYS = {"store", "documents", "failures", "usage", "elapsed_s"}
COUNT_KEYS = {"added", "updated", "unchanged", "removed", "failed"}
USAGE_KEYS = {"llm_calls", "prompt_tokens", "completion_tokens"}


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    make_docs(folder, 4)
    return folder


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store" / "index.sqlite"


def build(store: Path, *args: str | Path):  # type: ignore[no-untyped-def]
    return run_cli("build", *args, "--store", store, "--json")


def bump_mtime(path: Path) -> None:
    """A new mtime even on file systems with coarse timestamps."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


# --------------------------------------------------------------------------- the sample folder


def test_build_adds_every_sample_document_offline(store: Path) -> None:
    result = build(store, SAMPLE_DOCS)
    assert result.code == 0, result
    data = result.json()
    assert BUILD_KEYS <= set(data)
    assert set(data["documents"]) >= COUNT_KEYS
    assert USAGE_KEYS <= set(data["usage"])
    assert data["documents"] == {"added": 8, "updated": 0, "unchanged": 0, "removed": 0, "failed": 0}
    assert data["failures"] == []
    assert data["usage"]["llm_calls"] == 8  # one summary per (small) document
    assert isinstance(data["elapsed_s"], (int, float)) and data["elapsed_s"] >= 0
    assert Path(data["store"]) == store
    assert stored_paths(store) == {p.name for p in SAMPLE_DOCS.iterdir()}
    # The offline engine says it is in use, on stderr only.
    assert "offline extractive engine" in result.stderr
    assert "offline" not in result.stdout


def test_second_build_of_an_unchanged_folder_makes_no_llm_call(store: Path, fake_llm: FakeOpenAI) -> None:
    first = build(store, SAMPLE_DOCS, *llm_args(fake_llm))
    assert first.code == 0, first
    assert len(fake_llm.chat_requests()) == 8
    assert first.json()["usage"]["llm_calls"] == 8

    fake_llm.reset()
    second = build(store, SAMPLE_DOCS, *llm_args(fake_llm))
    assert second.code == 0, second
    assert fake_llm.requests == []  # no chat, no embedding, nothing
    data = second.json()
    assert data["documents"] == {"added": 0, "updated": 0, "unchanged": 8, "removed": 0, "failed": 0}
    assert data["usage"]["llm_calls"] == 0
    assert data["usage"]["prompt_tokens"] == 0


def test_edit_touch_delete_add_and_no_prune(tmp_path: Path, store: Path, fake_llm: FakeOpenAI) -> None:
    folder = tmp_path / "docs"
    paths = make_docs(folder, 4)
    markers = [marker(i) for i in range(6)]
    assert build(store, folder, *llm_args(fake_llm)).code == 0
    assert requests_per_marker(fake_llm.chat_requests(), markers[:4]) == {m: 1 for m in markers[:4]}

    # A content change (different size) is re-summarized; only that document.
    fake_llm.reset()
    paths[0].write_text(paths[0].read_text() + "\nAn added paragraph about the harbour.\n")
    data = build(store, folder, *llm_args(fake_llm)).json()
    assert data["documents"] == {"added": 0, "updated": 1, "unchanged": 3, "removed": 0, "failed": 0}
    assert requests_per_marker(fake_llm.chat_requests(), markers) == {**{m: 0 for m in markers}, markers[0]: 1}
    assert "harbour" in fake_llm.chat_requests()[0].prompt

    # A same-size edit with a new mtime is caught by the content hash.
    fake_llm.reset()
    text = paths[1].read_text()
    paths[1].write_text(text.replace("fine", "FINE", 1))
    assert paths[1].stat().st_size == len(text.encode())
    bump_mtime(paths[1])
    data = build(store, folder, *llm_args(fake_llm)).json()
    assert data["documents"]["updated"] == 1 and data["documents"]["unchanged"] == 3
    assert len(fake_llm.chat_requests()) == 1 and marker(1) in fake_llm.chat_requests()[0].prompt

    # touch: same content, new mtime -> unchanged, no call, no re-hash next time.
    fake_llm.reset()
    bump_mtime(paths[2])
    data = build(store, folder, *llm_args(fake_llm)).json()
    assert data["documents"] == {"added": 0, "updated": 0, "unchanged": 4, "removed": 0, "failed": 0}
    assert fake_llm.requests == []
    conn = sqlite3.connect(store)
    stored_mtime = conn.execute("SELECT mtime_ns FROM documents WHERE path = ?", (paths[2].name,)).fetchone()[0]
    conn.close()
    assert stored_mtime == paths[2].stat().st_mtime_ns

    # Delete -> removed (no call); add -> added (one call, for the new one).
    fake_llm.reset()
    paths[3].unlink()
    make_docs(folder, 1, start=4)
    data = build(store, folder, *llm_args(fake_llm)).json()
    assert data["documents"] == {"added": 1, "updated": 0, "unchanged": 3, "removed": 1, "failed": 0}
    assert requests_per_marker(fake_llm.chat_requests(), markers) == {**{m: 0 for m in markers}, marker(4): 1}
    assert paths[3].name not in stored_paths(store)
    assert run_cli("show", paths[3].name, "--store", store).code == 2

    # --no-prune keeps a vanished file's document.
    paths[0].unlink()
    data = build(store, folder, "--no-prune", *llm_args(fake_llm)).json()
    assert data["documents"]["removed"] == 0
    assert paths[0].name in stored_paths(store)
    # ... and a normal build then removes it.
    data = build(store, folder, *llm_args(fake_llm)).json()
    assert data["documents"]["removed"] == 1
    assert paths[0].name not in stored_paths(store)


def test_building_one_file_does_not_prune_its_siblings(docs: Path, store: Path) -> None:
    assert build(store, docs).code == 0
    before = stored_paths(store)
    assert len(before) == 4
    one = build(store, docs / "doc000.txt")
    assert one.code == 0, one
    assert one.json()["documents"]["removed"] == 0
    # The file named directly is stored under its folder: same document.
    assert one.json()["documents"]["unchanged"] == 1
    assert stored_paths(store) == before


def test_two_folders_in_one_store_do_not_prune_each_other(tmp_path: Path, store: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    make_docs(a, 2)
    make_docs(b, 3, start=10)
    assert build(store, a).code == 0
    data = build(store, b).json()
    assert data["documents"]["added"] == 3 and data["documents"]["removed"] == 0
    assert len(stored_paths(store)) == 5


def test_missing_path_is_a_usage_error_and_prunes_nothing(docs: Path, store: Path, tmp_path: Path) -> None:
    assert build(store, docs).code == 0
    result = build(store, tmp_path / "not-mounted")
    assert result.code == 2, result
    assert "not-mounted" in result.stderr and "no such file" in result.stderr
    only_the_error_document(result)
    assert len(stored_paths(store)) == 4


def test_unsupported_file_named_directly_is_a_usage_error(tmp_path: Path, store: Path) -> None:
    doc = tmp_path / "report.xlsx"
    doc.write_bytes(b"PK\x03\x04 a spreadsheet")
    result = build(store, doc)
    assert result.code == 2, result
    assert "report.xlsx" in result.stderr and ".pdf" in result.stderr
    assert not store.exists()


# --------------------------------------------------------------------------- settings that change summaries or nodes


def test_new_summary_query_or_model_resummarizes(docs: Path, store: Path, fake_llm: FakeOpenAI) -> None:
    assert build(store, docs, *llm_args(fake_llm)).code == 0
    fake_llm.reset()

    data = build(store, docs, "--summary-query", "List every date mentioned.", *llm_args(fake_llm)).json()
    assert data["documents"]["updated"] == 4
    assert len(fake_llm.chat_requests()) == 4
    assert all("List every date mentioned." in r.prompt for r in fake_llm.chat_requests())

    fake_llm.reset()  # the same query again: nothing to do
    data = build(store, docs, "--summary-query", "List every date mentioned.", *llm_args(fake_llm)).json()
    assert data["documents"]["unchanged"] == 4 and fake_llm.requests == []

    data = build(
        store, docs, "--summary-query", "List every date mentioned.", *llm_args(fake_llm, model="fake-chat-2")
    ).json()
    assert data["documents"]["updated"] == 4
    assert {r.body["model"] for r in fake_llm.chat_requests()} == {"fake-chat-2"}
    summaries = run_cli("summaries", "--store", store, "--json").json()
    assert len(summaries) == 4


def test_new_chunk_size_resplits_without_llm_calls(docs: Path, store: Path, fake_llm: FakeOpenAI) -> None:
    assert build(store, docs, *llm_args(fake_llm)).code == 0
    before = run_cli("show", "doc000.txt", "--store", store, "--json").json()
    assert before["nodes"] == 1
    fake_llm.reset()

    data = build(store, docs, "--chunk-size", "40", "--chunk-overlap", "0", *llm_args(fake_llm)).json()
    assert data["documents"]["updated"] == 4
    # The summary reads the whole text, not the nodes: no reason to pay for it again.
    assert fake_llm.requests == []
    after = run_cli("show", "doc000.txt", "--store", store, "--json").json()
    assert after["nodes"] > 1
    assert after["summary"] == before["summary"]

    data = build(store, docs, "--chunk-size", "40", "--chunk-overlap", "0", *llm_args(fake_llm)).json()
    assert data["documents"]["unchanged"] == 4


# --------------------------------------------------------------------------- dry run


def _local_usage_fake() -> FakeOpenAI:
    # No usage in the answers: the client counts the prompt it sent with the
    # model's tokenizer (counted_locally), which is what the plan predicts.
    # FakeOpenAI's own "usage" counts words, not tokens, so it cannot match.
    return FakeOpenAI(responder=lambda body: Reply(omit_usage=True))


@pytest.mark.process  # a FakeOpenAI server
def test_dry_run_plan_equals_the_real_build(store: Path) -> None:
    with _local_usage_fake() as fake:
        plan = build(store, SAMPLE_DOCS, "--dry-run", *llm_args(fake))
        assert plan.code == 0, plan
        assert fake.requests == []
        assert not store.exists() and not store.parent.exists()  # a dry run creates nothing
        planned = plan.json()["planned"]
        assert len(plan.json()["plan"]) == 8

        real = build(store, SAMPLE_DOCS, *llm_args(fake))
        assert real.code == 0, real
        usage = real.json()["usage"]
        assert planned["llm_calls"] == len(fake.chat_requests()) == usage["llm_calls"] == 8
        assert planned["prompt_tokens"] == usage["prompt_tokens"]

        # The same numbers are in the store's run record.
        conn = sqlite3.connect(store)
        calls = conn.execute("SELECT COUNT(*), SUM(prompt_tokens) FROM calls WHERE kind != 'embed'").fetchone()
        conn.close()
        assert calls == (8, usage["prompt_tokens"])

        fake.reset()
        again = build(store, SAMPLE_DOCS, "--dry-run", *llm_args(fake)).json()
        assert again["planned"]["llm_calls"] == 0 and again["planned"]["prompt_tokens"] == 0
        assert fake.requests == []


def test_dry_run_shows_updates_and_removals_without_changing_anything(docs: Path, store: Path) -> None:
    assert build(store, docs).code == 0
    (docs / "doc000.txt").write_text("Completely new text about lighthouses.\n")
    (docs / "doc001.txt").unlink()
    make_docs(docs, 1, start=7)
    before = store.read_bytes()

    text = run_cli("build", docs, "--store", store, "--dry-run")
    assert text.code == 0, text
    lines = text.stdout.splitlines()
    assert any(line.startswith("update") and "doc000.txt" in line for line in lines)
    assert any(line.startswith("remove") and "doc001.txt" in line for line in lines)
    assert any(line.startswith("add") and "doc007.txt" in line for line in lines)
    assert "dry run: 1 to add, 1 to update, 1 to remove, 2 unchanged" in text.stdout
    assert store.read_bytes() == before
    assert len(stored_paths(store)) == 4


@pytest.mark.process  # a FakeOpenAI server
def test_dry_run_counts_calls_for_a_document_that_needs_several_prompts(tmp_path: Path, store: Path) -> None:
    folder = tmp_path / "long"
    folder.mkdir()
    sentence = "The committee reviewed the harbour accounts and found them in order. "
    (folder / "long.txt").write_text(sentence * 300)  # ~4000 tokens: several prompts in a 1024 window
    with _local_usage_fake() as fake:
        args = [*llm_args(fake), "--context-window", "1024", "--max-output-tokens", "64"]
        planned = build(store, folder, "--dry-run", *args).json()["planned"]
        real = build(store, folder, *args).json()["usage"]
        assert planned["llm_calls"] == real["llm_calls"] == len(fake.chat_requests()) > 2
        # Upper tree levels are planned at the full output budget: an upper bound.
        assert real["prompt_tokens"] <= planned["prompt_tokens"] <= real["prompt_tokens"] * 1.5


# --------------------------------------------------------------------------- the store's files


def test_store_file_and_directory_are_private(tmp_path: Path) -> None:
    store = tmp_path / "private" / "nested" / "index.sqlite"
    assert build(store, SAMPLE_DOCS).code == 0
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(store.parent.parent.stat().st_mode) == 0o700
    for sibling in store.parent.iterdir():  # -wal, -shm, the lock file
        assert stat.S_IMODE(sibling.stat().st_mode) & 0o077 == 0, sibling


def test_default_store_lives_under_docsum_home(docsum_home: Path, docs: Path) -> None:
    result = run_cli("build", docs, "--json")
    assert result.code == 0, result
    store = Path(result.json()["store"])
    assert store.is_relative_to(docsum_home)
    assert stat.S_IMODE(store.stat().st_mode) == 0o600


def test_store_from_a_newer_docsum_is_refused_untouched(docs: Path, store: Path) -> None:
    assert build(store, docs).code == 0
    conn = sqlite3.connect(store)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    before = store.read_bytes()
    for args in (["build", docs], ["summaries"], ["show", "doc000.txt"], ["remove", "doc000.txt"], ["ask", "what?"]):
        result = run_cli(*args, "--store", store, "--llm", "extractive")
        assert result.code in (1, 2), (args, result)
        assert "newer docsum" in result.stderr, (args, result)
        assert "internal error" not in result.stderr
        assert result.stderr.count("\n") == 1  # one line, no traceback
        assert store.read_bytes() == before, args


def test_unusable_store_locations_are_clear_errors(tmp_path: Path, docs: Path) -> None:
    directory = tmp_path / "a-directory.sqlite"
    directory.mkdir()
    result = run_cli("build", docs, "--store", directory)
    assert result.code == 1, result
    assert "is a directory" in result.stderr and "internal error" not in result.stderr
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = run_cli("build", docs, "--store", blocker / "index.sqlite")
    assert result.code == 1, result
    assert "a-file" in result.stderr and "internal error" not in result.stderr


def test_not_a_store_is_a_clear_error(tmp_path: Path, docs: Path) -> None:
    bogus = tmp_path / "bogus.sqlite"
    bogus.write_text("this is not a database " * 100)
    before = bogus.read_bytes()
    result = run_cli("build", docs, "--store", bogus)
    assert result.code == 1, result
    assert "not a docsum store" in result.stderr and "internal error" not in result.stderr
    assert bogus.read_bytes() == before


# --------------------------------------------------------------------------- summaries, show, remove


def test_summaries_show_and_remove(store: Path) -> None:
    assert build(store, SAMPLE_DOCS).code == 0

    listing = run_cli("summaries", "--store", store, "--json")
    assert listing.code == 0, listing
    docs = listing.json()
    assert isinstance(docs, list) and len(docs) == 8
    assert all({"doc_id", "path", "summary"} <= set(d) for d in docs)
    assert all(d["summary"].strip() for d in docs)
    by_path = {d["path"]: d for d in docs}
    pdf = by_path["council_bulletin_spring_2023.pdf"]

    text = run_cli("summaries", "--store", store)
    assert text.code == 0
    assert len(text.stdout.strip().splitlines()) == 8
    assert all(line.split()[0] in {d["doc_id"] for d in docs} for line in text.stdout.splitlines())

    by_id = run_cli("show", pdf["doc_id"], "--store", store, "--json")
    by_name = run_cli("show", "council_bulletin_spring_2023.pdf", "--store", store, "--json")
    assert by_id.code == by_name.code == 0
    assert by_id.json() == by_name.json()
    shown = by_id.json()
    assert shown["doc_id"] == pdf["doc_id"] and shown["summary"] == pdf["summary"]
    assert shown["nodes"] >= 1 and shown["pages"] >= 1
    plain = run_cli("show", pdf["doc_id"], "--store", store)
    assert plain.code == 0 and pdf["summary"].strip().splitlines()[0] in plain.stdout

    for args in (["show", "no-such-doc"], ["remove", "no-such-doc"]):
        missing = run_cli(*args, "--store", store)
        assert missing.code == 2, missing
        assert "no-such-doc" in missing.stderr and missing.stdout == ""

    removed = run_cli("remove", pdf["doc_id"], "--store", store, "--json")
    assert removed.code == 0, removed
    assert removed.json()["removed"]["path"] == "council_bulletin_spring_2023.pdf"
    removed = run_cli("remove", "storm_wren_incident_report.txt", "--store", store)
    assert removed.code == 0 and "storm_wren_incident_report.txt" in removed.stdout
    assert len(run_cli("summaries", "--store", store, "--json").json()) == 6
    assert run_cli("show", pdf["doc_id"], "--store", store).code == 2

    # The next build puts them back (they are still in the folder).
    data = build(store, SAMPLE_DOCS).json()
    assert data["documents"]["added"] == 2 and data["documents"]["unchanged"] == 6


def test_commands_on_a_missing_store_say_so(tmp_path: Path) -> None:
    missing = tmp_path / "none.sqlite"
    for args in (["summaries"], ["show", "x"], ["remove", "x"]):
        result = run_cli(*args, "--store", missing)
        assert result.code == 2, (args, result)
        assert "docsum build" in result.stderr or "no store" in result.stderr
    assert not missing.exists()


def test_ambiguous_reference_lists_the_candidates(tmp_path: Path, store: Path) -> None:
    for sub in ("x", "y"):
        (tmp_path / "root" / sub).mkdir(parents=True)
        (tmp_path / "root" / sub / "notes.txt").write_text(f"Notes from folder {sub} about tides and boats.\n")
    assert build(store, tmp_path / "root").code == 0
    result = run_cli("show", "notes.txt", "--store", store)
    assert result.code == 2
    assert "x/notes.txt" in result.stderr and "y/notes.txt" in result.stderr
    assert run_cli("show", "x/notes.txt", "--store", store).code == 0


def test_build_copies_sample_folder_and_reconciles_renames(tmp_path: Path, store: Path) -> None:
    folder = tmp_path / "copy"
    shutil.copytree(SAMPLE_DOCS, folder)
    assert build(store, folder).code == 0
    (folder / "storm_wren_incident_report.txt").rename(folder / "renamed_report.txt")
    time.sleep(0.01)
    data = build(store, folder).json()
    # A rename is a removal plus an addition (documents are keyed by path).
    assert data["documents"] == {"added": 1, "updated": 0, "unchanged": 7, "removed": 1, "failed": 0}
    assert "renamed_report.txt" in stored_paths(store)


def test_summary_prompt_and_language_are_used_and_checked(
    docs: Path, store: Path, tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    prompt = tmp_path / "summary.txt"
    prompt.write_text("PIRATE STYLE. Summarize this for a sailor:\n{context_str}\nTask: {query_str}\n")
    data = build(store, docs, "--summary-prompt", prompt, *llm_args(fake_llm)).json()
    assert data["documents"]["added"] == 4
    assert all(r.prompt.startswith("PIRATE STYLE.") for r in fake_llm.chat_requests())

    fake_llm.reset()
    data = build(store, docs, "--summary-prompt", prompt, "--summary-language", "Welsh", *llm_args(fake_llm)).json()
    assert data["documents"]["updated"] == 4  # the language is part of the summary's identity
    assert all("Write the answer in Welsh." in r.prompt for r in fake_llm.chat_requests())

    fake_llm.reset()
    for text, needle in (
        ("Summarize {context_str} for {audience}.", "{audience}"),
        ("Summarize the document. {query_str}", "{context_str}"),
        ("Broken {context_str", "not a valid template"),
    ):
        prompt.write_text(text)
        result = build(store, docs, "--summary-prompt", prompt, *llm_args(fake_llm))
        assert result.code == 2, (text, result)
        assert needle in result.stderr
        only_the_error_document(result)
    assert fake_llm.requests == []  # refused before any call
    result = build(store, docs, "--summary-prompt", tmp_path / "missing.txt")
    assert result.code == 2 and "missing.txt" in result.stderr


def test_build_stops_when_the_server_never_answers(docs: Path, store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_docs(docs, 8, start=4)  # 12 documents
    with FakeOpenAI(responder=lambda body: Reply(status=401, error_message="invalid api key")) as fake:
        result = build(store, docs, *llm_args(fake), "--concurrency", "1")
        assert result.code == 1, result
        only_the_error_document(result)
        assert "stopped" in result.stderr and "401" in result.stderr and "not attempted" in result.stderr
        attempted = len(fake.chat_requests())
        assert 3 <= attempted <= 4  # the first three failures, plus the one already in flight
        conn = sqlite3.connect(store)
        assert conn.execute("SELECT COUNT(*) FROM failures").fetchone()[0] == attempted
        assert conn.execute("SELECT status FROM runs").fetchone()[0] == "aborted"
        conn.close()

    with FakeOpenAI() as fake:  # the server is back: everything is built
        result = build(store, docs, *llm_args(fake))
        assert result.code == 0, result
        assert result.json()["documents"]["added"] == 12


def test_failures_after_a_success_are_per_document(docs: Path, store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCSUM_MAX_RETRIES", "0")
    with FakeOpenAI() as fake:
        fake.script("A good summary of the first document.", *[Reply(status=500)] * 10)
        result = build(store, docs, *llm_args(fake), "--concurrency", "1")
        assert result.code == 3, result
        data = result.json()
        assert data["documents"]["added"] == 1 and data["documents"]["failed"] == 3
        assert all("500" in f["error"] for f in data["failures"])
        assert len(fake.chat_requests()) == 4


def test_a_subfolder_or_parent_folder_build_reuses_what_the_store_holds(
    tmp_path: Path, store: Path, fake_llm: FakeOpenAI
) -> None:
    """`docsum build docs` then `docsum build docs/sub` (or the other way round,
    or one file named directly) reaches the same files from another root: they
    are recognised, not summarized and stored a second time, and a subfolder
    build prunes only inside that subfolder."""
    folder = tmp_path / "docs"
    make_docs(folder, 2)
    inner = make_docs(folder / "sub", 2, start=2)
    assert build(store, folder, *llm_args(fake_llm)).json()["documents"]["added"] == 4

    fake_llm.reset()
    data = build(store, folder / "sub", *llm_args(fake_llm)).json()
    assert data["documents"] == {"added": 0, "updated": 0, "unchanged": 2, "removed": 0, "failed": 0}
    assert build(store, inner[0], *llm_args(fake_llm)).json()["documents"]["unchanged"] == 1
    assert fake_llm.requests == []

    inner[1].unlink()  # vanished from the subfolder: a subfolder build removes it, and only it
    make_docs(folder / "sub", 1, start=9)
    data = build(store, folder / "sub", *llm_args(fake_llm)).json()
    assert data["documents"] == {"added": 1, "updated": 0, "unchanged": 1, "removed": 1, "failed": 0}
    conn = sqlite3.connect(store)
    stored = sorted(conn.execute("SELECT root, path FROM documents").fetchall())
    conn.close()
    root = str(folder.resolve())
    assert stored == [(root, "doc000.txt"), (root, "doc001.txt"), (root, "sub/doc002.txt"), (root, "sub/doc009.txt")]

    # The other way round: the subfolder first, then its parent.
    other = tmp_path / "other.sqlite"
    assert build(other, folder / "sub", *llm_args(fake_llm)).json()["documents"]["added"] == 2
    fake_llm.reset()
    data = build(other, folder, *llm_args(fake_llm)).json()
    assert data["documents"] == {"added": 2, "updated": 0, "unchanged": 2, "removed": 0, "failed": 0}
    assert len(fake_llm.chat_requests()) == 2
    assert len(run_cli("summaries", "--store", other, "--json").json()) == 4
