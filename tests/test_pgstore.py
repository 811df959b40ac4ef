"""The PostgreSQL store against a real throwaway server (tests/pgserver.py):
every command gives what the SQLite store gives, builders share the work
through claims, a killed builder loses only what was in flight, the password
never shows, and `ask` fetches only what changed since its last question.

The store interface itself is covered for both backends by the parametrized
`store` fixture of test_store.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakeopenai import FakeOpenAI, Reply
from helpers import (
    SAMPLE_DOCS,
    llm_args,
    make_docs,
    marker,
    requests_per_marker,
    run_cli,
    spawn_cli,
    subprocess_env,
    wait_for,
)
from pgserver import TEST_PASSWORD

from docsum.errors import DocsumError, StoreVersionError
from docsum.locations import display_location
from docsum.store import pgschema
from docsum.store.opening import open_store, store_exists
from docsum.store.records import DocumentRecord, make_doc_id


def pg_count(url: str, sql: str = "SELECT count(*) FROM documents") -> int:
    """A count read on a connection of its own (0 before the schema exists)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('docsum.documents')").fetchone()[0]
        if exists is None:
            return 0
        conn.execute("SET search_path TO docsum")
        return int(conn.execute(sql).fetchone()[0])


def doc(path: str, root: str = "/data", vector: list[float] | None = None) -> DocumentRecord:
    return DocumentRecord(
        doc_id=make_doc_id(root, path), path=path, root=root, size=10, mtime_ns=1, sha256="ab" * 32, title=path,
        kind="text", token_count=5, page_count=None, split_fingerprint="s", summary_fingerprint="f",
        summary=f"summary of {path}", summary_model="m",
        embedding=None if vector is None else np.array(vector, dtype=np.float32), embedding_model="e" if vector else None,
    )  # fmt: skip


# ---------------------------------------------------------------- every command, same results


