"""Shared helpers for the CLI-level tests: run `docsum` in-process (typer's
CliRunner) or as a real subprocess, generate documents, read the store, and
count what a FakeOpenAI server was asked.

Every run goes through the real command line: the LLM is the offline engine or
a FakeOpenAI server reached through `--base-url`, never a patched client.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

SAMPLE_DOCS = REPO / "sample_data" / "docs"
# The shared evaluation PDFs live next to the checkout (absent in a bare clone).
# DOCSUM_EVAL_DIR names the eval folder where the checkout is elsewhere (a git worktree).
EVAL_PDFS = (
    Path(os.environ["DOCSUM_EVAL_DIR"]) / "pdfs"
    if os.environ.get("DOCSUM_EVAL_DIR")
    else Path(__file__).resolve().parents[2] / "shared" / "eval" / "pdfs"
)

PLANTED_KEY = "sk-test-PLANTED-123"


def isolate_docsum_env(monkeypatch: Any, home: Path) -> None:
    """DOCSUM_HOME at `home` (created), every other variable docsum reads
    unset: the table's (docsum.settings.environment_variables) and any other
    DOCSUM_* a developer's shell holds, so no shell setting leaks into a test
    or sends a test's prompts to a real server."""
    from docsum.settings import environment_variables

    home.mkdir(parents=True, exist_ok=True)
    for name in {*environment_variables(), *(n for n in os.environ if n.startswith("DOCSUM_"))}:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DOCSUM_HOME", str(home))


def prepared_once(folder: Path, prepare: Callable[[Path], None]) -> Path:
    """`prepare(folder)` run once (for a module or a session) in an isolated
    environment whose DOCSUM_HOME is `folder`/docsum_home, as the autouse
    fixture gives a test. Each test then takes its own copy with `copy_into`."""
    import pytest

    with pytest.MonkeyPatch.context() as monkeypatch:
        isolate_docsum_env(monkeypatch, folder / "docsum_home")
        prepare(folder)
    return folder


def copy_into(prepared: Path, tmp_path: Path) -> None:
    """A test's own copy of a `prepared_once` folder, laid out in its tmp_path
    (docsum_home included) exactly as if the test had prepared it there."""
    shutil.copytree(prepared, tmp_path, dirs_exist_ok=True)


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """stdout as exactly one JSON document (json.loads refuses trailing data)."""
        return json.loads(self.stdout)

    def __repr__(self) -> str:  # shown by pytest when an assertion fails
        return f"CliResult(code={self.code}, stdout={self.stdout[-2000:]!r}, stderr={self.stderr[-2000:]!r})"


NOBODY = 65534  # the unprivileged user permission tests run docsum as


def as_nobody(command: list[str]) -> list[str]:
    """``command`` run as the unprivileged user: everything here runs as root,
    which ignores file permissions."""
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *command]


@dataclass(frozen=True)
class NobodyRuntime:
    """What the unprivileged user runs docsum with: an interpreter it can
    execute and a PYTHONPATH it can read. The clone may sit in a folder only
    root can enter (`mktemp -d` makes 0700), so docsum's sources and the
    installed packages are linked (or copied) into a folder of mode 0755."""

    python: str
    pythonpath: str
    cwd: str


def _nobody_can_run(python: str) -> bool:
    probe = "import sys; print('%d.%d' % sys.version_info[:2])"
    try:
        proc = subprocess.run(
            as_nobody([python, "-I", "-c", probe]), cwd="/", capture_output=True, text=True, timeout=30
        )
    except OSError:
        return False
    return proc.returncode == 0 and proc.stdout.strip() == f"{sys.version_info[0]}.{sys.version_info[1]}"


# Not needed to run docsum: byte code (that user cannot write it anyway), the
# editable install's path hooks (they point back into the clone), pip.
SKIPPED_FILES = ("__pycache__", "*.pth", "__editable__*", "pip", "pip-*")
NOBODY_SKIP_HINT = "run the suite from a clone in a folder other users can enter (chmod 755 on each parent)"


