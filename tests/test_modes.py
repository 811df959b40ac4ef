"""`--mode` is resolved once, when the answer options are made (issue 14
item 3): a wrong name is exit 2 before any retrieval or call, for `ask` and
for `eval --answers`, and an answer option the chosen synthesizer would not
use is refused rather than ignored. (A custom synthesizer's side of this is
in test_custom_synth.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakeopenai import FakeOpenAI
from helpers import llm_args, make_docs, run_cli

from docsum.errors import ConfigError
from docsum.query.ask import AskOptions
from docsum.schema import ResponseMode
from docsum.synthesizers import BUILTIN_MODES, resolve_mode


def test_a_wrong_mode_is_exit_2_before_any_retrieval_or_call(tmp_path: Path) -> None:
    make_docs(tmp_path / "docs", 3)
    store = tmp_path / "s.sqlite"
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        json.dumps({"id": "1", "question": "What about bees?", "answer": "x", "gold_docs": ["doc000.txt"]}) + "\n"
    )
    with FakeOpenAI() as fake:
        assert run_cli("build", tmp_path / "docs", "--store", store, *llm_args(fake)).code == 0
        fake.reset()
        # LLM retrieval would send a chat request per batch before any answer.
        for args in (("eval", questions, "--answers"), ("ask", "What about bees?")):
            done = run_cli(*args, "--mode", "typo", "--retriever", "llm", "--store", store, *llm_args(fake))
            assert done.code == 2, (args, done)
            assert "unknown response mode 'typo'" in done.stderr
            assert fake.requests == [], args
    # Checked before anything is done: the error is the only line on stderr.
    offline = run_cli("eval", questions, "--answers", "--mode", "typo", "--store", store)
    assert offline.code == 2 and offline.stderr.strip().splitlines() == [
        "docsum: error: unknown response mode 'typo'; choose one of compact, refine, tree_summarize, simple_summarize, "
        "accumulate, compact_accumulate, no_text, context_only, a registered docsum.synthesizers name, or module:Class"
    ]


@pytest.mark.parametrize(
    ("mode", "extra", "refused"),
    [
        ("no_text", ["--template", "{qa}"], "--template does not apply to the no_text mode"),
        ("context_only", ["--emotion", "EP01"], "--emotion does not apply to the context_only mode"),
        (
            "tree_summarize",
            ["--refine-template", "{refine}"],
            "--refine-template does not apply to the tree_summarize mode",
        ),
        ("accumulate", ["--filter"], "--filter (structured answer filtering) does not apply to the accumulate mode"),
    ],
)
def test_an_answer_option_the_mode_does_not_use_is_refused(
    tmp_path: Path, mode: str, extra: list[str], refused: str
) -> None:
    (tmp_path / "qa.txt").write_text("{context_str} {query_str}")
    (tmp_path / "refine.txt").write_text("{context_msg} {existing_answer} {query_str}")
    args = [
        a.replace("{qa}", str(tmp_path / "qa.txt")).replace("{refine}", str(tmp_path / "refine.txt")) for a in extra
    ]
    done = run_cli("ask", "Anything?", "--mode", mode, *args, "--store", tmp_path / "none.sqlite")
    assert done.code == 2, done
    assert refused in done.stderr
    # The modes that use it take it (this store does not exist: exit 5 after the options were accepted).
    assert run_cli("ask", "Anything?", "--mode", "refine", *args, "--store", tmp_path / "none.sqlite").code == 5


def test_the_library_resolves_the_mode_when_the_options_are_made() -> None:
    with pytest.raises(ConfigError, match="unknown response mode 'typo'"):
        AskOptions(mode="typo")
    assert AskOptions(mode="tree_summarize").label == "tree_summarize"
    # Each built-in class knows its own label, the one its mode is named by.
    assert [cls.label for cls in BUILTIN_MODES.values()] == list(BUILTIN_MODES)
    assert set(BUILTIN_MODES) == {m.value for m in ResponseMode}
    assert resolve_mode(ResponseMode.REFINE).synthesizer is BUILTIN_MODES["refine"]
