"""PromptTemplate and the default prompts: variables, partial formatting,
chat messages, errors naming the missing variable, no re-interpretation of
document text, EmotionPrompt stimuli."""

from __future__ import annotations

from pathlib import Path

import pytest

from docsum.errors import ConfigError, ExitCode, TemplateVariableError
from docsum.models.prompts import (
    CHOICE_SELECT_PROMPT,
    DEFAULT_SUMMARY_QUERY,
    KIND_REFINE,
    KIND_TEXT_QA,
    REFINE_PROMPT,
    RULE,
    TEXT_QA_PROMPT,
    TREE_SUMMARIZE_PROMPT,
    PromptTemplate,
    load_template_file,
    structured,
    with_emotion,
)
from docsum.stimuli import EMOTION_STIMULI


def test_template_vars_in_order_without_duplicates_including_system() -> None:
    t = PromptTemplate("{context_str} then {query_str} and {context_str} again {tone}", system="Be {persona}. {tone}")
    assert t.template_vars == ["context_str", "query_str", "tone", "persona"]
    assert t.free_vars == t.template_vars


def test_literal_braces_are_not_variables() -> None:
    t = PromptTemplate('Reply {{"a": 1}} for {query_str}')
    assert t.template_vars == ["query_str"]
    assert t.format(query_str="q") == 'Reply {"a": 1} for q'


def test_positional_field_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="positional"):
        _ = PromptTemplate("bad {} field").template_vars


def test_partial_format_returns_new_template_and_ignores_unused_values() -> None:
    t = PromptTemplate("Q: {query_str}\nC: {context_str}", name="mine")
    p = t.partial_format(query_str="why?", unused="ignored")
    assert p is not t
    assert t.fixed == {}  # the original is untouched
    assert p.fixed == {"query_str": "why?"}
    assert p.free_vars == ["context_str"]
    assert p.template_vars == ["query_str", "context_str"]
    assert p.name == "mine" and p.kind == t.kind
    assert p.format(context_str="ctx") == "Q: why?\nC: ctx"
    # a later value overrides a fixed one
    assert p.format(context_str="ctx", query_str="how?") == "Q: how?\nC: ctx"
    # chained partials accumulate
    assert p.partial_format(context_str="c2").format() == "Q: why?\nC: c2"


def test_format_values_are_stringified_and_extra_values_ignored() -> None:
    t = PromptTemplate("n={n}")
    assert t.format(n=3, other="x") == "n=3"


def test_format_with_system_is_system_blank_line_user() -> None:
    t = PromptTemplate("User {a}", system="System {a}")
    assert t.format(a="1") == "System 1\n\nUser 1"


def test_format_messages_system_and_user() -> None:
    msgs = TEXT_QA_PROMPT.format_messages(context_str="Bees make honey.", query_str="What do bees make?")
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[0]["content"] == TEXT_QA_PROMPT.system
    user = msgs[1]["content"]
    assert f"{RULE}\nBees make honey.\n{RULE}" in user
    assert "Question: What do bees make?" in user
    assert user.endswith("Answer: ")


def test_format_messages_without_system_is_one_user_message() -> None:
    msgs = PromptTemplate("just {x}").format_messages(x="this")
    assert msgs == [{"role": "user", "content": "just this"}]


def test_missing_variable_raises_naming_it() -> None:
    t = PromptTemplate("{context_str} {tone_name} {query_str}", name="summary")
    with pytest.raises(TemplateVariableError) as info:
        t.format(context_str="c", query_str="q")
    assert info.value.missing == ["tone_name"]
    assert "{tone_name}" in str(info.value)
    assert "summary" in str(info.value)
    assert info.value.exit_code == ExitCode.USAGE
    with pytest.raises(TemplateVariableError, match="tone_name"):
        t.format_messages(context_str="c", query_str="q")


def test_missing_variable_in_system_message_is_reported() -> None:
    t = PromptTemplate("{query_str}", system="You are {persona}")
    with pytest.raises(TemplateVariableError) as info:
        t.format_messages(query_str="q")
    assert info.value.missing == ["persona"]


def test_check_reports_before_formatting() -> None:
    t = PromptTemplate("{context_str} {query_str} {tone}").partial_format(tone="calm")
    t.check({"context_str", "query_str"})  # tone is fixed: fine
    with pytest.raises(TemplateVariableError) as info:
        PromptTemplate("{context_str} {query_str} {tone}").check({"context_str", "query_str"})
    assert info.value.missing == ["tone"]


def test_document_text_with_braces_is_not_reinterpreted() -> None:
    nasty = "Ignore this {query_str} and {existing_answer} and {0} and {{x}} and {"
    out = TEXT_QA_PROMPT.format(context_str=nasty, query_str="REAL QUESTION")
    assert nasty in out
    assert out.count("REAL QUESTION") == 1
    # A partially fixed value is not re-parsed either.
    p = REFINE_PROMPT.partial_format(query_str="Q", existing_answer="answer with {context_msg}")
    msgs = p.format_messages(context_msg="NEW")
    assert "answer with {context_msg}" in msgs[-1]["content"]
    assert msgs[-1]["content"].count("NEW") == 1


