"""`docsum mcp` end to end: the real server as a child process, driven by the
MCP SDK's own stdio client (and, for the stdout check, by raw JSON-RPC
lines). The engine is the offline one; the store is built from sample_data
once per module and copied for each test."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="docsum mcp needs the [mcp] extra")

from helpers import PLANTED_KEY, REPO, SAMPLE_DOCS, make_docs, run_cli_subprocess, subprocess_env  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

pytestmark = pytest.mark.process  # every test starts the MCP server as a subprocess

ANSWERABLE = "How many member households did the Larkspur Valley Water Cooperative have at the end of 2023?"
UNANSWERABLE = "What is the capital of Mongolia?"
TOOLS = {"ask", "search", "list_documents", "get_summary", "plan"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mcp_store")
    env = subprocess_env(DOCSUM_HOME=str(folder / "home"))
    result = run_cli_subprocess("build", SAMPLE_DOCS, "--store", folder / "s" / "store.sqlite", "-q", env=env)
    assert result.code == 0, result.stderr
    return folder / "s"


@pytest.fixture
def store(built: Path, tmp_path: Path) -> Path:
    """This test's copy of the store (with the vector file and BM25 index beside it)."""
    shutil.copytree(built, tmp_path / "s")
    return tmp_path / "s" / "store.sqlite"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return subprocess_env(DOCSUM_HOME=str(tmp_path / "home"), **extra)


