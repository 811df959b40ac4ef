"""A PostgreSQL store that loses its server mid-build fails in one line: the
documents in flight are cancelled and awaited before the store is closed, so
no cleanup runs at interpreter shutdown against a closed store (which printed
a traceback per document: "unhandled exception during asyncio.run() shutdown
... store is closed"). The server here is the test's own: it is stopped."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakeopenai import FakeOpenAI
from helpers import llm_args, make_docs, spawn_cli, subprocess_env


@pytest.fixture
def own_server(pg_server: object) -> Iterator[object]:
    """A server of this test alone (pg_server only says binaries and psycopg exist)."""
    from pgserver import PostgresServer

    server = PostgresServer(pg_server.bindir, in_memory=True)  # type: ignore[attr-defined]
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_a_server_stopped_mid_build_ends_it_in_one_line(own_server: object, tmp_path: Path) -> None:
    url = own_server.password_url(own_server.new_database())  # type: ignore[attr-defined]
    make_docs(tmp_path / "docs", 60)
    with FakeOpenAI(latency=0.2) as fake:
        env = subprocess_env(DOCSUM_HOME=str(tmp_path / "home"))
        build = spawn_cli("build", tmp_path / "docs", "--store", url, *llm_args(fake), "--concurrency", "4", env=env)
        deadline = time.monotonic() + 60
        while len(fake.requests) < 6 and time.monotonic() < deadline and build.poll() is None:
            time.sleep(0.05)
        assert build.poll() is None, build.communicate()
        os.kill(own_server.proc.pid, signal.SIGQUIT)  # type: ignore[attr-defined]
        out, err = build.communicate(timeout=120)
    assert build.returncode in (1, 3), (build.returncode, err)
    assert "Traceback" not in err and "unhandled exception" not in err, err
    errors = [line for line in err.splitlines() if "error" in line]
    assert len(errors) == 1 and "connection" in errors[0], err
