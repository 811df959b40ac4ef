"""Builds that meet bad input, crashes, signals and each other.

Real PDFs from the shared evaluation set (as its manifest expects), generated
awkward files, SIGKILL at several points with a resume that summarizes only
what is missing, SIGINT/SIGTERM, two builds at once, and (opt-in, `-m slow`) a
50 MB file built with bounded memory.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from fakeopenai import FakeOpenAI
from helpers import (
    EVAL_PDFS,
    NOBODY,
    SAMPLE_DOCS,
    cli_command,
    llm_args,
    make_docs,
    marker,
    requests_per_marker,
    run_cli,
    run_cli_as_nobody,
    spawn_cli,
    store_count,
    stored_paths,
    subprocess_env,
    wait_for,
)

from docsum.store.sqlite import Store


def build_json(store: Path, *args: str | Path):  # type: ignore[no-untyped-def]
    result = run_cli("build", *args, "--store", store, "--json")
    return result, result.json() if result.stdout.strip() else None


def failures_in_store(store: Path) -> dict[str, dict]:
    with Store.open(store, create=False, readonly=True) as s:
        return {f["path"]: f for f in s.failures()}


def one_line(error: str) -> bool:
    return "\n" not in error and 0 < len(error) <= 200


# --------------------------------------------------------------------------- real PDFs


def _manifest() -> list[dict]:
    path = EVAL_PDFS / "manifest.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# Files whose fonts map characters wrongly (issue 11: mojibake, /gNNN glyph
# codes): an extractor may get their text right, or docsum reports them.
BROKEN_FONT_ENCODING = {"pdftools-chinese.pdf", "pdfminer-nlp2004slides.pdf", "pdfjs-TAMReview.pdf"}


@pytest.mark.skipif(not (EVAL_PDFS / "manifest.jsonl").exists(), reason="shared eval PDFs not present")
def test_every_eval_pdf_is_handled_as_the_manifest_expects(tmp_path: Path) -> None:
    store = tmp_path / "eval.sqlite"
    manifest = _manifest()
    # --ocr off: as without the OCR extra (tests/test_ocr.py covers `expect_ocr`).
    result, data = build_json(store, EVAL_PDFS, "--llm", "extractive", "--ocr", "off")
    assert result.code == 3, result  # some files cannot be read: listed, exit 3
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    failed = {f["path"]: f["error"] for f in data["failures"]}
    stored = stored_paths(store)
    assert set(failed) | stored == {m["file"] for m in manifest}
    assert data["documents"]["added"] == len(stored) and data["documents"]["failed"] == len(failed)

    conn = sqlite3.connect(store)
    covered = dict(
        conn.execute(
            "SELECT d.path, MAX(n.end_char) FROM documents d JOIN nodes n ON n.doc_id = d.doc_id GROUP BY d.path"
        ).fetchall()
    )
    conn.close()
    for entry in manifest:
        name, expect = entry["file"], entry["expect"]
        if expect == "text" and name in BROKEN_FONT_ENCODING:
            # Text comes out, but as mojibake or glyph codes with pypdf:
            # reported as unreadable rather than summarized as nonsense.
            assert name in stored or "unreadable text" in failed.get(name, ""), (name, failed.get(name))
        elif expect == "text":
            assert name in stored, (name, failed.get(name))
            assert covered[name] >= entry["min_chars"], name
        elif expect == "needs-password":
            assert name in failed and "password" in failed[name], (name, failed.get(name))
        elif expect == "no-text":
            assert name in failed and "no extractable text" in failed[name], (name, failed.get(name))
        else:  # broken: added or failed with a reason, never a crash
            assert expect == "broken", entry
            assert name in stored or name in failed
        if name in failed:
            assert one_line(failed[name]), failed[name]
            assert f"docsum: failed {name}: {failed[name]}" in result.stderr

    # Retried next run: only the failed files are read again, and fail again.
    again, data2 = build_json(store, EVAL_PDFS, "--llm", "extractive", "--ocr", "off")
    assert again.code == 3
    assert {f["path"] for f in data2["failures"]} == set(failed)
    assert data2["documents"]["unchanged"] == len(stored) and data2["usage"]["llm_calls"] == 0
    assert all(f["attempts"] == 2 for f in data2["failures"])
    assert {p: f["attempts"] for p, f in failures_in_store(store).items()} == {p: 2 for p in failed}


def test_failed_files_are_retried_and_a_fixed_file_is_added(tmp_path: Path) -> None:
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    folder.mkdir()
    shutil.copy(SAMPLE_DOCS / "beekeepers_newsletter_autumn_2023.txt", folder)
    bad = folder / "report.pdf"
    bad.write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\ngarbage, not a PDF body\n")
    (folder / "empty.md").write_text("   \n\n")

    result, data = build_json(store, folder)
    assert result.code == 3
    assert {f["path"] for f in data["failures"]} == {"report.pdf", "empty.md"}
    assert all(one_line(f["error"]) and f["attempts"] == 1 for f in data["failures"])
    assert "damaged PDF" in {f["path"]: f["error"] for f in data["failures"]}["report.pdf"]
    text = run_cli("build", folder, "--store", store)
    assert text.code == 3
    assert "failed (retried next run): empty.md, report.pdf" in text.stdout
    assert "(failed 2 runs in a row)" in text.stderr
    assert {p: f["attempts"] for p, f in failures_in_store(store).items()} == {"report.pdf": 2, "empty.md": 2}

    # Fixed: the PDF replaced by a good one, the empty file deleted.
    shutil.copy(SAMPLE_DOCS / "library_renovation_fact_sheet.pdf", bad)
    (folder / "empty.md").unlink()
    result, data = build_json(store, folder)
    assert result.code == 0, result
    assert data["documents"]["added"] == 1 and data["failures"] == []
    assert failures_in_store(store) == {}  # fixed cleared; vanished forgotten
    assert stored_paths(store) == {"beekeepers_newsletter_autumn_2023.txt", "report.pdf"}


# --------------------------------------------------------------------------- awkward files


def test_awkward_text_files(tmp_path: Path) -> None:
    folder, store = tmp_path / "in", tmp_path / "s.sqlite"
    folder.mkdir()
    (folder / "empty.txt").write_bytes(b"")
    (folder / "binary.txt").write_bytes(bytes(range(256)) * 40)
    (folder / "latin1.txt").write_bytes(
        "Le caf\xe9 du port sert une cr\xe8me br\xfbl\xe9e. Les p\xeacheurs arrivent \xe0 l'aube.\n".encode("latin-1")
    )
    (folder / "utf16.txt").write_bytes("\ufeffThe lighthouse keeper logged forty ships in March.\n".encode("utf-16-le"))
    (folder / "utf16be.md").write_bytes("\ufeff# Tide tables\n\nHigh water at noon on Sundays.\n".encode("utf-16-be"))
    (folder / "crlf.txt").write_bytes(b"Line one about ferries.\r\nLine two about piers.\r\n")
    spaced = folder / "minutes of the räte" / "Protokoll für Ärzte – 2024.md"
    spaced.parent.mkdir()
    spaced.write_text("# Sitzung\n\nDie Ärzte besprachen die neue Fähre nach Süderoog.\n", encoding="utf-8")
    (folder / "fake.pdf").write_bytes(b"this is not a pdf at all\n")
    (folder / "page.pdf").write_bytes(b"<!DOCTYPE html><html><body>Download failed</body></html>\n")
    os.mkfifo(folder / "fifo.txt")  # would block a naive reader forever

    result, data = build_json(store, folder)
    assert result.code == 3, result
    # Every failure is named by its path in the folder, a FIFO's too.
    failed = {f["path"]: f["error"] for f in data["failures"]}
    assert set(failed) == {"empty.txt", "binary.txt", "fake.pdf", "page.pdf", "fifo.txt"}, failed
    assert "empty" in failed["empty.txt"]
    assert "binary" in failed["binary.txt"]
    # Not "damaged PDF": the file never was one, and the error says what it is.
    assert failed["fake.pdf"].endswith("not a PDF: no %PDF- signature"), failed
    assert failed["page.pdf"].endswith("not a PDF: no %PDF- signature; the file looks like an HTML page"), failed
    assert "not a regular file" in failed["fifo.txt"]
    assert all(one_line(e) for e in failed.values())
    rel = "minutes of the räte/Protokoll für Ärzte – 2024.md"
    assert stored_paths(store) == {"latin1.txt", "utf16.txt", "utf16be.md", "crlf.txt", rel}
    assert any(w["path"] == "latin1.txt" and "not UTF-8" in w["warning"] for w in data["warnings"])

    # The decoded text is right (not mojibake), and odd paths work as DOC.
    conn = sqlite3.connect(store)
    texts = dict(
        conn.execute(
            "SELECT d.path, group_concat(n.text, ' ') FROM documents d JOIN nodes n USING (doc_id) GROUP BY d.path"
        ).fetchall()
    )
    conn.close()
    assert "crème brûlée" in texts["latin1.txt"]
    assert "lighthouse keeper" in texts["utf16.txt"] and "\ufeff" not in texts["utf16.txt"]
    assert "High water at noon" in texts["utf16be.md"]
    assert "\r" not in texts["crlf.txt"]
    assert "Süderoog" in texts[rel]
    shown = run_cli("show", rel, "--store", store, "--json")
    assert shown.code == 0 and shown.json()["path"] == rel

    # The warning reaches a person too (stderr), once per file.
    text = run_cli("build", folder, "--store", store, "--summary-query", "Changed query.")
    assert text.stderr.count("docsum: warning: latin1.txt: not UTF-8") == 1


def test_unreadable_file_fails_with_a_reason(shared_dir: Path) -> None:
    folder, home = shared_dir / "in", shared_dir / "home"
    make_docs(folder, 1)
    secret = folder / "secret.txt"
    secret.write_text("classified")
    home.mkdir()
    for path in shared_dir.rglob("*"):
        os.chown(path, NOBODY, NOBODY)
    secret.chmod(0)
    # Root reads any file: run docsum as the unprivileged user.
    result = run_cli_as_nobody(home, "build", folder, "--store", home / "s.sqlite", "--json")
    assert result.code == 3, result
    data = result.json()
    assert data["failures"] == [{"path": "secret.txt", "error": "permission denied", "attempts": 1}]
    assert data["documents"]["added"] == 1


def test_symlinks_loops_and_links_outside_the_root(tmp_path: Path) -> None:
    folder, store, outside = tmp_path / "root", tmp_path / "s.sqlite", tmp_path / "elsewhere"
    make_docs(folder, 2)
    make_docs(outside, 1, start=50)
    make_docs(tmp_path / "other", 1, start=60)
    (folder / "loop").symlink_to(folder, target_is_directory=True)  # a directory containing itself
    (folder / "self.txt").symlink_to(folder / "self.txt")  # ELOOP
    (folder / "dangling.txt").symlink_to(tmp_path / "missing.txt")
    (folder / "outside.txt").symlink_to(tmp_path / "other" / "doc060.txt")
    (folder / "outside_dir").symlink_to(outside, target_is_directory=True)
    (folder / "inside.txt").symlink_to(folder / "doc000.txt")  # an alias: stored once

    result, data = build_json(store, folder)
    # Nothing failed: links that are not followed are skipped and reported.
    assert result.code == 0, result
    assert data["documents"]["added"] == 2
    skipped = {Path(s["path"]).name: s["reason"] for s in data["skipped_files"]}
    assert set(skipped) == {"loop", "self.txt", "dangling.txt", "outside.txt", "outside_dir"}
    assert "loop" in skipped["loop"] and "loop" in skipped["self.txt"]
    assert "outside" in skipped["outside.txt"] and "--follow-symlinks" in skipped["outside.txt"]
    assert data["skipped"]["symlinks"] == 5
    assert stored_paths(store) == {"doc000.txt", "doc001.txt"}
    text = run_cli("build", folder, "--store", store)
    assert text.code == 0
    assert "docsum: skipped" in text.stderr and "outside.txt" in text.stderr

    result, data = build_json(store, folder, "--follow-symlinks")
    assert result.code == 0, result
    assert stored_paths(store) == {"doc000.txt", "doc001.txt", "outside.txt", "outside_dir/doc050.txt"}
    assert {Path(s["path"]).name for s in data["skipped_files"]} == {"loop", "self.txt", "dangling.txt"}


# --------------------------------------------------------------------------- crashes and signals


N_DOCS = 12


def _slow_build(tmp_path: Path, fake: FakeOpenAI, *extra: str) -> tuple[Path, Path, list[str]]:
    folder, store = tmp_path / "docs", tmp_path / "store" / "s.sqlite"
    if not folder.exists():
        make_docs(folder, N_DOCS)
    args = ["build", str(folder), "--store", str(store), *llm_args(fake), "--concurrency", "2", *extra]
    return folder, store, args


def _markers() -> list[str]:
    return [marker(i) for i in range(N_DOCS)]


@pytest.mark.parametrize("kill_after", [1, 5, 9])
def test_sigkill_mid_build_then_resume_summarizes_only_the_rest(tmp_path: Path, kill_after: int) -> None:
    with FakeOpenAI(latency=0.2) as fake:
        _, store, args = _slow_build(tmp_path, fake)
        proc = spawn_cli(*args)
        try:
            wait_for(lambda: store_count(store) >= kill_after or proc.poll() is not None, what="documents committed")
            proc.kill()
        finally:
            proc.wait(timeout=30)
            proc.stdout.close(), proc.stderr.close()  # type: ignore[union-attr]
        assert proc.returncode == -signal.SIGKILL

        with Store.open(store, create=False) as s:
            assert s.integrity_ok()
            docs = s.list_documents(with_embeddings=True)
            done = {d.path for d in docs}
            assert all(d.summary and d.embedding is not None for d in docs)
            assert all(nodes for nodes in s.nodes_for([d.doc_id for d in docs]).values())
            # The killed run's usage was committed with each document.
            assert len(s.calls(s.runs(1)[0]["id"])) >= len(docs)
        assert kill_after <= len(done) < N_DOCS
        done_markers = {f"DOCMARK{int(p[3:6]):03d}" for p in done}
        first_run = requests_per_marker(fake.chat_requests(), _markers())
        assert all(first_run[m] == 1 for m in done_markers)  # each committed one was summarized once

        fake.reset()
        fake.latency = 0.0  # the resumed run need not be slow
        resumed = run_cli(*args, "--json")
        assert resumed.code == 0, resumed
        counts = resumed.json()["documents"]
        assert counts["unchanged"] == len(done) and counts["added"] == N_DOCS - len(done)
        second_run = requests_per_marker(fake.chat_requests(), _markers())
        # Exactly once in total for every document whose summary was kept:
        # the resumed build never repeats a committed one, and summarizes each
        # of the others once. (A request in flight at the SIGKILL is lost with
        # the process; that document is, necessarily, summarized again.)
        assert {m: n for m, n in second_run.items() if m in done_markers} == {m: 0 for m in done_markers}
        assert {m: n for m, n in second_run.items() if m not in done_markers} == {
            m: 1 for m in _markers() if m not in done_markers
        }
        assert len(fake.chat_requests()) == N_DOCS - len(done)
        assert stored_paths(store) == {f"doc{i:03d}.txt" for i in range(N_DOCS)}
        with Store.open(store, create=False, readonly=True) as s:
            # The killed run is not left looking as if it were still running.
            assert [r["status"] for r in s.runs()] == ["ok", "killed"]


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_sigint_and_sigterm_stop_cleanly_and_release_the_lock(tmp_path: Path, signum: int, code: int) -> None:
    with FakeOpenAI(latency=0.2) as fake:
        _, store, args = _slow_build(tmp_path, fake)
        proc = spawn_cli(*args)
        wait_for(lambda: store_count(store) >= 1 or proc.poll() is not None, what="a committed document")
        sent = time.monotonic()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == code, (out, err)
        assert time.monotonic() - sent < 5  # promptly, not after the whole folder
        assert "interrupted" in err and "Traceback" not in err
        assert out == ""  # no result line for a run that did not finish

        with Store.open(store, create=False) as s:
            assert s.integrity_ok()
            done = len(s.list_documents())
            assert s.runs(1)[0]["status"] == "interrupted"
            assert s.runs(1)[0]["llm_calls"] >= done  # usage of the interrupted run is kept
        assert 1 <= done < N_DOCS

        started = time.monotonic()
        fake.reset()
        fake.latency = 0.0
        again = run_cli(*args, "--json")  # --wait 0: the lock must be free right away
        assert again.code == 0, again
        assert again.json()["documents"]["added"] == N_DOCS - done
        assert len(fake.chat_requests()) == N_DOCS - done
        assert time.monotonic() - started < 20


def test_two_builds_at_once_readers_keep_working(tmp_path: Path) -> None:
    with FakeOpenAI(latency=0.2) as fake:
        folder, store, args = _slow_build(tmp_path, fake)
        first = spawn_cli(*args[:-2], "--concurrency", "1")
        try:
            wait_for(lambda: store_count(store) >= 1 or first.poll() is not None, what="the first build to commit")
            assert first.poll() is None, "the first build finished too early for this test"

            second = run_cli(*args)
            assert second.code == 4, second
            assert second.stdout == ""
            assert f"pid {first.pid}" in second.stderr and "locked" in second.stderr
            assert "--wait" in second.stderr

            # Readers do not take the lock: they see what is committed so far.
            listing = run_cli("summaries", "--store", store, "--json")
            assert listing.code == 0, listing
            assert 1 <= len(listing.json()) < N_DOCS
            answer = run_cli("ask", "What does the report on bees say?", "--store", store, *llm_args(fake), "--json")
            assert answer.code == 0, answer
            assert answer.json()["answer"]
            dry = run_cli("build", folder, "--store", store, "--dry-run", "--json")
            assert dry.code == 0, dry

            waited = run_cli(*args, "--wait", "20", "--json")
            assert waited.code == 0, waited
            # It ran after the first build had committed everything.
            assert waited.json()["documents"]["unchanged"] == N_DOCS
        finally:
            out, err = first.communicate(timeout=30)
        assert first.returncode == 0, err
        assert "12 added" in out


def test_wait_gives_up_with_exit_4(tmp_path: Path) -> None:
    with FakeOpenAI(latency=0.3) as fake:
        _, store, args = _slow_build(tmp_path, fake)
        first = spawn_cli(*args[:-2], "--concurrency", "1")
        try:
            wait_for(lambda: store_count(store) >= 1 or first.poll() is not None, what="the first build to commit")
            started = time.monotonic()
            result = run_cli(*args, "--wait", "0.5")
            assert result.code == 4, result
            assert 0.4 < time.monotonic() - started < 5
        finally:
            first.kill()
            first.communicate(timeout=30)


# --------------------------------------------------------------------------- big input


def test_windowed_split_of_a_long_text_equals_the_single_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    import random

    import docsum.ingest.split as split_mod
    from docsum.models.tokens import tokenizer_for_model

    tok = tokenizer_for_model("gpt-4")
    rng = random.Random(7)
    vocabulary = "the harbour ferry tide 1,000 e.g. http://a.b/c Ärzte 東京 🙂 supercalifragilistic".split()
    words = []
    for _ in range(20000):
        words.append(rng.choice(vocabulary))
        r = rng.random()
        words.append("\n\n" if r < 0.05 else ".  " if r < 0.1 else "x" * rng.randint(50, 2000) if r < 0.105 else "")
    text = " ".join(words)
    for size, overlap in ((64, 8), (400, 60)):
        monkeypatch.setattr(split_mod, "WINDOW_CHARS", 10**9)
        single = split_mod.split_tokens(text, size, overlap, tok)
        monkeypatch.setattr(split_mod, "WINDOW_CHARS", 30_000)
        windowed = split_mod.split_tokens(text, size, overlap, tok)
        assert windowed == single
        assert next(split_mod.iter_split_tokens(text, size, overlap, tok)) == single[0]


# --------------------------------------------------------------------------- big input (opt-in)


@pytest.mark.slow
def test_fifty_megabyte_file_builds_with_bounded_memory(tmp_path: Path) -> None:
    folder, store = tmp_path / "big", tmp_path / "s.sqlite"
    folder.mkdir()
    big = folder / "big.txt"
    words = (
        "harbour ferry tide lighthouse keeper ledger council minutes budget bridge orchard mill canal "
        "storm report library roof repair committee volunteers"
    ).split()
    with open(big, "w", encoding="utf-8") as fh:
        i = 0
        while fh.tell() < 50 * 1024 * 1024:
            line = " ".join(words[(i + k) % len(words)] for k in range(14))
            fh.write(f"Entry {i}: the {line}.\n")
            if i % 40 == 39:
                fh.write("\n")
            i += 1
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.monotonic()
    proc = subprocess.run(
        cli_command("build", folder, "--store", store, "--llm", "extractive", "--json", "-q"),
        env=subprocess_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    elapsed = time.monotonic() - started
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["documents"]["added"] == 1
    peak_mb = peak_kib / 1024
    print(f"\n50 MB build: peak RSS {peak_mb:.0f} MB (children max before: {before / 1024:.0f} MB), {elapsed:.0f}s")
    assert peak_mb < 1536, f"peak RSS {peak_mb:.0f} MB"
