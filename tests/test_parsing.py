"""Reading files in worker processes: PDF engines, hostile PDFs, time and
memory limits, signals, read-once, the symlink check at open time, and the
extracted-text cache."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import sqlite3
import time
import uuid
import zlib
from pathlib import Path

import pytest
from helpers import (
    EVAL_PDFS,
    REPO,
    processes_with,
    run_cli,
    spawn_cli,
    stored_paths,
    stored_so_far,
    subprocess_env,
    wait_for,
)
from test_load import TWO_PAGES, assemble_pdf, make_pdf, pdfium_refuses, write

from docsum.builder.pipeline import BuildOptions, FileOutcome, build
from docsum.errors import LoadError
from docsum.ingest import load as load_module
from docsum.ingest import pdf
from docsum.ingest.load import load_file, read_once
from docsum.ingest.pdf import PYPDF_ARRAY_LIMIT, clean_extracted, load_pdf
from docsum.models.extractive import ExtractiveLLM


def pdf_with_content(content: bytes, to_unicode: bytes | None = None) -> bytes:
    """A one-page PDF whose page content stream (Flate-compressed) is `content`;
    with `to_unicode`, its font F1 carries that ToUnicode CMap."""
    body = zlib.compress(content, 9)
    font = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica"
    objects: dict[int, bytes] = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        4: b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R >>",
        5: b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(body) + body + b"\nendstream",
    }
    if to_unicode is not None:
        objects[6] = b"<< /Length %d >>\nstream\n" % len(to_unicode) + to_unicode + b"\nendstream"
        font += b" /ToUnicode 6 0 R"
    objects[3] = font + b" >>"
    return assemble_pdf(objects)


def hostile_pdf(elements: int) -> bytes:
    """A few KB on disk: a page whose content holds one array of `elements`
    numbers. Parsed naively it takes gigabytes (PDFium alone needs ~1.7 GB
    for 30 million) and tens of seconds."""
    return pdf_with_content(b"BT /F1 12 Tf 72 720 Td (Hello hostile world) Tj [" + b"0 " * elements + b"] TJ ET")


# --------------------------------------------------------------------------- engines


def test_pdfium_reads_first_and_pypdf_is_the_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "report.pdf", make_pdf(TWO_PAGES, title="River Survey 2024"))
    first = load_file(path)
    assert first.extractor == "pdfium" and first.title == "River Survey 2024" and first.warnings == []
    pdfium_refuses(monkeypatch)
    second = load_file(path)
    assert second.extractor == "pypdf"
    assert second.page_starts == first.page_starts and "Water levels rose in March." in second.text
    assert "PDFium could not open" in second.warnings[0]


def test_pypdf_limits_are_raised_but_a_hostile_array_still_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import resource

    assert PYPDF_ARRAY_LIMIT > 100_000  # the default refused real 10-Q filings
    pdfium_refuses(monkeypatch)
    # The limit is lowered so the hostile array is small: pypdf parses a
    # million-element array in pure Python for over a minute, and what is
    # checked is that the configured limit stops the parse, whatever its value.
    limit = 2_000
    monkeypatch.setattr(pdf, "PYPDF_ARRAY_LIMIT", limit)
    assert "Hello hostile world" in load_pdf(Path("within.pdf"), hostile_pdf(limit // 2)).text  # under it: read
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(LoadError) as excinfo:
        load_pdf(Path("hostile.pdf"), hostile_pdf(limit + 500))
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert "safety limits" in excinfo.value.reason and "\n" not in excinfo.value.reason
    assert grown_mb < 500  # bounded: the parse stopped at the limit


def test_a_lone_surrogate_from_a_tounicode_map_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cmap = (
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap\n"
        b"1 begincodespacerange <00> <FF> endcodespacerange\n"
        b"2 beginbfchar <41> <D800> <42> <0042> endbfchar\n"
        b"endcmap CMapName currentdict /CMap defineresource pop end end"
    )
    data = pdf_with_content(
        b"BT /F1 12 Tf 72 720 Td (A Bsurvey of the rivers and lakes of the northern region) Tj ET", to_unicode=cmap
    )
    path = write(tmp_path / "surrogate.pdf", data)
    for engine in ("pdfium", "pypdf"):
        if engine == "pypdf":
            pdfium_refuses(monkeypatch)
        doc = load_file(path)
        assert doc.extractor == engine
        doc.text.encode("utf-8")  # no lone surrogate left: SQLite and stdout can take it
        assert "rivers and lakes" in doc.text


def test_a_pdf_with_a_lone_surrogate_builds(tmp_path: Path) -> None:
    cmap = (
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap\n"
        b"1 begincodespacerange <00> <FF> endcodespacerange\n"
        b"1 beginbfchar <41> <D800> endbfchar\n"
        b"endcmap CMapName currentdict /CMap defineresource pop end end"
    )
    folder = tmp_path / "docs"
    write(
        folder / "surrogate.pdf",
        pdf_with_content(b"BT /F1 12 Tf 72 720 Td (A quarterly survey of rivers) Tj ET", to_unicode=cmap),
    )
    write(folder / "notes.txt", "Plain notes about the river survey.")
    result = run_cli("build", folder, "--store", tmp_path / "s.sqlite", "--json")
    assert result.code == 0, result
    assert result.json()["documents"]["added"] == 2
    assert stored_paths(tmp_path / "s.sqlite") == {"surrogate.pdf", "notes.txt"}


@pytest.mark.skipif(not (EVAL_PDFS / "pdfjs-TAMReview.pdf").exists(), reason="shared eval PDFs not present")
def test_a_pdf_with_unreadable_pages_keeps_the_pages_an_engine_reads() -> None:
    # PDFium returns control codes for pages 2-22 of this file and pypdf glyph
    # names (/g145/g137…) for all 23. Before: pypdf's glyph names were taken
    # and the build refused the file as unreadable, title and abstract too.
    # What the text layers give (with the OCR extra, --ocr auto reads the garbled pages: test_ocr.py).
    doc = load_file(EVAL_PDFS / "pdfjs-TAMReview.pdf", ocr="off")
    assert doc.extractor == "pdfium"
    assert not any(ord(ch) < 32 and ch not in "\n\t" for ch in doc.text) and "/g1" not in doc.text
    assert "Overview of the Technology Acceptance Model" in doc.text and "Abstract" in doc.text
    assert len(doc.page_starts) == 23  # every page keeps its slot: page numbers stay true
    assert doc.text[doc.page_starts[1] : doc.page_starts[2]].strip() == ""
    assert doc.warnings[0].startswith("only part of the text could be read: pp. 2–22 of 23")


# --------------------------------------------------------------------------- limits in the workers


def test_an_exploding_pdf_is_stopped_and_the_rest_is_built(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    write(folder / "bomb.pdf", hostile_pdf(30_000_000))
    write(folder / "notes.txt", "Plain notes about the river survey.")
    result = run_cli("build", folder, "--store", tmp_path / "s.sqlite", "--json", "--parse-memory", "400")
    assert result.code == 3, result
    data = result.json()
    assert data["documents"]["added"] == 1 and [f["path"] for f in data["failures"]] == ["bomb.pdf"]
    assert "400 MB" in data["failures"][0]["error"]
    assert f"docsum: failed bomb.pdf: {data['failures'][0]['error']}" in result.stderr


def test_a_pdf_that_takes_too_long_is_stopped(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    write(folder / "slow.pdf", hostile_pdf(30_000_000))
    write(folder / "notes.txt", "Plain notes about the river survey.")
    result = run_cli("build", folder, "--store", tmp_path / "s.sqlite", "--json", "--parse-timeout", "1", "--jobs", "2")
    assert result.code == 3, result
    data = result.json()
    assert data["documents"]["added"] == 1
    assert data["failures"] == [
        {"path": "slow.pdf", "error": "still being read after 1 s; stopped (see --parse-timeout)", "attempts": 1}
    ]


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_build_and_its_workers_during_a_long_parse(tmp_path: Path, signum: int, code: int) -> None:
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    write(folder / "a-notes.txt", "Plain notes about the river survey.")
    write(folder / "b-slow.pdf", hostile_pdf(30_000_000))  # PDFium takes tens of seconds on it
    mark = f"DOCSUM_TEST_MARK={uuid.uuid4().hex}"
    env = subprocess_env(**dict([mark.split("=")]))
    proc = spawn_cli("build", folder, "--store", store, "--jobs", "1", "--parse-memory", "4096", env=env)
    try:
        wait_for(lambda: "a-notes.txt" in stored_so_far(store), timeout=60, what="the text file committed")
        time.sleep(0.5)  # the PDF is now being parsed
        sent = time.monotonic()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
        stopped_after = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, (out, err)
    assert stopped_after < 15  # not after the PDF (tens of seconds)
    assert "Traceback" not in err
    assert stored_paths(store) == {"a-notes.txt"}  # the finished document is kept
    conn = sqlite3.connect(store)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    wait_for(lambda: not processes_with(mark), timeout=10, what="every worker process gone")


# --------------------------------------------------------------------------- read once


def test_a_file_rewritten_while_it_is_read_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "a.txt", "version one " * 100_000)
    real_read = os.read
    rewrites = {"n": 0}

    def read_and_rewrite(fd: int, n: int) -> bytes:
        block = real_read(fd, n)
        if rewrites["n"] == 0 and block:
            # A same-size rewrite in the middle of the read (the mtime moves on).
            rewrites["n"] += 1
            path.write_text("version two " * 100_000, encoding="utf-8")
            os.utime(path, ns=(time.time_ns(), time.time_ns() + 1_000_000_000))
        return block

    monkeypatch.setattr(load_module.os, "read", read_and_rewrite)
    content = read_once(path)
    monkeypatch.undo()
    assert content.data == path.read_bytes()
    assert content.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert content.mtime_ns == path.stat().st_mtime_ns and content.size == path.stat().st_size


def test_a_file_that_keeps_changing_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "a.txt", "x" * 10_000)
    real_read = os.read
    count = {"n": 0}

    def read_and_touch(fd: int, n: int) -> bytes:
        block = real_read(fd, n)
        if block:
            count["n"] += 1
            os.utime(path, ns=(time.time_ns(), time.time_ns() + count["n"] * 1_000_000_000))
        return block

    monkeypatch.setattr(load_module.os, "read", read_and_touch)
    with pytest.raises(LoadError) as excinfo:
        read_once(path)
    assert "kept changing" in excinfo.value.reason


def test_stored_hash_size_and_mtime_describe_the_stored_text(tmp_path: Path) -> None:
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    path = write(folder / "a.txt", "River survey notes. " * 50)
    assert run_cli("build", folder, "--store", store).code == 0
    conn = sqlite3.connect(store)
    sha, size, mtime = conn.execute("SELECT sha256, size, mtime_ns FROM documents").fetchone()
    text = "".join(t for (t,) in conn.execute("SELECT text FROM nodes ORDER BY seq"))
    conn.close()
    assert sha == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (size, mtime) == (path.stat().st_size, path.stat().st_mtime_ns)
    assert "River survey notes." in text


# --------------------------------------------------------------------------- the path checked is the path read


class _SwapAfterDiscovery:
    """A reporter that, once the folder has been scanned, replaces a file by a
    symlink to a file outside the build root (the race README Guarantee 8 covers)."""

    def __init__(self, victim: Path, target: Path) -> None:
        self.victim, self.target = victim, target
        self.outcomes: list[FileOutcome] = []

    def start(self, total_files: int, to_process: int) -> None:
        self.victim.unlink()
        self.victim.symlink_to(self.target)

    def file_done(self, outcome: FileOutcome) -> None:
        self.outcomes.append(outcome)

    def finish(self) -> None:
        pass


def test_a_symlink_swapped_in_after_discovery_is_not_followed_outside_the_root(tmp_path: Path) -> None:
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    secret = write(tmp_path / "outside" / "secret.txt", "SECRET-OUTSIDE-THE-ROOT payroll figures")
    victim = write(folder / "a.txt", "Innocent notes about the river survey.")
    write(folder / "b.txt", "More notes about the river survey.")
    reporter = _SwapAfterDiscovery(victim, secret)
    options = BuildOptions(paths=[folder])
    report = asyncio.run(build(store, ExtractiveLLM(), options, reporter))
    failed = {f.path: f.error for f in report.failures}
    assert set(failed) == {"a.txt"} and "outside the build root" in failed["a.txt"]
    assert stored_paths(store) == {"b.txt"}
    conn = sqlite3.connect(store)
    assert not conn.execute("SELECT 1 FROM nodes WHERE text LIKE '%SECRET-OUTSIDE%'").fetchall()
    assert not conn.execute("SELECT 1 FROM documents WHERE summary LIKE '%SECRET-OUTSIDE%'").fetchall()
    conn.close()


def test_read_once_checks_the_opened_file(tmp_path: Path) -> None:
    inside = write(tmp_path / "root" / "in.txt", "inside")
    outside = write(tmp_path / "elsewhere" / "out.txt", "outside")
    link = tmp_path / "root" / "link.txt"
    link.symlink_to(outside)
    assert read_once(inside, tmp_path / "root").data == b"inside"
    with pytest.raises(LoadError) as excinfo:
        read_once(link, tmp_path / "root")
    assert "outside the build root" in excinfo.value.reason
    assert read_once(link).data == b"outside"  # no root given: followed


# --------------------------------------------------------------------------- cache


def test_dry_run_then_build_parses_each_file_once(tmp_path: Path, docsum_home: Path) -> None:
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    write(folder / "report.pdf", make_pdf(TWO_PAGES))
    plan = run_cli("build", folder, "--store", store, "--dry-run", "--json")
    assert plan.code == 0, plan
    entries = list((docsum_home / "cache").rglob("*.json.gz"))
    assert len(entries) == 1
    # Rewrite the cached text: a build that re-parsed the PDF would not see it.
    import gzip

    cached = json.loads(gzip.decompress(entries[0].read_bytes()))
    assert cached["extractor"] == "pdfium" and "Water levels" in cached["text"]
    cached["text"] = cached["text"].replace("Water levels", "CACHEDMARK levels")
    entries[0].write_bytes(gzip.compress(json.dumps(cached).encode()))
    built = run_cli("build", folder, "--store", store, "--json")
    assert built.code == 0, built
    conn = sqlite3.connect(store)
    assert conn.execute("SELECT 1 FROM nodes WHERE text LIKE '%CACHEDMARK%'").fetchall()
    conn.close()


def test_a_damaged_cache_entry_is_ignored(tmp_path: Path, docsum_home: Path) -> None:
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    write(folder / "report.pdf", make_pdf(TWO_PAGES))
    assert run_cli("build", folder, "--store", store, "--dry-run").code == 0
    for entry in (docsum_home / "cache").rglob("*.json.gz"):
        entry.write_bytes(b"\x1f\x8b not gzip at all")
        assert oct(entry.parent.parent.stat().st_mode & 0o777) == "0o700"
    built = run_cli("build", folder, "--store", store, "--json")
    assert built.code == 0, built
    assert built.json()["documents"]["added"] == 1


def test_jobs_one_builds_the_same(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    for i in range(4):
        write(folder / f"r{i}.pdf", make_pdf([[f"Report number {i} about rivers."], ["Second page."]]))
    one = run_cli("build", folder, "--store", tmp_path / "one.sqlite", "--jobs", "1", "--json")
    two = run_cli("build", folder, "--store", tmp_path / "two.sqlite", "--jobs", "2", "--json")
    assert one.code == two.code == 0
    assert one.json()["extractors"] == {f"r{i}.pdf": "pdfium" for i in range(4)}  # the engine, per document
    assert (
        stored_paths(tmp_path / "one.sqlite")
        == stored_paths(tmp_path / "two.sqlite")
        == {f"r{i}.pdf" for i in range(4)}
    )


def test_the_cache_is_trimmed_least_recently_used_first(tmp_path: Path) -> None:
    from docsum.ingest.loaded import LoadedDocument
    from docsum.ingest.parsing import TextCache

    cache = TextCache(tmp_path / "cache")
    docs = {
        name: LoadedDocument(text=f"{name} " * 20_000, page_starts=[], title=name, kind="text")
        for name in ("a", "b", "c")
    }
    for age, (name, doc) in enumerate(docs.items()):
        cache.put(name * 64, Path(f"{name}.txt"), doc)
        entry = next((tmp_path / "cache").rglob(f"{name * 64}.*"))
        os.utime(entry, (1_000_000 + age, 1_000_000 + age))  # a oldest, c newest
    assert cache.get("a" * 64, Path("a.txt")) is not None  # a is used again: now the newest
    one_entry = next((tmp_path / "cache").rglob("*.json.gz")).stat().st_size
    cache.prune(max_bytes=2 * one_entry + one_entry // 2)
    kept = {name for name in docs if cache.get(name * 64, Path(f"{name}.txt")) is not None}
    assert kept == {"a", "c"}


@pytest.mark.process
def test_a_build_run_from_a_folder_of_python_files_still_parses_its_pdfs(tmp_path: Path) -> None:
    """The parse workers' fork server is started as `python -c`, which puts the
    current folder first on sys.path: run from a folder holding a `json.py`
    (a folder of code, say), it imported that file instead of the standard
    library's and every PDF failed with an EOFError."""
    import subprocess
    import sys

    folder = tmp_path / "code"
    write(folder / "json.py", 'raise SystemExit("the json.py of the folder was imported")\n')
    write(folder / "enum.py", 'raise SystemExit("the enum.py of the folder was imported")\n')
    write(folder / "notes.pdf", make_pdf([["The harbour survey found three wrecks."]]))
    # PYTHONPATH without subprocess_env's empty entry, which would itself put the folder on sys.path.
    env = subprocess_env(DOCSUM_HOME=str(tmp_path / "home"), PYTHONPATH=str(REPO))
    store = tmp_path / "s.sqlite"
    done = subprocess.run(
        # The installed command, as a user runs it (`python -m` would put the folder on sys.path itself).
        [str(Path(sys.executable).with_name("docsum")), "build", ".", "--store", str(store), "--json"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert stored_paths(store) == {"notes.pdf"}
    assert "PYTHONSAFEPATH" not in os.environ  # put back in this process too


def test_a_hyphen_pdfium_gives_as_a_noncharacter_is_a_hyphen() -> None:
    # PDFium writes a hyphen that ended a line as U+FFFE. Before, the SEC PDF
    # answers quoted "reflecting the write\ufffeoff of the prepayment".
    text = clean_extracted("the write\ufffeoff of the prepayment\r\nasset\ufffebacked securities")
    assert text == "the write-off of the prepayment\nasset-backed securities"