@functools.cache
def nobody_runtime() -> NobodyRuntime | str:
    """The runtime for uid 65534, made once per test process; a string saying
    why there is none (no interpreter that user can execute)."""
    import atexit
    import sysconfig
    import tempfile

    from pgserver import link_tree  # tests/pgserver.py, not the wheel of that name

    if os.geteuid() != 0:
        return f"these tests run docsum as uid {NOBODY}, and only root can switch to it; run the suite as root to include them"
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    candidates = [sys.executable, os.path.realpath(sys.executable), str(Path(sys.base_prefix) / "bin" / version)]
    candidates += [p for p in (shutil.which(version, path="/usr/local/bin:/usr/bin"),) if p]
    python = next((c for c in dict.fromkeys(candidates) if _nobody_can_run(c)), None)
    if python is None:
        return (
            f"uid {NOBODY} can execute no Python {sys.version_info[0]}.{sys.version_info[1]} here; {NOBODY_SKIP_HINT}"
        )
    root = Path(tempfile.mkdtemp(prefix="docsum-nobody-"))
    atexit.register(shutil.rmtree, root, True)
    root.chmod(0o755)
    for package in ("docsum", "cli"):
        link_tree(REPO / package, root / "src" / package, SKIPPED_FILES)
    for site in dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]):
        link_tree(Path(site), root / "site", SKIPPED_FILES)
    return NobodyRuntime(python, os.pathsep.join([str(root / "src"), str(root / "site")]), str(root))


def require_nobody_runtime() -> NobodyRuntime:
    """nobody_runtime(), or the test skips saying why and how to run it;
    under CI (CI=true) that is a failure, since there the tests must run."""
    import pytest

    runtime = nobody_runtime()
    if isinstance(runtime, str):
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {runtime}")
        pytest.skip(runtime)
    return runtime