def test_default_templates_variables_and_kinds() -> None:
    assert set(TEXT_QA_PROMPT.template_vars) == {"context_str", "query_str"}
    assert set(REFINE_PROMPT.template_vars) == {"query_str", "existing_answer", "context_msg"}
    assert set(TREE_SUMMARIZE_PROMPT.template_vars) == {"context_str", "query_str"}
    assert set(CHOICE_SELECT_PROMPT.template_vars) == {"context_str", "query_str"}
    assert TEXT_QA_PROMPT.kind == KIND_TEXT_QA and REFINE_PROMPT.kind == KIND_REFINE
    # the choice-select prompt's literal JSON example survives formatting
    assert '{"choices": [{"doc": 3, "relevance": 8}]}' in CHOICE_SELECT_PROMPT.format(context_str="c", query_str="q")


def test_default_summary_query_is_exact() -> None:
    assert DEFAULT_SUMMARY_QUERY == (
        "Describe what the provided text is about. Also describe some of the questions that this text can answer. "
    )


def test_emotion_stimuli_ep01_to_ep11() -> None:
    assert sorted(EMOTION_STIMULI) == [f"EP{i:02d}" for i in range(1, 12)]
    assert EMOTION_STIMULI["EP02"] == "This is very important to my career."
    assert all(s.strip() == s and s for s in EMOTION_STIMULI.values())


@pytest.mark.parametrize("stimulus", sorted(EMOTION_STIMULI))
def test_with_emotion_inserts_stimulus_before_question(stimulus: str) -> None:
    t = with_emotion(TEXT_QA_PROMPT, stimulus.lower())
    user = t.format_messages(context_str="C", query_str="Q")[-1]["content"]
    text = EMOTION_STIMULI[stimulus]
    assert text + "\nQuestion: Q" in user
    assert user.index(text) < user.index("Question:")
    assert user.index("C") < user.index(text)  # after the instructions and documents
    assert t.kind == TEXT_QA_PROMPT.kind and t.system == TEXT_QA_PROMPT.system
    assert t.template_vars == TEXT_QA_PROMPT.template_vars


def test_with_emotion_none_unknown_and_no_question_line() -> None:
    assert with_emotion(TEXT_QA_PROMPT, None) is TEXT_QA_PROMPT
    assert with_emotion(TEXT_QA_PROMPT, "none") is TEXT_QA_PROMPT
    with pytest.raises(ConfigError, match="EP12"):
        with_emotion(TEXT_QA_PROMPT, "EP12")
    bare = with_emotion(PromptTemplate("Context: {context_str}"), "EP03")
    assert bare.format(context_str="x") == "Context: x\nYou'd better be sure."


def test_with_emotion_keeps_fixed_values() -> None:
    t = with_emotion(TEXT_QA_PROMPT.partial_format(query_str="fixed q"), "EP04")
    assert t.fixed == {"query_str": "fixed q"}
    assert "Are you sure?\nQuestion: fixed q" in t.format(context_str="c")


def test_structured_asks_for_json_and_keeps_everything_else() -> None:
    s = structured(TEXT_QA_PROMPT.partial_format(query_str="q"))
    assert s.kind == TEXT_QA_PROMPT.kind and s.fixed == {"query_str": "q"}
    out = s.format(context_str="c")
    assert '{"answer": "<the answer>", "query_satisfied": true}' in out


def test_load_template_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    good = tmp_path / "qa.txt"
    good.write_text("Use {context_str} to answer {query_str} in {{braces}}", encoding="utf-8")
    t = load_template_file(good, KIND_TEXT_QA, "qa")
    assert t.kind == KIND_TEXT_QA and t.template_vars == ["context_str", "query_str"]
    bad = tmp_path / "bad.txt"
    bad.write_text("unbalanced { brace {context_str}", encoding="utf-8")
    with pytest.raises(ConfigError, match="bad.txt"):
        load_template_file(bad, KIND_TEXT_QA, "bad")
    with pytest.raises(ConfigError, match="cannot read"):
        load_template_file(tmp_path / "missing.txt", KIND_TEXT_QA, "m")


def test_a_template_file_from_a_windows_editor_is_read_and_one_in_latin_1_is_named(tmp_path: Path) -> None:
    """A byte-order mark went into every prompt, and a Latin-1 file was an
    error that did not name the file."""
    marked = tmp_path / "marked.txt"
    marked.write_bytes(b"\xef\xbb\xbfUse {context_str} to answer {query_str}")
    assert load_template_file(marked, KIND_TEXT_QA, "m").template.startswith("Use ")
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"R\xe9ponds \xe0 {query_str} avec {context_str}")
    with pytest.raises(ConfigError, match=r"latin\.txt: cannot read template \(not UTF-8 text: byte 2\)"):
        load_template_file(latin, KIND_TEXT_QA, "l")
