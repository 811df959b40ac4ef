"""Fast start: a command imports only what it uses (numpy when vectors are
touched, openai when a request is made, rich on a terminal, the evaluation
code for eval, asyncio when a coroutine runs, the tokenizer when a token is
counted, the folder scanner for a
build, pydantic never for docsum's own options), and the tokenizer table is
decoded once, not per process."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fakeopenai import FakeOpenAI
from helpers import REPO, SAMPLE_DOCS, llm_args, run_cli, subprocess_env

from docsum.models import tokens

HEAVY = (
    "numpy",
    "openai",
    "rich",
    "docsum.query.evaluate",
    "tiktoken",
    "pydantic",
    "asyncio",
    "docsum.ingest.discover",
    "regex",
)

# Runs one command in a fresh interpreter and reports which heavy modules it loaded.
PROBE = """
import json, sys
from cli.main import app
try:
    app(sys.argv[1:], standalone_mode=True)
except SystemExit:
    pass
print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)), file=sys.stderr)
"""


def loaded(*args: str | Path, home: Path, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=heavy), *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=subprocess_env(DOCSUM_HOME=str(home)),
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    return json.loads(proc.stderr.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("start")
    store = folder / "s.sqlite"
    shutil.copytree(SAMPLE_DOCS, folder / "docs")
    assert run_cli("build", folder / "docs", "--store", store, "--llm", "extractive").code == 0
    return store


def test_commands_import_only_what_they_use(sample_store: Path, tmp_path: Path) -> None:
    question = "When did the library reopen after the renovation?"
    # typer would coerce every option (--help too) through a pydantic TypeAdapter.
    assert loaded("--help", home=tmp_path) == []
    # --help reads no setting: neither the settings' loader (TOML reader, platform folders) nor SQLite.
    assert (
        loaded("--help", home=tmp_path, heavy=("docsum.config", "tomllib", "platformdirs", "sqlite3", "docsum.schema"))
        == []
    )
    assert loaded("ask", "--help", home=tmp_path) == []
    assert loaded("summaries", "--store", sample_store, home=tmp_path) == []
    # show prints no vector, so it reads none (decoding one loaded numpy).
    assert loaded("show", "library_renovation_fact_sheet.pdf", "--store", sample_store, home=tmp_path) == []
    # config show names the embedder; naming it loads no numpy.
    assert loaded("config", "show", home=tmp_path) == []
    # An offline question runs a coroutine, touches vectors and counts tokens; it sends no request.
    assert loaded("ask", question, "--store", sample_store, "--llm", "extractive", home=tmp_path) == [
        "asyncio",
        "numpy",
        "tiktoken",
    ]
    with FakeOpenAI() as fake:
        # No store: nothing to ask the server, so no client.
        assert "openai" not in loaded(
            "ask", question, "--store", tmp_path / "none.sqlite", *llm_args(fake), home=tmp_path
        )
        assert "openai" in loaded(
            "ask",
            question,
            "--store",
            sample_store,
            *llm_args(fake),
            "--embed-model",
            "docsum-lexical-v1",
            home=tmp_path,
        )


def test_the_tokenizer_table_is_decoded_once_and_a_damaged_copy_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCSUM_HOME", str(tmp_path))
    spec = tokens._SPECS["cl100k_base"]
    cache = tokens._cache_file(spec)
    assert not cache.exists()
    ranks = tokens._read_ranks(spec)
    assert cache.exists() and oct(cache.stat().st_mode & 0o777) == "0o600"
    assert tokens._read_ranks(spec) == ranks
    damaged = bytearray(cache.read_bytes())
    damaged[100] ^= 0xFF
    cache.write_bytes(bytes(damaged))
    assert tokens._cached_ranks(spec) is None  # the checksum catches it
    assert tokens._read_ranks(spec) == ranks and tokens._cached_ranks(spec) == ranks  # decoded again and rewritten


def test_the_engines_load_their_heavy_parts_when_first_used() -> None:
    """The engine interface and the server engine's module import neither
    numpy nor openai (nor the tokenizer); making an engine loads no tokenizer
    table; the first count builds it, and still imports no openai."""
    probe = (
        "import sys\n"
        "from docsum.models.openaillm import OpenAILLM\n"
        "llm = OpenAILLM(model='gpt-4o-mini', base_url='http://127.0.0.1:9', api_key=None)\n"
        "before = sorted(m for m in ('openai', 'numpy', 'tiktoken', 'pydantic', 'httpx2') if m in sys.modules)\n"
        "n = llm.metadata.tokenizer.count('hello world')\n"
        "print(before, n, 'tiktoken' in sys.modules, 'openai' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[] 2 True False"


LAZY_PROBE = """
import json, sys
from cli.main import app
from docsum.lazyre import LazyPattern
try:
    app(sys.argv[1:], standalone_mode=True)
except SystemExit:
    pass
lazy = {f"{name}.{attr}": value.compiled_yet for name, module in list(sys.modules.items()) if name.startswith("docsum")
        for attr, value in vars(module).items() if isinstance(value, LazyPattern)}
print(json.dumps(lazy), file=sys.stderr)
"""


def test_an_english_question_compiles_no_pattern_it_does_not_use(sample_store: Path, tmp_path: Path) -> None:
    """The LLM's rating parsers, a summary's filing and caption rules and the
    CJK class (3 ms to compile) wait until a command needs them."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            LAZY_PROBE,
            "ask",
            "When did the library reopen after the renovation?",
            "--store",
            str(sample_store),
            "--llm",
            "extractive",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=subprocess_env(DOCSUM_HOME=str(tmp_path)),
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    lazy = json.loads(proc.stderr.strip().splitlines()[-1])
    for name in (
        "docsum.query.rating._NEGATION",
        "docsum.query.rating._FENCE",
        "docsum.lexical.CJK_CHARACTER",
        "docsum.lexical._REGISTRANT",
        "docsum.models.prose._CAPTION",
        "docsum.synthesizers.refine._META",
    ):
        assert lazy[name] is False, name