@asynccontextmanager
async def session(tmp_path: Path, *args: str | Path, env: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cli.main", "mcp", *(str(a) for a in args)],
        env=env or _env(tmp_path),
        cwd=str(REPO),
    )
    with open(tmp_path / "server.stderr", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                yield client


def run(coro: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(coro(), timeout=120))


async def call(client: ClientSession, tool: str, **arguments: Any) -> tuple[bool, Any]:
    """(is_error, the JSON result or the error line)."""
    result = await client.call_tool(tool, arguments)
    text = result.content[0].text  # type: ignore[union-attr]
    return result.is_error, (text if result.is_error else json.loads(text))


def test_every_tool_answers_through_the_sdk_client(store: Path, tmp_path: Path) -> None:
    async def go() -> None:
        async with session(tmp_path, "--store", store) as client:
            listed = (await client.list_tools()).tools
            assert {t.name for t in listed} == TOOLS  # no build tool without --allow-build
            for tool in listed:
                assert tool.input_schema["type"] == "object" and len(tool.description or "") > 80

            failed, answer = await call(client, "ask", question=ANSWERABLE)
            assert not failed and answer["status"] == "answered"
            assert "1,146" in answer["answer"]
            # Offline, as `ask --json` says it: no LLM call, the engine's work counted apart.
            assert answer["usage"]["llm_calls"] == 0 and answer["offline"]["extractive_steps"] >= 1
            cited = answer["citations"]
            assert cited and all({"path", "pages", "quote", "supported"} <= set(c) for c in cited)
            assert any(c["path"].endswith("water_cooperative_annual_report_2023.md") and c["supported"] for c in cited)

            failed, found = await call(client, "search", query="Storm Wren rainfall", top_k=2)
            assert not failed and found["usage"]["llm_calls"] == 0
            assert found["documents"][0]["path"] == "storm_wren_incident_report.txt"
            assert found["documents"][0]["passages"] and "answer" not in found

            failed, page = await call(client, "list_documents", limit=3)
            assert not failed and page["total"] == 8 and len(page["documents"]) == 3 and page["next_offset"] == 3
            failed, last = await call(client, "list_documents", offset=6, limit=3)
            assert len(last["documents"]) == 2 and last["next_offset"] is None
            seen = {d["path"] for d in page["documents"] + last["documents"]}
            assert len(seen) == 5

            failed, shown = await call(client, "get_summary", doc="storm_wren_incident_report.txt")
            assert not failed and shown["nodes"] >= 1 and shown["summary"]

            failed, plan = await call(client, "plan", what="build", paths=[str(SAMPLE_DOCS)])
            assert not failed and plan["files"] == {"add": 0, "update": 0, "remove": 0} and plan["llm_calls"] == 0
            new = tmp_path / "new"
            make_docs(new, 3)
            failed, plan = await call(client, "plan", what="build", paths=[str(new)])
            assert not failed and plan["files"]["add"] == 3 and plan["llm_calls"] == 3 and plan["prompt_tokens"] > 0
            failed, plan = await call(client, "plan", what="ask", question=ANSWERABLE)
            assert not failed and plan["documents_in_store"] == 8 and plan["retrieval_llm_calls"] == 0

            resources = (await client.list_resources()).resources
            assert len(resources) == 8
            wren = next(r for r in resources if r.name == "storm_wren_incident_report.txt")
            read = await client.read_resource(str(wren.uri))
            assert read.contents[0].text == shown["summary"]  # type: ignore[union-attr]

    run(go)


def test_an_abstention_is_a_result_not_an_error(store: Path, tmp_path: Path) -> None:
    async def go() -> None:
        async with session(tmp_path, "--store", store) as client:
            failed, answer = await call(client, "ask", question=UNANSWERABLE)
            assert not failed
            assert answer["status"] == "abstained" and answer["reason"] and answer["answer"] == ""
            assert answer["citations"] == []

    run(go)


def test_bad_arguments_are_tool_errors_and_the_server_goes_on(store: Path, tmp_path: Path) -> None:
    async def go() -> None:
        async with session(tmp_path, "--store", store) as client:
            cases = [
                ("ask", {"question": ANSWERABLE, "top_k": 0}, "docsum: error: top_k: 0 is out of range"),
                ("ask", {"question": "  "}, "docsum: error: question: give a non-empty string"),
                ("ask", {"question": ANSWERABLE, "mode": "os:system"}, "docsum: error: mode: 'os:system' is not one"),
                ("ask", {"question": ANSWERABLE, "retriever": "magic"}, "docsum: error: retriever: 'magic'"),
                ("list_documents", {"limit": "ten"}, "docsum: error: limit: 'ten' is not a whole number"),
                ("get_summary", {"doc": "no-such.txt"}, "docsum: error: no document 'no-such.txt'"),
                ("plan", {"what": "build", "paths": ["/no/such/folder"]}, "docsum: error: no such file or directory"),
                ("plan", {"what": "everything"}, "docsum: error: what: 'everything' is not one of build, ask"),
                ("build", {"paths": [str(SAMPLE_DOCS)]}, "docsum: error: no tool 'build'"),
            ]
            for tool, arguments, expected in cases:
                result = await client.call_tool(tool, arguments)
                assert result.is_error, (tool, arguments)
                line = result.content[0].text  # type: ignore[union-attr]
                assert line.startswith(expected) and "\n" not in line, line
            failed, answer = await call(client, "ask", question=ANSWERABLE)
            assert not failed and answer["status"] == "answered"

    run(go)


def test_a_missing_store_is_an_error_until_it_is_built(tmp_path: Path) -> None:
    store = tmp_path / "later.sqlite"

    async def go() -> None:
        async with session(tmp_path, "--store", store) as client:
            failed, line = await call(client, "ask", question=ANSWERABLE)
            assert failed and line == f"docsum: error: no store at {store}; run `docsum build PATH` first"
            failed, line = await call(client, "list_documents")
            assert failed and "no store at" in line
            assert (await client.list_resources()).resources == []
            # Built by another process while the server runs: the next call sees it.
            built = await asyncio.to_thread(
                run_cli_subprocess, "build", SAMPLE_DOCS, "--store", store, "-q", env=_env(tmp_path)
            )
            assert built.code == 0, built.stderr
            failed, answer = await call(client, "ask", question=ANSWERABLE)
            assert not failed and answer["status"] == "answered"
            # A later build is seen by the next question too (the corpus kept
            # between questions is renewed when the store changes).
            extra = tmp_path / "extra"
            make_docs(extra, 1, start=70)
            again = await asyncio.to_thread(
                run_cli_subprocess, "build", extra, "--store", store, "-q", "--no-prune", env=_env(tmp_path)
            )
            assert again.code == 0, again.stderr
            failed, found = await call(client, "search", query="DOCMARK070 mills")
            assert not failed and found["documents"][0]["path"] == "doc070.txt"

    run(go)


def test_twenty_concurrent_calls_each_get_their_own_answer(store: Path, tmp_path: Path) -> None:
    questions = [json.loads(line)["question"] for line in (SAMPLE_DOCS.parent / "QUESTIONS.jsonl").open()][:10]

    async def go() -> None:
        async with session(tmp_path, "--store", store) as client:
            alone = [await call(client, "ask", question=q) for q in questions]
            together = await asyncio.gather(
                *(call(client, "ask", question=q) for q in questions),
                *(call(client, "search", query=q) for q in questions),
            )
            assert [r for r in together[:10]] == alone
            assert all(not failed and found["query"] == q for (failed, found), q in zip(together[10:], questions))

    run(go)


def test_a_failing_llm_server_is_a_tool_error(store: Path, tmp_path: Path) -> None:
    # Nothing listens on port 9 of loopback: every model request is refused.
    args = ("--store", store, "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--max-retries", "0")

    async def go() -> None:
        async with session(tmp_path, *args, "--retriever", "bm25") as client:
            failed, line = await call(client, "ask", question=ANSWERABLE)
            assert failed and line.startswith("docsum: error: ") and "\n" not in line
            failed, found = await call(client, "search", query="Storm Wren")  # no model call: still works
            assert not failed and found["documents"]

    run(go)


def test_build_only_with_allow_build_and_within_max_calls(store: Path, tmp_path: Path) -> None:
    many, few = tmp_path / "many", tmp_path / "few"
    make_docs(many, 5)
    make_docs(few, 2, start=50)

    async def go() -> None:
        async with session(tmp_path, "--store", store, "--allow-build", "--max-calls", "3") as client:
            assert "build" in {t.name for t in (await client.list_tools()).tools}
            failed, line = await call(client, "build", paths=[str(many)])
            assert failed and "more than --max-calls 3; nothing was sent" in line
            failed, report = await call(client, "build", paths=[str(few)])
            assert not failed and report["documents"]["added"] == 2
            failed, found = await call(client, "search", query="DOCMARK050 bees")
            assert found["documents"][0]["path"] == "doc050.txt"

    run(go)


def test_stdout_carries_only_protocol_messages_and_no_secret(store: Path, tmp_path: Path) -> None:
    """Raw bytes of the server's stdout, with a key in its environment."""
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "ask", "arguments": {
            "question": f"Is {PLANTED_KEY} the water cooperative's key?"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "ask", "arguments": {"top_k": -1}}},
        {"jsonrpc": "2.0", "id": 5, "method": "no/such/method"},
        {"jsonrpc": "2.0", "id": 6, "method": "resources/read", "params": {"uri": "docsum://document/nothing"}},
    ]  # fmt: skip
    stdin = "".join(json.dumps(r) + "\n" for r in requests).encode()
    env = _env(tmp_path, OPENAI_API_KEY=PLANTED_KEY, DOCSUM_LLM="extractive")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "mcp", "--store", str(store), "-v"],
        cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    # Requests are answered as they arrive; stdin stays open until every reply is out.
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(stdin)
    proc.stdin.flush()
    replies: dict[int, dict[str, Any]] = {}
    raw = b""
    while len(replies) < 6:
        line = proc.stdout.readline()
        assert line, f"server ended early: {proc.stderr.read()!r}"  # type: ignore[union-attr]
        raw += line
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0"
        if "id" in message:
            replies[message["id"]] = message
    proc.stdin.close()  # the client is gone: the server ends
    rest = proc.stdout.read()
    stderr = proc.stderr.read()  # type: ignore[union-attr]
    proc.wait(timeout=30)
    raw += rest
    assert proc.returncode == 0, stderr
    for line in raw.splitlines():
        assert json.loads(line)["jsonrpc"] == "2.0"  # every byte of stdout is a protocol message
    assert PLANTED_KEY.encode() not in raw and PLANTED_KEY.encode() not in stderr
    assert replies[3]["result"]["isError"] is False
    assert replies[4]["result"]["isError"] is True
    assert replies[4]["result"]["content"][0]["text"].startswith("docsum: error: top_k: -1 is out of range")
    assert "error" in replies[5] and "error" in replies[6]
    assert b"serving" in stderr  # the start-up line went to stderr


def test_without_the_extra_the_command_says_how_to_install_it(tmp_path: Path) -> None:
    # A stand-in `mcp` package that fails to import, first on the path.
    blocker = tmp_path / "blocker" / "mcp"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('blocked for the test')\n")
    env = _env(tmp_path)
    env["PYTHONPATH"] = f"{blocker.parent}{os.pathsep}{env['PYTHONPATH']}"
    result = run_cli_subprocess("mcp", "--store", tmp_path / "s.sqlite", env=env)
    assert result.code == 2
    assert result.stderr.strip().endswith("docsum: error: docsum mcp needs the MCP SDK: pip install 'docsum[mcp]'")
    assert result.stdout == ""
