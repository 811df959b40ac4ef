"""Fast start: a command imports only what it uses (numpy when vectors are
touched, openai when a request is made, rich on a terminal, the evaluation
code for eval), and the tokenizer table is decoded once, not per process."""

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

HEAVY = ("numpy", "openai", "rich", "docsum.query.evaluate", "tiktoken")

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


def loaded(*args: str | Path, home: Path) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *map(str, args)], cwd=REPO, capture_output=True, text=True,
        env=subprocess_env(DOCSUM_HOME=str(home)), timeout=120, stdin=subprocess.DEVNULL,
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
    assert loaded("--help", home=tmp_path) == []
    assert loaded("summaries", "--store", sample_store, home=tmp_path) == []
    # show reads the document's whole row, its stored vector included.
    assert loaded("show", "library_renovation_fact_sheet.pdf", "--store", sample_store, home=tmp_path) in ([], ["numpy"])
    # config show names the embedder; naming it loads no numpy.
    assert loaded("config", "show", home=tmp_path) == []
    # An offline question touches vectors and counts tokens; it sends no request.
    assert loaded("ask", question, "--store", sample_store, "--llm", "extractive", home=tmp_path) == ["numpy", "tiktoken"]
    with FakeOpenAI() as fake:
        # No store: nothing to ask the server, so no client.
        assert "openai" not in loaded("ask", question, "--store", tmp_path / "none.sqlite", *llm_args(fake), home=tmp_path)
        assert "openai" in loaded("ask", question, "--store", sample_store, *llm_args(fake), "--embed-model",
                                  "docsum-lexical-v1", home=tmp_path)


def test_the_tokenizer_table_is_decoded_once_and_a_damaged_copy_is_not_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
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
