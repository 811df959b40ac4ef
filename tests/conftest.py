"""Shared pytest fixtures for docsum's tests."""

from __future__ import annotations

import inspect
import re
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# tests/ is not a package; make the helper importable as `fakeopenai` under
# every pytest import mode (importlib mode does not touch sys.path itself).
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
# The checkout itself: the CLI package is `cli` here (installed, it is
# `docsum_cli`), and tests drive the checkout's code.
_REPO = str(Path(__file__).resolve().parents[1])
if _REPO not in sys.path:
    sys.path.insert(1, _REPO)

from fakeopenai import FakeOpenAI  # noqa: E402
from helpers import isolate_docsum_env  # noqa: E402


@pytest.fixture(autouse=True)
def docsum_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh DOCSUM_HOME per test, with every other docsum setting unset."""
    home = tmp_path / "docsum_home"
    isolate_docsum_env(monkeypatch, home)
    return home


@pytest.fixture
def fake_llm() -> Iterator[FakeOpenAI]:
    """A started FakeOpenAI on 127.0.0.1; stopped after the test."""
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a connection or resolve a name fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the code under test tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder uid 65534 can reach (pytest's tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="docsum-ro-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for path in (folder, *folder.rglob("*")):
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(folder)


# --------------------------------------------------------------------------- PostgreSQL


def _throwaway_server(bindir: Path | None, missing: str, required_by: str) -> Iterator[object]:
    """A started server from `bindir` for the session, stopped after it. Skips
    saying `missing` (or that psycopg is) when it cannot run; with the
    environment variable `required_by` set to 1 (CI) that is a failure."""
    import os

    from pgserver import PostgresServer

    problem = missing if bindir is None else ""
    if not problem:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            problem = "psycopg is not installed: pip install -e '.[test]'"
    if problem:
        if os.environ.get(required_by) == "1":
            pytest.fail(f"{required_by}=1 but {problem}")
        pytest.skip(problem)
    assert bindir is not None
    server = PostgresServer(bindir, in_memory=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[object]:
    """One throwaway PostgreSQL server for the session (tests/pgserver.py), from
    Debian's packages or $DOCSUM_PG_BINDIR (DOCSUM_REQUIRE_POSTGRES=1: never a skip)."""
    from pgserver import find_bindir

    missing = "no PostgreSQL binaries (initdb) found: set DOCSUM_PG_BINDIR or install postgresql"
    yield from _throwaway_server(find_bindir(), missing, "DOCSUM_REQUIRE_POSTGRES")


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[object]:
    """A second throwaway server, one whose PostgreSQL has pgvector: the
    `pgserver` wheel's (tests/pgserver.py::pgvector_bindir), which the test
    extra installs (DOCSUM_REQUIRE_PGVECTOR=1: never a skip)."""
    from pgserver import pgvector_bindir

    missing = "no PostgreSQL with pgvector: pip install -e '.[test]' (the pgserver wheel)"
    yield from _throwaway_server(pgvector_bindir(), missing, "DOCSUM_REQUIRE_PGVECTOR")


@pytest.fixture
def pg_url(pg_server: object) -> str:
    """A superuser URL to a fresh, empty database."""
    return pg_server.url(pg_server.new_database())  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def offline_sample_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sample_data/docs built once by the offline engine. Read-only: a test
    that changes a store builds its own."""
    import asyncio

    from docsum.builder.pipeline import BuildOptions, build
    from docsum.models.extractive import ExtractiveLLM

    store = tmp_path_factory.mktemp("offline-sample") / "store.sqlite"
    sample = Path(__file__).resolve().parents[1] / "sample_data" / "docs"
    asyncio.run(build(store, ExtractiveLLM(), BuildOptions(paths=[sample])))
    return store


# --------------------------------------------------------------------------- the `process` marker
# Tests that start another program (a CLI subprocess, a Python interpreter,
# PostgreSQL, a user switch through setpriv) or a server (FakeOpenAI and the
# other loopback servers) are marked `process`; `pytest -m "not process"` is
# the quick loop (CONTRIBUTING.md). The build's own parse workers do not count:
# every build starts them, and they are what is being tested.
#
# A test is marked when it uses one of these fixtures or its source names one
# of these words; the audit hook below fails any unmarked test that starts a
# process or binds a socket anyway, so a miss is found, not silently slow.
PROCESS_FIXTURES = frozenset({"fake_llm", "pg_server", "pg_url", "pgvector_server"})
PROCESS_WORDS = re.compile(
    r"\b(?:subprocess|Popen|sys\.executable|FakeOpenAI|setpriv|as_nobody|run_as_nobody|run_cli_as_nobody|run_python_as_nobody"
    r"|run_cli_subprocess|spawn_cli|cli_command|ThreadingHTTPServer|HTTPServer|socketserver)\b"
)
_STARTS_A_PROCESS = frozenset(
    {"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn", "os.system", "socket.bind"}
)
_running: dict[str, str | None] = {"unmarked": None}  # the test running now, when it is not marked
_started: dict[str, str] = {}  # unmarked test -> the first such event it caused


def _audit(event: str, args: tuple[object, ...]) -> None:
    test = _running["unmarked"]
    # A bind to a path (or an abstract name) is the parse pool's fork server, a
    # Unix socket; a server listens on an address and a port, a tuple.
    if (
        test is not None
        and event in _STARTS_A_PROCESS
        and not (event == "socket.bind" and not isinstance(args[1], tuple))
    ):
        _started.setdefault(test, event)


sys.addaudithook(_audit)


def _starts_processes(item: pytest.Item) -> bool:
    if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    function = getattr(item, "function", None)
    try:
        source = inspect.getsource(function) if function is not None else ""
    except (OSError, TypeError):
        source = ""
    return bool(PROCESS_WORDS.search(source))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("process") is None and _starts_processes(item):
            item.add_marker(pytest.mark.process)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    _running["unmarked"] = None if item.get_closest_marker("process") else item.nodeid
    try:
        return (yield)
    finally:
        _running["unmarked"] = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    report: pytest.TestReport = yield
    event = _started.pop(item.nodeid, None) if call.when == "teardown" else None
    if event is not None:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} started a process or a server ({event}) but is not marked `process`: "
            "add @pytest.mark.process (the quick loop `-m 'not process'` must not start any)"
        )
    return report
