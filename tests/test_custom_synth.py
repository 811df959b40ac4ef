"""A custom BaseSynthesizer plugs into `docsum ask` the way built-in modes do:
by import path (`--mode module:Class`) or by a registered entry point name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

PLUGIN = textwrap.dedent(
    '''
    from docsum import BaseSynthesizer
    from docsum.models.prompts import TEXT_QA_PROMPT


    class Shouty(BaseSynthesizer):
        """Answers with the LLM, then shouts, and says how many passages it read."""

        async def aget_response(self, query_str, text_chunks, **kw):
            answer = await self.llm.apredict(TEXT_QA_PROMPT, query_str=query_str, context_str="\\n\\n".join(text_chunks))
            return f"{len(text_chunks)} PASSAGES: " + answer.upper()
    '''
)


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)


@pytest.fixture()
def plugin_env(tmp_path: Path, docsum_home: Path) -> dict[str, str]:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "shouty_plugin.py").write_text(PLUGIN, encoding="utf-8")
    # A minimal installed distribution on sys.path registers the entry point,
    # exactly as `pip install` of a plugin package would.
    dist = plugins / "shouty_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: shouty-plugin\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[docsum.synthesizers]\nshouty = shouty_plugin:Shouty\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DOCSUM_"))}
    env["DOCSUM_HOME"] = str(docsum_home)
    env["PYTHONPATH"] = os.pathsep.join([str(plugins), str(REPO)])
    built = run(["build", str(REPO / "sample_data" / "docs"), "-q"], env)
    assert built.returncode == 0, built.stderr
    return env


@pytest.mark.parametrize("spec", ["shouty_plugin:Shouty", "shouty"])
def test_custom_synthesizer_answers_through_the_cli(plugin_env: dict[str, str], spec: str) -> None:
    done = run(["ask", "Who designed the library renovation?", "--mode", spec, "--json"], plugin_env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["mode"] == spec
    assert result["answer"].startswith(f"{len(result['sources'])} PASSAGES: ")
    assert result["answer"] == result["answer"].upper()
    assert result["usage"]["llm_calls"] == 1


def test_unknown_mode_is_a_usage_error(plugin_env: dict[str, str]) -> None:
    done = run(["ask", "Anything?", "--mode", "no_such_mode"], plugin_env)
    assert done.returncode == 2
    assert "unknown response mode 'no_such_mode'" in done.stderr


def test_a_class_that_is_not_a_synthesizer_is_refused(plugin_env: dict[str, str]) -> None:
    done = run(["ask", "Anything?", "--mode", "json:JSONDecoder"], plugin_env)
    assert done.returncode == 2
    assert "not a BaseSynthesizer subclass" in done.stderr
