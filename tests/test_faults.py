"""LLM and embedding server faults, through the real command line.

Every fault comes from a FakeOpenAI server reached with --base-url (nothing is
patched). Each one is either retried (and the command succeeds) or degraded
with exactly one clear line on stderr naming the cause: never a traceback,
stdout still exactly one JSON document with --json where there is a result to
report, and the store left intact.

What other files already cover is not repeated here: the question edge cases
(tests/test_ask.py), choice answers in prose that fall back to embedding order
(tests/test_retrieve.py), a server that never answers a build
(tests/test_build.py), and the client-level retry/timeout mechanics
(tests/test_llm_openai.py).
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from fakeopenai import FakeOpenAI, Reply, default_embedding
from helpers import (
    CliResult,
    kind_of,
    llm_args,
    make_docs,
    marker,
    only_the_error_document,
    requests_per_marker,
    run_cli,
    run_cli_subprocess,
    subprocess_env,
    user_text,
)

from docsum.builder.pipeline import BuildOptions, build
from docsum.models.extractive import ExtractiveLLM
from docsum.store.sqlite import Store

QUESTION = "What does the bees report say?"
FAST_RETRY = {"retry-after-ms": "1"}  # the openai client honours it: no 0.5 s back-off per retry
CONTEXT_ERROR = Reply(
    status=400,
    error_code="context_length_exceeded",
    error_message="This model's maximum context length is 2048 tokens. However, your messages resulted in 5000 tokens.",
)


# --------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four small documents built offline: lexical summary vectors, so an ask
    against the fake server makes chat requests only (compact: one answer call)."""
    root = tmp_path_factory.mktemp("faults")
    make_docs(root / "docs", 4)
    path = root / "store.sqlite"
    report = asyncio.run(build(path, ExtractiveLLM(), BuildOptions(paths=[root / "docs"])))
    assert report.counts["added"] == 4
    return path


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """One retry per request (the default is 4 with back-off: too slow for a test)."""
    monkeypatch.setenv("DOCSUM_MAX_RETRIES", "1")


def snapshot(store: Path) -> dict[str, Any]:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return {
            "documents": conn.execute("SELECT * FROM documents ORDER BY doc_id").fetchall(),
            "nodes": conn.execute("SELECT * FROM nodes ORDER BY doc_id, seq").fetchall(),
            "failures": conn.execute("SELECT root, path, error, attempts FROM failures ORDER BY path").fetchall(),
        }
    finally:
        conn.close()


def assert_intact(store: Path, before: dict[str, Any] | None = None) -> None:
    with Store.open(store, create=False, readonly=True) as s:
        assert s.integrity_ok()
    if before is not None:
        assert snapshot(store) == before


def no_traceback(result: CliResult) -> None:
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result


def the_error(result: CliResult, code: int, *needles: str) -> str:
    """The command failed with `code` and said why in exactly one stderr line
    (and nothing else), naming the cause."""
    assert result.code == code, result
    no_traceback(result)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result
    line = lines[0]
    assert line.startswith("docsum: error: ") or line.startswith("docsum: nothing to answer from: "), line
    for needle in needles:
        assert needle in line, (needle, line)
    return line


def ask(store: Path, fake: FakeOpenAI, *extra: str) -> CliResult:
    return run_cli("ask", QUESTION, "--store", store, *llm_args(fake), "--no-stream", *extra)


def ok_json(result: CliResult) -> dict[str, Any]:
    assert result.code == 0, result
    no_traceback(result)
    data = result.json()
    assert data["status"] == "ok" and data["answer"].strip()
    return data


# --------------------------------------------------------------------------- rate limits and 5xx


def test_429_waits_for_retry_after_then_succeeds(store: Path) -> None:
    before = snapshot(store)
    with FakeOpenAI() as fake:
        fake.script(Reply(status=429, error_message="Rate limit reached", headers={"Retry-After": "1"}))
        data = ok_json(ask(store, fake, "--json"))
        first, second = fake.chat_requests()
    assert second.started - first.finished >= 0.9  # the server's Retry-After, not the client's default
    assert first.body == second.body
    assert data["usage"]["llm_calls"] == 1  # one call, retried inside the client
    assert_intact(store, before)


