"""A custom BaseSynthesizer plugs into `docsum ask` the way built-in modes do:
by import path (`--mode module:Class`) or by a registered entry point name."""

from __future__ import annotations

import json
import os
import shutil
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


    class Templated(BaseSynthesizer):
        """Takes a QA template (so --template and --emotion reach it) and
        shows what it was given; makes no call, and plans none."""

        label = "templated"

        def __init__(self, llm, *, text_qa_template=None, streaming=False):
            super().__init__(llm, streaming=streaming)
            self.text_qa_template = text_qa_template

        def plan(self, query_str, text_chunks, **kw):
            return 0

        async def aget_response(self, query_str, text_chunks, **kw):
            return "TEMPLATE: " + (self.text_qa_template.template if self.text_qa_template else "none")
    '''
)


# Every test here runs the CLI in a subprocess.
pytestmark = pytest.mark.process


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=120
    )


def plain_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DOCSUM_"))}
    env["DOCSUM_HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO)
    return env


@pytest.fixture(scope="module")
def built_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DOCSUM_HOME whose default store holds sample_data/docs, built once
    for the module by the real CLI (no plugin is involved in a build)."""
    home = tmp_path_factory.mktemp("custom-synth-home")
    built = run(["build", str(REPO / "sample_data" / "docs"), "-q"], plain_env(home))
    assert built.returncode == 0, built.stderr
    return home


@pytest.fixture()
def plugin_env(tmp_path: Path, docsum_home: Path, built_home: Path) -> dict[str, str]:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "shouty_plugin.py").write_text(PLUGIN, encoding="utf-8")
    # A minimal installed distribution on sys.path registers the entry point,
    # exactly as `pip install` of a plugin package would.
    dist = plugins / "shouty_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: shouty-plugin\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[docsum.synthesizers]\nshouty = shouty_plugin:Shouty\n", encoding="utf-8")
    # Each test gets its own copy of the built home: an ask may write next to the store.
    shutil.copytree(built_home, docsum_home, dirs_exist_ok=True)
    env = plain_env(docsum_home)
    env["PYTHONPATH"] = os.pathsep.join([str(plugins), str(REPO)])
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


def test_answer_options_reach_a_custom_synthesizer_or_are_refused(plugin_env: dict[str, str], tmp_path: Path) -> None:
    """--template, --emotion, --refine-template and --filter go to a custom
    synthesizer whose constructor takes them, and are refused (exit 2, before
    anything is read) by one that does not: never ignored in silence."""
    template = tmp_path / "qa.txt"
    template.write_text("MY TEMPLATE {context_str} {query_str}", encoding="utf-8")
    spec = "shouty_plugin:Templated"
    plain = run(["ask", "Who designed it?", "--mode", spec, "--json"], plugin_env)
    assert plain.returncode == 0, plain.stderr
    assert json.loads(plain.stdout)["answer"] == "TEMPLATE: none"  # nothing given: its own default
    given = run(["ask", "Who designed it?", "--mode", spec, "--template", str(template), "--json"], plugin_env)
    assert json.loads(given.stdout)["answer"] == "TEMPLATE: MY TEMPLATE {context_str} {query_str}"
    moved = run(["ask", "Who designed it?", "--mode", spec, "--emotion", "EP02", "--explain"], plugin_env)
    assert moved.returncode == 0, moved.stderr
    assert "TEMPLATE: " in moved.stdout and "This is very important to my career." in moved.stdout
    assert "ignores --emotion" not in moved.stderr  # it reached the synthesizer: not ignored
    # The class's plan is what --explain reports.
    assert f"0 LLM call(s) in {spec} mode" in moved.stderr
    refused = run(["ask", "Who designed it?", "--mode", spec, "--filter"], plugin_env)
    assert refused.returncode == 2, refused
    assert (
        f"docsum: error: --filter (structured answer filtering) does not apply to the synthesizer {spec}"
        in refused.stderr
    )
    refused = run(["ask", "Who designed it?", "--mode", "shouty", "--emotion", "EP01"], plugin_env)
    assert refused.returncode == 2, refused
    assert (
        "--emotion does not apply to the synthesizer shouty (its constructor takes no text_qa_template"
        in refused.stderr
    )