def run_as_nobody(
    args: Sequence[str | os.PathLike[str]], env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`python ARGS` as the unprivileged user, with docsum importable from the
    runtime's copy, stdin not a terminal and `env` (PYTHONPATH replaced)."""
    runtime = require_nobody_runtime()
    return subprocess.run(
        as_nobody([runtime.python, *(str(a) for a in args)]),
        cwd=runtime.cwd,
        env={**env, "PYTHONPATH": runtime.pythonpath, "PYTHONDONTWRITEBYTECODE": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@functools.cache
def _sample_maker() -> Any:
    """sample_data/make_samples.py as a module (a script, not a package)."""
    spec = importlib.util.spec_from_file_location("make_samples", REPO / "sample_data" / "make_samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assemble_pdf(objects: dict[int, bytes], trailer_extra: str = "") -> bytes:
    """A PDF file of numbered `objects` (1 is the catalog) with a correct xref
    table: the writer of the sample PDFs, which the tests' hand-made PDFs share."""
    return bytes(_sample_maker().assemble_pdf(objects, trailer_extra))


def run_cli_as_nobody(home: Path, *args: str | os.PathLike[str]) -> CliResult:
    """`docsum ARGS` as the unprivileged user, with HOME and DOCSUM_HOME at
    `home` (a folder that user can write) and stdin not a terminal."""
    proc = run_as_nobody(["-m", "cli.main", *args], subprocess_env(HOME=str(home), DOCSUM_HOME=str(home)))
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def run_python_as_nobody(script: str, *args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    """`python -c SCRIPT ARGS` as the unprivileged user, with docsum importable."""
    return run_as_nobody(["-c", script, *args], subprocess_env(), timeout=60)


def write_file(path: Path, data: bytes | str) -> Path:
    """Write ``data`` (text as UTF-8) to ``path``, creating its folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


def built_store(tmp_path: Path, docs: dict[str, str], *build_args: str) -> Path:
    """Write `docs` (file name → text) into a folder, build it offline into
    a store under `tmp_path` and return the store's path: the start of most
    tests that ask something."""
    folder = tmp_path / "docs"
    for name, text in docs.items():
        write_file(folder / name, text)
    store = tmp_path / "store.sqlite"
    result = run_cli("build", folder, "--store", store, "-q", *build_args)
    assert result.code == 0, result.stderr
    return store


def only_the_error_document(result: CliResult) -> None:
    """A --json command that failed printed one document on stdout: the
    error, with the exit code and the message also on stderr."""
    data = result.json()
    assert list(data) == ["error"], data
    error = data["error"]
    assert error["exit_code"] == result.code and error["type"], error
    assert error["message"] and error["message"] in result.stderr, (error, result.stderr)


def run_cli(*args: str | os.PathLike[str], input: str | None = None) -> CliResult:
    """`docsum ARGS` in this process. The environment is this process's (the
    autouse `docsum_home` fixture already isolated it; use monkeypatch for more)."""
    from typer.testing import CliRunner

    from cli.main import app

    result = CliRunner().invoke(app, [str(a) for a in args], input=input, catch_exceptions=False)
    return CliResult(result.exit_code, result.stdout, result.stderr)


def run_cli_parts(*args: str | os.PathLike[str]) -> tuple[int, str, str]:
    """`run_cli` as (exit code, stdout, stderr)."""
    result = run_cli(*args)
    return result.code, result.stdout, result.stderr


def cli_command(*args: str | os.PathLike[str]) -> list[str]:
    return [sys.executable, "-m", "cli.main", *(str(a) for a in args)]


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("DOCSUM_FORCE_TTY", None)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def run_cli_subprocess(
    *args: str | os.PathLike[str], timeout: float = 60, env: dict[str, str] | None = None
) -> CliResult:
    """`docsum ARGS` as a child process with stdin not a terminal."""
    proc = subprocess.run(
        cli_command(*args),
        cwd=REPO,
        env=env or subprocess_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def spawn_cli(*args: str | os.PathLike[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start `docsum ARGS` in the background (stdout/stderr piped)."""
    return subprocess.Popen(
        cli_command(*args),
        cwd=REPO,
        env=env or subprocess_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def llm_args(fake: Any, model: str = "fake-chat") -> list[str]:
    """Options pointing docsum at a FakeOpenAI server."""
    return ["--base-url", fake.base_url, "--model", model]


# --------------------------------------------------------------------------- documents


def marker(i: int) -> str:
    return f"DOCMARK{i:03d}"


def make_docs(folder: Path, count: int, words: int = 120, start: int = 0) -> list[Path]:
    """`count` small text files, each carrying a unique marker word so a test
    can tell which document a prompt was about."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    topics = ["bees", "bridges", "ferries", "orchards", "libraries", "storms", "mills", "canals"]
    for i in range(start, start + count):
        topic = topics[i % len(topics)]
        body = " ".join(f"The {topic} report number {i} says item {j} is fine." for j in range(words // 10))
        path = folder / f"doc{i:03d}.txt"
        path.write_text(f"{marker(i)} Notes on {topic}.\n\n{body}\n", encoding="utf-8")
        paths.append(path)
    return paths


# --------------------------------------------------------------------------- the store


def store_count(store: Path, table: str = "documents") -> int:
    """Rows in `table`, read without disturbing a running build (0 if not there yet)."""
    if not store.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
        try:
            return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return 0  # created but not migrated yet


def stored_paths(store: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
    try:
        return {r[0] for r in conn.execute("SELECT path FROM documents")}
    finally:
        conn.close()


def wait_for(predicate: Any, timeout: float = 30.0, interval: float = 0.02, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# --------------------------------------------------------------------------- the fake server


def requests_per_marker(requests: Iterable[Any], markers: Sequence[str]) -> dict[str, int]:
    counts = {m: 0 for m in markers}
    for req in requests:
        prompt = req.prompt
        for m in markers:
            if m in prompt:
                counts[m] += 1
    return counts


def user_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in body.get("messages", []) if m.get("role") == "user")


def kind_of(body: dict[str, Any]) -> str:
    p = user_text(body)
    if "numbered list of documents" in p:
        return "choice"
    if "numbered list of passages" in p:
        return "rerank"
    if "Relevant sentences:" in p:
        return "compress"
    if "Draft answer:" in p:
        return "polish"
    if "Current answer:" in p:
        return "refine"
    return "answer"


def first_choice_then(answer: str):  # type: ignore[no-untyped-def]
    """A FakeOpenAI responder: LLM choice picks document 1, every other
    prompt gets `answer`."""

    def respond(body: dict[str, Any]) -> str:
        if kind_of(body) == "choice":
            return json.dumps({"choices": [{"doc": 1, "relevance": 8}]})
        return answer

    return respond


def processes_with(mark: str) -> list[int]:
    """Processes whose environment holds `mark` (a build and its workers, marked by a test)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if mark.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def stored_so_far(store: Path) -> set[str]:
    """The paths a store holds while a build writes it (none before it exists)."""
    try:
        return stored_paths(store)
    except sqlite3.Error:  # not created yet
        return set()


def absolute_module(module: str | None, level: int, importer: str, is_package: bool) -> str:
    """The module an ImportFrom names, relative imports resolved."""
    if not level:
        return module or ""
    base = importer.split(".")
    if not is_package:
        base.pop()
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))