def test_429_that_persists_is_one_line_naming_it(store: Path, fast_retries: None) -> None:
    with FakeOpenAI() as fake:
        fake.script(*[Reply(status=429, error_message="Rate limit reached", headers=FAST_RETRY)] * 2)
        result = ask(store, fake, "--json")
        assert len(fake.chat_requests()) == 2  # retried once
    the_error(result, 1, "answered 429", "Rate limit reached")
    only_the_error_document(result)


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_errors_are_retried_then_reported(store: Path, fast_retries: None, status: int) -> None:
    before = snapshot(store)
    with FakeOpenAI() as fake:
        fake.script(Reply(status=status, error_message="upstream hiccup", headers=FAST_RETRY))
        ok_json(ask(store, fake, "--json"))
        assert len(fake.chat_requests()) == 2

        fake.reset()
        fake.script(*[Reply(status=status, error_message="upstream down", headers=FAST_RETRY)] * 2)
        result = ask(store, fake, "--json")
        assert len(fake.chat_requests()) == 2
    the_error(result, 1, f"answered {status}", "upstream down")
    only_the_error_document(result)
    assert_intact(store, before)


# --------------------------------------------------------------------------- timeouts and broken connections


def test_timeout_is_retried_then_reported(store: Path, fast_retries: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # A timeout a loaded machine's prompt reply still meets (0.3 s failed a
    # CI run beside a benchmark), far below the slow replies' delay.
    monkeypatch.setenv("DOCSUM_TIMEOUT", "1.5")
    with FakeOpenAI() as fake:
        fake.script(Reply(delay=8))  # one slow reply, then a prompt one
        ok_json(ask(store, fake, "--json"))
        assert len(fake.chat_requests()) == 2

        fake.reset()
        fake.script(Reply(delay=8), Reply(delay=8))
        began = time.monotonic()
        result = ask(store, fake, "--json")
        elapsed = time.monotonic() - began
    the_error(result, 1, "timed out after 1.5s", "retried 1x")
    assert elapsed < 8  # gave up on its own timeout, did not wait for the server
    only_the_error_document(result)


def test_connection_dropped_mid_response_is_retried_then_reported(store: Path, fast_retries: None) -> None:
    with FakeOpenAI() as fake:
        fake.script(Reply(drop_mid_stream=True))
        ok_json(ask(store, fake, "--json"))
        assert len(fake.chat_requests()) == 2

        fake.reset()
        fake.script(Reply(drop_mid_stream=True), Reply(drop_mid_stream=True))
        result = ask(store, fake, "--json")
    # The server was reached: the message must not send the user chasing a network problem.
    line = the_error(result, 1, "broke off mid-response")
    assert "cannot reach" not in line
    only_the_error_document(result)


def test_stream_dropped_mid_answer_keeps_what_was_shown_and_says_so(store: Path, tmp_path: Path) -> None:
    before = snapshot(store)
    with FakeOpenAI() as fake:
        fake.script(Reply(text="The bees report says every item is fine today.", drop_mid_stream=True))
        # A real process: nothing may print a traceback on its way out.
        result = run_cli_subprocess(
            "ask",
            QUESTION,
            "--store",
            store,
            *llm_args(fake),
            "--stream",
            env=subprocess_env(DOCSUM_HOME=str(tmp_path / "home")),
        )
    the_error(result, 1, "stream from", "broke off after")
    assert result.stdout.strip() and "The bees report says every item is fine today." not in result.stdout
    assert "Sources:" not in result.stdout  # no sources under a half answer
    assert_intact(store, before)


# --------------------------------------------------------------------------- malformed and empty completions


@pytest.mark.parametrize(
    "body,why",
    [
        (b"<html><body>502 Bad Gateway</body></html>", "not JSON"),
        (b'{"id": "x", "object": "chat.completion"}', "without choices"),
        (b'{"choices": "none today"}', "without choices"),
        (b'{"choices": [{"index": 0, "message": null}]}', "without choices"),
        (b"[1, 2, 3]", "without choices"),
    ],
    ids=["html", "no-choices", "choices-not-a-list", "null-message", "a-list"],
)
def test_malformed_completion_is_one_line(store: Path, body: bytes, why: str) -> None:
    with FakeOpenAI() as fake:
        fake.script(Reply(raw_body=body))
        result = ask(store, fake, "--json")
    the_error(result, 1, "sent a malformed response", why)
    only_the_error_document(result)


def test_malformed_completion_in_a_real_process(store: Path, tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.script(Reply(raw_body=b"garbage"))
        result = run_cli_subprocess(
            "ask",
            QUESTION,
            "--store",
            store,
            *llm_args(fake),
            "--json",
            env=subprocess_env(DOCSUM_HOME=str(tmp_path / "home")),
        )
    the_error(result, 1, "malformed response (not JSON")


def test_empty_completion_is_an_empty_result_with_its_reason(store: Path) -> None:
    with FakeOpenAI() as fake:
        fake.script(Reply(text=""))
        result = ask(store, fake, "--json")
        the_error(result, 5, "the model returned an empty answer")
        data = result.json()  # still exactly one JSON document
        assert data["status"] == "empty" and data["reason"] == "the model returned an empty answer"
        assert data["answer"] == "" and data["sources"]

        fake.script(Reply(text="   \n"))
        result = run_cli("ask", QUESTION, "--store", store, *llm_args(fake), "--stream")
        the_error(result, 5, "the model returned an empty answer")
        assert "Sources:" in result.stdout  # what it was asked about, for the user to read


def test_empty_polish_keeps_the_answer_when_streaming(store: Path) -> None:
    def respond(body: dict[str, Any]) -> str:
        return "" if kind_of(body) == "polish" else "The bees report says every item is fine."

    with FakeOpenAI(responder=respond) as fake:
        for stream in ("--stream", "--no-stream"):
            result = run_cli("ask", QUESTION, "--store", store, *llm_args(fake), "--polish", stream)
            assert result.code == 0, (stream, result)
            assert result.stdout.startswith("The bees report says every item is fine."), (stream, result)
            no_traceback(result)


def test_rerank_answer_in_prose_keeps_the_order_with_a_warning(store: Path) -> None:
    def respond(body: dict[str, Any]) -> str:
        return "Honestly, they all look useful to me." if kind_of(body) == "rerank" else "Bees are fine."

    with FakeOpenAI(responder=respond) as fake:
        result = run_cli("ask", QUESTION, "--store", store, *llm_args(fake), "--rerank", "2", "--json")
        data = ok_json(result)
        assert any("rerank" in w and "could not be parsed" in w for w in data["warnings"])
        result = run_cli("ask", QUESTION, "--store", store, *llm_args(fake), "--rerank", "2", "--no-stream")
    assert result.code == 0, result
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "rerank" in warnings[0] and "could not be parsed" in warnings[0]


# --------------------------------------------------------------------------- context length


@pytest.mark.parametrize(
    "kind,options,step",
    [
        ("choice", ["--retriever", "llm"], "retrieval (llm)"),
        ("rerank", ["--rerank", "2"], "rerank"),
        ("answer", [], "answer (compact)"),
        ("polish", ["--polish"], "polish"),
    ],
)
def test_context_length_error_names_the_step(store: Path, kind: str, options: list[str], step: str) -> None:
    def respond(body: dict[str, Any]) -> Reply | str:
        if kind_of(body) == kind:
            return CONTEXT_ERROR
        if kind_of(body) in ("choice", "rerank"):
            return json.dumps({"choices": [{"doc": 1, "relevance": 8}]})
        return "Bees are fine."

    with FakeOpenAI(responder=respond) as fake:
        result = ask(store, fake, *options)
        sent = [kind_of(r.body) for r in fake.chat_requests()]
    line = the_error(
        result,
        1,
        f"docsum: error: {step}: prompt too long for fake-chat",
        "--context-window",
        "maximum context length is 2048",
    )
    assert len(line) < 400
    assert sent.count(kind) == 1  # a 400 is not retried


# --------------------------------------------------------------------------- builds


def test_a_file_failing_again_because_the_server_did_is_not_sent_to_the_ignore_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A file failing run after run is pointed at .docsumignore; one whose
    # summary failed because the server did is not the file's fault, and
    # ignoring it would hide a good document once the server is back.
    monkeypatch.setenv("DOCSUM_MAX_RETRIES", "0")
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    make_docs(folder, 2)

    def respond(body: dict[str, Any]) -> Reply | str:
        if marker(1) in user_text(body):
            return Reply(status=500, error_message="upstream exploded")
        return "A summary."

    with FakeOpenAI(responder=respond) as fake:
        for _ in range(2):
            result = run_cli("build", folder, "--store", store, *llm_args(fake))
    assert result.code == 3, result
    [line] = [x for x in result.stderr.splitlines() if x.startswith("docsum: failed doc001.txt")]
    assert "answered 500" in line and "(failed 2 runs in a row)" in line and ".docsumignore" not in line, line


def test_build_keeps_the_summaries_that_worked_and_retries_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCSUM_MAX_RETRIES", "0")
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    make_docs(folder, 7)
    faults = {
        marker(3): Reply(status=500, error_message="upstream exploded"),
        marker(4): CONTEXT_ERROR,
        marker(5): Reply(raw_body=b"<html>oops</html>"),
        marker(6): Reply(text=""),
    }

    def respond(body: dict[str, Any]) -> Reply | str:
        prompt = user_text(body)
        for mark, reply in faults.items():
            if mark in prompt:
                return reply
        return "A summary: " + " ".join(prompt.split()[-12:])

    with FakeOpenAI(responder=respond) as fake:
        result = run_cli("build", folder, "--store", store, *llm_args(fake), "--json")
    assert result.code == 3, result
    no_traceback(result)
    data = result.json()
    assert data["documents"]["added"] == 3 and data["documents"]["failed"] == 4
    errors = {f["path"]: f["error"] for f in data["failures"]}
    assert errors.keys() == {"doc003.txt", "doc004.txt", "doc005.txt", "doc006.txt"}
    assert "answered 500: upstream exploded" in errors["doc003.txt"]
    assert "prompt too long for fake-chat" in errors["doc004.txt"] and "--context-window" in errors["doc004.txt"]
    assert "malformed response (not JSON" in errors["doc005.txt"]
    assert "empty summary" in errors["doc006.txt"]
    for error in errors.values():
        assert error.startswith("summary failed: ") and "\n" not in error
    lines = result.stderr.strip().splitlines()
    assert sorted(lines) == sorted(f"docsum: failed {p}: {e}" for p, e in errors.items())  # one line each
    with Store.open(store, create=False, readonly=True) as s:
        assert s.integrity_ok()
        assert [d.path for d in s.list_documents()] == ["doc000.txt", "doc001.txt", "doc002.txt"]
        assert {f["path"]: f["attempts"] for f in s.failures()} == {p: 1 for p in errors}

    # Next run, the server healthy: only the failed documents are summarized.
    with FakeOpenAI() as fake:
        result = run_cli("build", folder, "--store", store, *llm_args(fake), "--json")
        asked = requests_per_marker(fake.chat_requests(), [marker(i) for i in range(7)])
    assert result.code == 0, result
    data = result.json()
    assert data["documents"] == {"added": 4, "updated": 0, "unchanged": 3, "removed": 0, "failed": 0}
    assert asked == {marker(i): (1 if i >= 3 else 0) for i in range(7)}
    with Store.open(store, create=False, readonly=True) as s:
        assert len(s.list_documents()) == 7 and s.failures() == []


@pytest.mark.parametrize("concurrency", ["1", "8"])
def test_early_failures_do_not_stop_a_build_whose_server_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, concurrency: str
) -> None:
    """Documents finish out of order: three fast failures can land before the
    first (slow) success. That success shows the server works, so the build
    goes on (exit 3, every document attempted) instead of stopping."""
    monkeypatch.setenv("DOCSUM_MAX_RETRIES", "0")
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    make_docs(folder, 7)
    failing = [marker(i) for i in range(3)]

    def respond(body: dict[str, Any]) -> Reply | str:
        prompt = user_text(body)
        if any(m in prompt for m in failing):
            return Reply(status=500, error_message="upstream exploded")
        return Reply(text="A summary of the document.", delay=0.3)

    with FakeOpenAI(responder=respond) as fake:
        result = run_cli("build", folder, "--store", store, *llm_args(fake), "--concurrency", concurrency, "--json")
        asked = requests_per_marker(fake.chat_requests(), [marker(i) for i in range(7)])
    assert result.code == 3, result
    data = result.json()
    assert data["documents"]["added"] == 4 and data["documents"]["failed"] == 3
    assert asked == {marker(i): 1 for i in range(7)}
    with Store.open(store, create=False, readonly=True) as s:
        assert len(s.list_documents()) == 4 and len(s.failures()) == 3


def test_changed_file_that_fails_keeps_its_previous_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCSUM_MAX_RETRIES", "0")
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    paths = make_docs(folder, 3)
    with FakeOpenAI() as fake:
        assert run_cli("build", folder, "--store", store, *llm_args(fake)).code == 0
    before = snapshot(store)

    paths[0].write_text("   \n")  # now unreadable as a document
    paths[1].write_text(paths[1].read_text() + "\nA new paragraph about the harbour.\n")  # the server fails on it
    with FakeOpenAI(responder=lambda body: Reply(status=500, error_message="upstream exploded")) as fake:
        result = run_cli("build", folder, "--store", store, *llm_args(fake), "--json")
    assert result.code == 3, result
    no_traceback(result)
    data = result.json()
    assert data["documents"] == {"added": 0, "updated": 0, "unchanged": 1, "removed": 0, "failed": 2}
    assert {f["path"] for f in data["failures"]} == {"doc000.txt", "doc001.txt"}
    after = snapshot(store)
    assert after["documents"] == before["documents"] and after["nodes"] == before["nodes"]  # old versions kept
    assert {f[1] for f in after["failures"]} == {"doc000.txt", "doc001.txt"}

    with FakeOpenAI() as fake:  # the server is back: the changed file is summarized, the empty one still fails
        result = run_cli("build", folder, "--store", store, *llm_args(fake), "--json")
    assert result.code == 3, result
    assert result.json()["documents"]["updated"] == 1
    assert [(f["path"], f["attempts"]) for f in result.json()["failures"]] == [("doc000.txt", 2)]
    shown = run_cli("show", "doc000.txt", "--store", store, "--json").json()
    assert shown["summary"] == next(row[12] for row in before["documents"] if row[1] == "doc000.txt")


def test_build_waits_out_a_429(tmp_path: Path) -> None:
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    make_docs(folder, 3)
    with FakeOpenAI() as fake:
        fake.script(Reply(status=429, error_message="Rate limit reached", headers={"Retry-After": "1"}))
        result = run_cli("build", folder, "--store", store, *llm_args(fake), "--json", "--concurrency", "1")
        first, second = fake.chat_requests()[:2]
    assert result.code == 0, result
    no_traceback(result)
    assert result.json()["documents"]["added"] == 3 and result.stderr == ""
    assert second.started - first.finished >= 0.9


# --------------------------------------------------------------------------- embeddings


def embed_args(fake: FakeOpenAI) -> list[str]:
    return [*llm_args(fake), "--embed-model", "fake-embed"]


def test_wrong_dimension_at_build_keeps_the_summary_and_the_store_working(tmp_path: Path) -> None:
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    make_docs(folder, 2)
    with FakeOpenAI(embedding_dim=64) as fake:
        assert run_cli("build", folder, "--store", store, *embed_args(fake)).code == 0
        make_docs(folder, 1, start=2)
        fake.script_embeddings(Reply(embedding_dim=32))  # the server's model changed under the store
        result = run_cli("build", folder, "--store", store, *embed_args(fake), "--json")
        assert result.code == 0, result
        no_traceback(result)
        assert result.json()["documents"]["added"] == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result
        assert lines[0].startswith("docsum: warning: embedding failed for doc002.txt (")
        assert "returned 32 dimensions" in lines[0] and "have 64" in lines[0] and "lexical vectors" in lines[0]
        with Store.open(store, create=False, readonly=True) as s:
            assert s.integrity_ok()
            docs = {d.path: d for d in s.list_documents(with_embeddings=True)}
        assert docs.pop("doc002.txt").embedding_model == "docsum-lexical-v1"  # what it really holds
        assert [(d.embedding_model, d.embedding.shape[0]) for d in docs.values()] == [("fake-embed", 64)] * 2

        # The store keeps answering (lexical scoring for all, and --explain says why).
        result = run_cli("ask", QUESTION, "--store", store, *embed_args(fake), "--json", "--explain", "--no-stream")
    data = ok_json(result)
    assert data["documents"][0]["path"] == "doc000.txt"
    assert "differ in size" in result.stderr or "different models" in result.stderr


def test_failing_embedding_endpoint_at_build_keeps_the_summary(tmp_path: Path, fast_retries: None) -> None:
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    make_docs(folder, 2)
    with FakeOpenAI() as fake:
        fake.script_embeddings(*[Reply(status=500, error_message="embedder down", headers=FAST_RETRY)] * 2)
        result = run_cli("build", folder, "--store", store, *embed_args(fake), "--json", "--concurrency", "1")
    assert result.code == 0, result
    no_traceback(result)
    assert result.json()["documents"]["added"] == 2
    # Both summaries shared the request that failed: one line for each document.
    lines = sorted(result.stderr.strip().splitlines())
    assert len(lines) == 2, result
    for name, line in zip(("doc000.txt", "doc001.txt"), lines, strict=True):
        assert re.match(rf"docsum: warning: embedding failed for {name} \(.*answered 500: embedder down\)", line), line
    with Store.open(store, create=False, readonly=True) as s:
        assert {d.embedding_model for d in s.list_documents()} == {"docsum-lexical-v1"}


def test_build_embeds_summaries_in_shared_requests(tmp_path: Path) -> None:
    """Summaries finishing together share an embedding request; each document
    still gets the vector of its own text, and the requests' usage is stored."""
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    make_docs(folder, 20)
    with FakeOpenAI(embedding_dim=64) as fake:
        result = run_cli("build", folder, "--store", store, *embed_args(fake), "--json")
        requests = fake.embedding_requests()
    assert result.code == 0, result
    sent = [text for r in requests for text in r.body["input"]]
    assert len(sent) == 20 and len(requests) < 20
    vector_of = {mark: text for text in sent for mark in re.findall(r"DOCMARK\d{3}", text)}
    assert sorted(vector_of) == [marker(i) for i in range(20)]
    with Store.open(store, create=False, readonly=True) as s:
        for doc in s.list_documents(with_embeddings=True):
            expected = default_embedding(vector_of[doc.path.replace("doc", "DOCMARK").removesuffix(".txt")], 64)
            assert doc.embedding_model == "fake-embed"
            assert doc.embedding == pytest.approx(expected, abs=1e-5), doc.path
        (run,) = s.runs()
        embed_calls = [c for c in s.calls(run["id"]) if c["kind"] == "embed"]
    assert len(embed_calls) == len(requests)
    assert result.json()["usage"]["embedding_calls"] == len(requests)


def test_documents_waiting_for_vectors_let_the_next_ones_be_summarized(tmp_path: Path) -> None:
    """With one request in flight two documents are worked on at a time. One
    waiting for its vector gives up its place, so the next is summarized
    meanwhile and the batch grows past two (held in pairs: 3 requests)."""
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    make_docs(folder, 6)
    with FakeOpenAI(embedding_dim=64) as fake:
        result = run_cli("build", folder, "--store", store, *embed_args(fake), "--concurrency", "1", "--json")
        sizes = [len(r.body["input"]) for r in fake.embedding_requests()]
        assert fake.max_inflight == 1
    assert result.code == 0, result
    assert sum(sizes) == 6 and len(sizes) < 3, sizes


def test_a_summary_the_embedder_refuses_costs_only_its_own_vector(tmp_path: Path, fast_retries: None) -> None:
    """A 400 on a shared request may be about one text: each is retried alone,
    and only the one refused again falls back to lexical vectors."""
    folder, store = tmp_path / "docs", tmp_path / "s.sqlite"
    make_docs(folder, 2)
    refused = Reply(status=400, error_message="input too long")
    with FakeOpenAI(embedding_dim=64) as fake:
        fake.script_embeddings(refused, Reply(), refused)  # the pair, then each alone
        result = run_cli("build", folder, "--store", store, *embed_args(fake), "--json", "--concurrency", "1")
        sizes = [len(r.body["input"]) for r in fake.embedding_requests()]
    assert result.code == 0, result
    assert sizes == [2, 1, 1]  # a 400 is not retried as such, only split
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "answered 400: input too long" in lines[0], result
    lexical = re.match(r"docsum: warning: embedding failed for (doc00[01]\.txt) ", lines[0])
    assert lexical, lines[0]
    with Store.open(store, create=False, readonly=True) as s:
        models = {d.path: d.embedding_model for d in s.list_documents()}
    assert models.pop(lexical.group(1)) == "docsum-lexical-v1" and list(models.values()) == ["fake-embed"]


@pytest.fixture
def embedded_store(tmp_path: Path) -> Path:
    folder, store = tmp_path / "docs", tmp_path / "e.sqlite"
    make_docs(folder, 3)
    with FakeOpenAI(embedding_dim=64) as fake:
        assert run_cli("build", folder, "--store", store, *embed_args(fake), "--json").code == 0
    return store


@pytest.mark.parametrize(
    "reply,code,needles",
    [
        (Reply(embedding_dim=32), 2, ("returned 32 dimensions but the store holds 64", "rebuild")),
        (Reply(raw_body=b"not json"), 1, ("malformed response (not JSON",)),
        (
            Reply(raw_body=b'{"object": "list", "data": [{"index": 0, "embedding": "oops"}]}'),
            1,
            ("malformed response",),
        ),
        (Reply(raw_body=b'{"object": "list"}'), 1, ("malformed response",)),
        (Reply(status=503, error_message="embedder down", headers=FAST_RETRY), 1, ("answered 503", "embedder down")),
    ],
    ids=["wrong-dimension", "not-json", "not-a-vector", "no-data", "503"],
)
def test_bad_query_embedding_at_ask_is_one_line(
    embedded_store: Path, fast_retries: None, reply: Reply, code: int, needles: tuple[str, ...]
) -> None:
    before = snapshot(embedded_store)
    with FakeOpenAI(embedding_dim=64) as fake:
        fake.script_embeddings(reply, reply)
        result = run_cli("ask", QUESTION, "--store", embedded_store, *embed_args(fake), "--json")
        assert fake.chat_requests() == []  # stopped before any answer was paid for
    the_error(result, code, *needles)
    only_the_error_document(result)
    assert_intact(embedded_store, before)