def pg_structure(conn: Any, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    """The tables, columns, constraints, indexes and triggers of `schema`, with
    the schema's own name taken out so two schemas compare."""

    def rows(sql: str) -> list[tuple[Any, ...]]:
        found = conn.execute(sql, (schema,)).fetchall()
        return sorted(tuple(str(v).replace(f"{schema}.", "") for v in row) for row in found)

    return {
        "columns": rows(
            "SELECT table_name, ordinal_position, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = %s"
        ),
        "constraints": rows(
            "SELECT c.relname, k.conname, pg_get_constraintdef(k.oid) FROM pg_constraint k "
            "JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = k.connamespace WHERE n.nspname = %s"
        ),
        "indexes": rows("SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = %s"),
        "triggers": rows(
            "SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND NOT t.tgisinternal"
        ),
    }


def test_the_first_migration_makes_the_schema_docsum_v1_made(pg_url: str) -> None:
    """Migration 1 is written from the table declarations shared with SQLite
    (docsum.store.tables); the stores in the wild were made by the literal
    script docsum released (tests/data/pg_store_v1.sql). Both must make the
    same schema, or a new store and an old one would differ."""
    import psycopg

    released = (Path(__file__).parent / "data" / "pg_store_v1.sql").read_text(encoding="utf-8")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for schema, script in (("released", released), ("declared", pgschema.PG_MIGRATIONS[0])):
            conn.execute(f"CREATE SCHEMA {schema}")
            conn.execute(f"SET search_path TO {schema}")
            conn.execute(script)
        declared = pg_structure(conn, "declared")
        assert declared == pg_structure(conn, "released")
        assert {row[0] for row in declared["columns"]} == {
            "documents",
            "removed_documents",
            "nodes",
            "failures",
            "runs",
            "calls",
            "meta",
            "claims",
        }


def test_every_command_gives_the_sqlite_results(tmp_path: Path, pg_url: str) -> None:
    sqlite = str(tmp_path / "s.sqlite")
    for store in (sqlite, pg_url):
        built = run_cli("build", SAMPLE_DOCS, "--store", store, "--json")
        assert built.code == 0, built
    outputs: dict[str, list[Any]] = {}
    for store in (sqlite, pg_url):
        b = run_cli("build", SAMPLE_DOCS, "--store", store, "--json")
        assert b.code == 0 and b.json()["documents"]["unchanged"] > 0, b
        summaries = run_cli("summaries", "--store", store, "--json")
        first = summaries.json()[0]["doc_id"]
        show = run_cli("show", first, "--store", store, "--json")
        ask = run_cli("ask", "How much did Brindle & Daughter pay for the oven?", "--store", store, "--json")
        assert ask.code == 0, ask
        answer = ask.json()
        outputs[store] = [
            {k: v for k, v in b.json().items() if k not in ("store", "elapsed_s")},
            summaries.json(),
            {k: v for k, v in show.json().items() if k != "updated_at"},
            answer["answer"],
            answer["sources"] if "sources" in answer else answer.get("documents"),
        ]
        questions = tmp_path / "q.jsonl"
        gold = summaries.json()[0]["path"]
        questions.write_text(json.dumps({"question": "oven auction", "gold_docs": [gold]}) + "\n", encoding="utf-8")
        evaluated = run_cli("eval", questions, "--store", store, "--baseline", "chunks", "--json")
        assert evaluated.code == 0, evaluated
        outputs[store].append(evaluated.json()["metrics"])
        assert run_cli("remove", first, "--store", store, "--json").code == 0
        assert run_cli("show", first, "--store", store).code == 2
    assert outputs[sqlite] == outputs[pg_url]


def test_missing_store_and_empty_store_exit_codes(pg_url: str) -> None:
    assert not store_exists(pg_url)
    asked = run_cli("ask", "anything", "--store", pg_url)
    assert asked.code == 5 and "no store at" in asked.stderr
    assert run_cli("summaries", "--store", pg_url).code == 2
    assert not store_exists(pg_url), "reading commands must not create the store"


def test_store_from_the_environment_and_the_config_file(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCSUM_STORE", pg_url)
    assert run_cli("build", SAMPLE_DOCS).code == 0
    assert pg_count(pg_url) > 0
    monkeypatch.delenv("DOCSUM_STORE")
    config = tmp_path / "config.toml"
    config.write_text(f'store = "{pg_url}"\n', encoding="utf-8")
    monkeypatch.setenv("DOCSUM_CONFIG", str(config))
    listed = run_cli("summaries", "--json")
    assert listed.code == 0 and len(listed.json()) == pg_count(pg_url)
    shown = run_cli("config", "show", "--json").json()
    assert shown["store_backend"] == "postgresql" and "local vector file" in shown["vector_search"]


# ---------------------------------------------------------------- text PostgreSQL refuses


def test_nul_in_a_document_and_in_a_summary_builds_alike_on_both_backends(tmp_path: Path, pg_url: str) -> None:
    """U+0000 from a UTF-16 file and from the server's summary: PostgreSQL's
    text cannot hold it, SQLite's can; both builds succeed and store the same
    text without it (test_store.py covers each store method)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "wide.txt").write_bytes(
        "\ufeffWide title\n\nA ferry\x00 crosses the river\x00 at noon.\n".encode("utf-16-le")
    )
    (docs / "plain.txt").write_text("Plain notes on orchards and their bees.\n", encoding="utf-8")
    stored: dict[str, list[tuple[str, str, list[str]]]] = {}
    for location in (str(tmp_path / "s.sqlite"), pg_url):
        with FakeOpenAI(responder=lambda body: Reply(text="A sum\x00mary with a NUL.")) as fake:
            built = run_cli("build", docs, "--store", location, "--json", *llm_args(fake))
        assert built.code == 0 and built.json()["documents"]["added"] == 2, built
        with open_store(location, create=False, readonly=True) as store:
            found = store.list_documents()
            nodes = store.nodes_for([d.doc_id for d in found])
            stored[location] = [(d.title, d.summary, [n.text for n in nodes[d.doc_id]]) for d in found]
    assert stored[pg_url] == stored[str(tmp_path / "s.sqlite")]
    assert all("\x00" not in title + summary + "".join(nodes) for title, summary, nodes in stored[pg_url])
    wide = stored[pg_url][1]
    assert wide[1] == "A summary with a NUL." and "A ferry crosses the river at noon." in wide[2][0]


def test_a_summary_postgresql_cannot_hold_fails_that_document_alone(tmp_path: Path, pg_url: str) -> None:
    """A lone surrogate (from the server's JSON) cannot be encoded for any
    store: on PostgreSQL too that document fails alone, the transaction it
    was written in (one pipeline) leaves nothing, and the build goes on."""
    docs = tmp_path / "docs"
    make_docs(docs, 3)
    with FakeOpenAI() as fake:
        fake.script(Reply(text="A summary with a lone \ud800 surrogate."))
        result = run_cli("build", docs, "--store", pg_url, "--concurrency", "1", *llm_args(fake))
        assert result.code == 3, result
        assert "cannot be stored: text with an invalid character" in result.stderr
        assert pg_count(pg_url) == 2 and pg_count(pg_url, "SELECT count(*) FROM nodes") == 2
        again = run_cli("build", docs, "--store", pg_url, *llm_args(fake))
    assert again.code == 0 and pg_count(pg_url) == 3


def test_a_schema_named_docsum_that_another_application_made_is_refused_untouched(pg_url: str) -> None:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "CREATE SCHEMA docsum; CREATE TABLE docsum.accounts (id INTEGER); INSERT INTO docsum.accounts VALUES (1)"
        )
    built = run_cli("build", SAMPLE_DOCS, "--store", pg_url)
    assert built.code == 1 and "tables docsum did not make" in built.stderr, built
    with psycopg.connect(pg_url, autocommit=True) as conn:
        tables = conn.execute("SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                              "WHERE n.nspname = 'docsum'").fetchall()  # fmt: skip
    assert tables == [("accounts",)]


def test_written_since_reports_what_any_builder_stored_after_the_token(pg_url: str) -> None:
    """What a builder reads, every half second, to skip files another builder
    already stored instead of claiming and reading each."""
    with open_store(pg_url) as mine, open_store(pg_url) as other:
        token, nothing = mine.written_since(None)
        assert nothing == {}
        other.put_document(doc("a.txt"), [])
        token, written = mine.written_since(token)
        assert list(written) == [make_doc_id("/data", "a.txt")]
        assert tuple(written[make_doc_id("/data", "a.txt")]) == (10, 1, "s", "f")
        assert mine.written_since(token)[1] == {}


# ---------------------------------------------------------------- the password


def test_the_password_never_appears(pg_server: Any) -> None:
    db = pg_server.new_database()
    url = pg_server.password_url(db)
    outputs = [
        run_cli("build", SAMPLE_DOCS, "--store", url, "--json"),
        run_cli("build", SAMPLE_DOCS, "--store", url),
        run_cli("ask", "oven", "--store", url, "--json", "--explain"),
        run_cli("summaries", "--store", url),
        run_cli("config", "show", "--store", url),
        run_cli("config", "show", "--store", url, "--json"),
        run_cli("show", "nothing-like-this", "--store", url),
    ]
    assert [o.code for o in outputs] == [0, 0, 0, 0, 0, 0, 2]
    wrong = url.replace(TEST_PASSWORD, TEST_PASSWORD + "x")
    refused = run_cli("summaries", "--store", wrong)
    assert refused.code == 1 and "password authentication failed" in refused.stderr
    bad_option = run_cli("summaries", "--store", url + "&nonsense=" + TEST_PASSWORD)
    assert bad_option.code != 0
    for out in [*outputs, refused, bad_option]:
        assert TEST_PASSWORD not in out.stdout + out.stderr, out
    assert "***" in refused.stderr
    # Nor in what the store keeps.
    dump = pg_server.sql(db, "SELECT string_agg(t::text, ' ') FROM docsum.runs t")
    assert TEST_PASSWORD not in dump
    assert display_location(url).count("***") == 1


# ---------------------------------------------------------------- schema versions


def test_newer_schema_is_refused_untouched(pg_url: str) -> None:
    with open_store(pg_url):
        pass
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE docsum.schema_version SET version = 99")
        before = conn.execute("SELECT count(*) FROM docsum.meta").fetchone()[0]
    with pytest.raises(StoreVersionError, match="newer docsum"):
        open_store(pg_url)
    assert run_cli("summaries", "--store", pg_url).code == 1
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT version FROM docsum.schema_version").fetchone()[0] == 99
        assert conn.execute("SELECT count(*) FROM docsum.meta").fetchone()[0] == before


def test_migrations_run_in_order_and_a_reader_upgrades(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pgschema, "PG_MIGRATIONS", pgschema.PG_MIGRATIONS[:1])
    with open_store(pg_url) as store:
        assert store.schema_version == 1
    extra = "CREATE TABLE later (x INTEGER); INSERT INTO later VALUES (7);"
    monkeypatch.setattr(pgschema, "PG_MIGRATIONS", [*pgschema.PG_MIGRATIONS, extra])
    with open_store(pg_url, create=False, readonly=True) as store:
        assert store.schema_version == len(pgschema.PG_MIGRATIONS)
        with pytest.raises(DocsumError, match="read-only"):
            store.set_meta("k", 1)
    assert pg_count(pg_url, "SELECT x FROM later") == 7


# ---------------------------------------------------------------- claims


def test_a_claim_excludes_other_builders_until_released_or_its_holder_is_gone(pg_url: str) -> None:
    first, second = open_store(pg_url), open_store(pg_url)
    try:
        assert first.claim("d1") and first.claim("d1")  # a holder may claim again
        assert not second.claim("d1")
        first.release_claim("d1")
        assert second.claim("d1")
        assert first.claim("d2")
        first.close()  # its connection ends, like a builder killed with SIGKILL
        # Taken over as soon as the server has seen the backend go, long
        # before the claim's 60 s lease would run out.
        wait_for(lambda: second.claim("d2"), timeout=10, interval=0.1, what="the closed holder's claim")
    finally:
        first.close()
        second.close()


def test_a_document_commit_releases_its_claim_in_the_same_transaction(pg_url: str) -> None:
    """A builder killed between committing a document and releasing its claim
    left the claim row behind for good (seen as a flaky SIGKILL test): the
    claim now goes in the document's own transaction, and so does a removal's."""
    store = open_store(pg_url)
    try:
        first, second = doc("claimed.txt"), doc("removed.txt")
        assert store.claim(first.doc_id) and store.claim(second.doc_id)
        store.put_document(first, [])
        assert pg_count(pg_url, "SELECT count(*) FROM claims") == 1
        store.remove_document(second.doc_id)
        assert pg_count(pg_url, "SELECT count(*) FROM claims") == 0
        # A claim whose holder is gone is swept when a run finishes.
        gone = open_store(pg_url)
        assert gone.claim("orphan")
        gone.close()
        run = store.start_run("build", {})
        wait_for(
            lambda: (store.finish_run(run, "ok", {}, {}), pg_count(pg_url, "SELECT count(*) FROM claims") == 0)[1],
            timeout=10,
            interval=0.1,
            what="the orphaned claim swept",
        )
    finally:
        store.close()


def test_an_expired_claim_of_a_stopped_builder_is_taken_over(pg_url: str, tmp_path: Path) -> None:
    """A builder whose process is frozen (SIGSTOP: its connection stays open,
    its heartbeat stops) loses its claim once the claim times out."""
    open_store(pg_url).close()
    env = subprocess_env(DOCSUM_CLAIM_TIMEOUT="1")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom docsum.store.opening import open_store\n"
         "s = open_store(sys.argv[1]); assert s.claim('d1'); print('claimed', flush=True); time.sleep(60)", pg_url],
        env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "claimed"
        os.environ["DOCSUM_CLAIM_TIMEOUT"] = "1"
        other = open_store(pg_url)
        time.sleep(1.5)  # the holder's heartbeat keeps it alive past the timeout
        assert not other.claim("d1")
        holder.send_signal(signal.SIGSTOP)
        wait_for(lambda: other.claim("d1"), timeout=10, interval=0.2, what="the stopped holder's claim to expire")
        other.close()
    finally:
        os.environ.pop("DOCSUM_CLAIM_TIMEOUT", None)
        holder.kill()
        holder.wait()


# ---------------------------------------------------------------- several builders


def _wait(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def test_builders_at_once_summarize_each_document_exactly_once(tmp_path: Path, pg_url: str) -> None:
    docs = tmp_path / "docs"
    make_docs(docs, 24)
    with FakeOpenAI(latency=0.1) as fake:
        args = ["build", docs, "--store", pg_url, "--json", "--concurrency", "2", *llm_args(fake)]
        procs = [spawn_cli(*args) for _ in range(3)]
        results = [_wait(p) for p in procs]
        assert [r[0] for r in results] == [0, 0, 0], results
        per_doc = requests_per_marker(fake.chat_requests(), [marker(i) for i in range(24)])
    assert per_doc == {marker(i): 1 for i in range(24)}
    reports = [json.loads(r[1]) for r in results]
    assert sum(r["documents"]["added"] for r in reports) == 24
    assert all(r["documents"]["added"] + r["documents"]["unchanged"] == 24 for r in reports)
    assert pg_count(pg_url) == 24 and pg_count(pg_url, "SELECT count(*) FROM claims") == 0
    # No builder took another's live run for an abandoned one.
    assert pg_count(pg_url, "SELECT count(*) FROM runs WHERE status = 'ok'") == 3


def test_sigkill_mid_build_then_every_finished_document_is_stored_once_and_resume_does_the_rest(
    tmp_path: Path, pg_url: str
) -> None:
    docs = tmp_path / "docs"
    n = 30
    make_docs(docs, n)
    with FakeOpenAI(latency=0.2) as fake:
        args = ["build", docs, "--store", pg_url, "--json", "--concurrency", "2", *llm_args(fake)]
        proc = spawn_cli(*args)
        try:
            wait_for(lambda: pg_count(pg_url) >= 6 or proc.poll() is not None, what="documents committed")
            proc.kill()
        finally:
            proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        stored = {r for r in _stored_paths(pg_url)}
        assert 6 <= len(stored) < n
        done = {f"DOCMARK{int(p[3:6]):03d}" for p in stored}
        first = requests_per_marker(fake.chat_requests(), [marker(i) for i in range(n)])
        assert all(first[m] == 1 for m in done)
        # Each stored document's calls were committed with it, once.
        assert pg_count(pg_url, "SELECT count(*) FROM calls") >= len(stored)

        fake.reset()
        resumed = run_cli(*args)
        assert resumed.code == 0, resumed
        counts = resumed.json()["documents"]
        assert counts["unchanged"] == len(stored) and counts["added"] == n - len(stored)
        second = requests_per_marker(fake.chat_requests(), [marker(i) for i in range(n)])
    assert {m: c for m, c in second.items() if m in done} == {m: 0 for m in done}
    assert all(c == 1 for m, c in second.items() if m not in done)
    assert pg_count(pg_url) == n and pg_count(pg_url, "SELECT count(*) FROM claims") == 0
    with open_store(pg_url, create=False, readonly=True) as store:
        # The killed builder's run is closed as such by the next build.
        assert [r["status"] for r in store.runs()] == ["ok", "killed"]


def _stored_paths(url: str) -> list[str]:
    with open_store(url, create=False, readonly=True) as store:
        return [d.path for d in store.list_documents()]


def test_a_builder_pruning_does_not_remove_what_another_just_added(tmp_path: Path, pg_url: str) -> None:
    docs = tmp_path / "docs"
    make_docs(docs, 3)
    assert run_cli("build", docs, "--store", pg_url).code == 0
    with open_store(pg_url) as store:
        import asyncio

        from docsum.builder.pipeline import Builder, BuildOptions
        from docsum.models.extractive import ExtractiveLLM

        builder = Builder(store, ExtractiveLLM(), BuildOptions(paths=[docs]))
        plan = asyncio.run(builder.reconcile())
        gone = [d for d in store.list_documents() if d.path == "doc000.txt"]
        # The file vanished when this builder looked, but is back (another
        # builder stored it again) by the time it prunes.
        assert builder._remove(gone[0]) is False  # noqa: SLF001 - the prune step alone
        assert plan.to_remove == []
    assert pg_count(pg_url) == 3


# ---------------------------------------------------------------- ask fetches only what changed


class CountingSource:
    """The store as docsum.store.vectors sees it, counting what each refresh fetched."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.fetched: list[int] = []

    def vector_changes(self, since: int) -> Any:
        changes = self.store.vector_changes(since)
        self.fetched.append(changes.count)
        return changes


def test_ask_fetches_only_what_changed_since_the_last_question(pg_url: str) -> None:
    from docsum.store.vectors import load_vectors, refresh_vectors

    with open_store(pg_url) as writer:
        for i in range(5):
            writer.put_document(doc(f"d{i}.txt", vector=[1.0, float(i)]), [])
        with open_store(pg_url, create=False, readonly=True) as reader:
            source, path = CountingSource(reader), reader.vectors_file
            assert load_vectors(source, path).doc_count() == 5 and source.fetched == [5]
            assert load_vectors(source, path).doc_count() == 5 and source.fetched[-1] == 0
            writer.put_document(doc("d9.txt", vector=[0.0, 1.0]), [])
            writer.remove_document(make_doc_id("/data", "d0.txt"))
            view = load_vectors(source, path)
            assert source.fetched[-1] == 2  # one written, one removed: not the table
            ids, scores = view.scores(np.array([1.0, 0.0], dtype=np.float32))
            assert sorted(ids) == sorted(
                make_doc_id("/data", p) for p in ("d1.txt", "d2.txt", "d3.txt", "d4.txt", "d9.txt")
            )
    # Another process reuses the file; once it is rewritten (a build on this
    # machine, or too many changes to lay over it) nothing is fetched at all.
    with open_store(pg_url, create=False, readonly=True) as again:
        source = CountingSource(again)
        assert load_vectors(source, again.vectors_file).doc_count() == 5 and source.fetched[-1] == 2
        refresh_vectors(again, again.vectors_file)
        assert load_vectors(source, again.vectors_file).doc_count() == 5 and source.fetched[-1] == 0


def test_a_write_committed_after_a_later_one_is_not_missed(pg_url: str) -> None:
    """A transaction that began before the reader's snapshot and commits after
    it must still be reported (a plain sequence number would skip it)."""
    import psycopg

    a, b = make_doc_id("/data", "a.txt"), make_doc_id("/data", "b.txt")
    with open_store(pg_url) as writer, open_store(pg_url, create=False, readonly=True) as reader:
        writer.put_document(doc("a.txt", vector=[1.0, 0.0]), [])
        first = reader.vector_changes(0)
        slow = psycopg.connect(pg_url, autocommit=False)
        slow.execute("UPDATE docsum.documents SET embedding_model = 'late' WHERE doc_id = %s", (a,))  # not committed
        writer.put_document(doc("b.txt", vector=[0.0, 1.0]), [])
        second = reader.vector_changes(first.generation)
        assert [c.doc_id for batch in second.batches for c in batch] == [b]
        slow.commit()
        slow.close()
        third = reader.vector_changes(second.generation)
        late = {c.doc_id: c.model for batch in third.batches for c in batch}
        assert late.get(a) == "late"
