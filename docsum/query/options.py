"""The options of a question, checked before anything is read or sent.

`AskOptions` takes its defaults from docsum.settings and resolves `mode` into
a synthesizer class when it is made (a wrong name, or an answer option the
synthesizer would not take, is exit 2 at once). `check_options` makes the
synthesizer and checks the ranges and templates a Python caller could get
wrong; `ignored_options` names what would have no effect, so the command line
can say so instead of ignoring it in silence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from docsum.errors import ConfigError
from docsum.models.llm import LLM
from docsum.models.prompts import (
    POLISH_PROMPT,
    TEXT_QA_PROMPT,
    TREE_SUMMARIZE_PROMPT,
    PromptTemplate,
    emotion_key,
    with_emotion,
)
from docsum.settings import DEFAULT_LIMITS, RETRIEVERS, Limits, check, default
from docsum.synthesizers import AnswerOptions, BaseSynthesizer, LLMSynthesizer, Mode, resolve_mode

# Names the synthesizers fill in themselves; a --var cannot set them.
RESERVED_VARIABLES = frozenset({"query_str", "context_str", "context_msg", "existing_answer"})


@dataclass
class AskOptions:
    # Defaults are the settings' (docsum.settings), so Python and the command line agree.
    # A mode name (or module:Class, or an entry point name), or a Mode already
    # resolved (docsum.config.ask_options resolves the command line's).
    mode: str | Mode = default("mode")
    retriever: str = RETRIEVERS[0]  # the command line picks one for the engine: see docsum.config.ask_options
    top_k: int = default("top_k")
    choice_batch_size: int = default("choice_batch_size")
    candidates: int = default("candidates")
    # The relevance floor; None means the retriever's calibrated default
    # (docsum.models.abstain.relevance_floor).
    min_score: float | None = default("min_score")
    cutoff: float | None = None
    rerank: int | None = None
    compress: bool = False
    reorder: bool = False
    structured_filter: bool = False
    polish: bool = False
    emotion: str | None = None
    text_qa_template: PromptTemplate | None = None
    refine_template: PromptTemplate | None = None
    variables: dict[str, str] = field(default_factory=dict)
    stream: bool = False
    synthesizer: BaseSynthesizer | None = None  # a custom one, ready made, replaces `mode`
    max_calls: int | None = None  # refuse (exit 2) a question that plans more LLM calls
    limits: Limits = DEFAULT_LIMITS  # `questions` bounds ask_many
    # Documents retrieval never sees (docsum eval --unanswerable hides the
    # gold documents this way to ask a question the store cannot answer).
    hidden_doc_ids: frozenset[str] = frozenset()
    # `mode` resolved, once, when the options are made: a wrong name or an
    # answer option the synthesizer would not use is exit 2 before anything
    # is read or sent.
    resolved_mode: Mode = field(init=False, repr=False)

    def __post_init__(self) -> None:
        given = {
            "template": self.text_qa_template is not None,
            "refine_template": self.refine_template is not None,
            "structured_filter": self.structured_filter,
            "emotion": emotion_key(self.emotion) is not None,
        }
        if self.synthesizer is None:
            self.resolved_mode = self.mode if isinstance(self.mode, Mode) else resolve_mode(self.mode)
            self.resolved_mode.refuse_untaken(**given)
            return
        # A synthesizer made by the caller was given its templates then.
        passed = [name for name, value in given.items() if value]
        if passed:
            raise ConfigError(
                f"{', '.join(passed)}: a ready-made synthesizer takes its templates and filtering "
                "from its own constructor, not from the ask options"
            )
        self.resolved_mode = Mode(self.synthesizer.label, type(self.synthesizer))

    @property
    def label(self) -> str:
        """What answers report the synthesizer by (`AskResult.mode`)."""
        return self.resolved_mode.label


def _templates(options: AskOptions) -> tuple[PromptTemplate | None, PromptTemplate | None, PromptTemplate | None]:
    """The QA, refine and summary templates the user's options make (None:
    the synthesizer's own). A user's --template is the QA template and, in a
    summarizing mode, the summary one; --emotion goes into both."""
    if options.text_qa_template is None and emotion_key(options.emotion) is None:
        return None, options.refine_template, None
    qa = options.text_qa_template or TEXT_QA_PROMPT
    summary = options.text_qa_template.with_kind("summary") if options.text_qa_template else TREE_SUMMARIZE_PROMPT
    return with_emotion(qa, options.emotion), options.refine_template, with_emotion(summary, options.emotion)


def make_synthesizer(
    llm: LLM | None, options: AskOptions, progress: Callable[[str], None] | None = None
) -> BaseSynthesizer:
    if options.synthesizer is not None:
        return options.synthesizer
    qa, refine, summary = _templates(options)
    synth = options.resolved_mode.create(
        llm,
        AnswerOptions(qa, refine, summary, options.structured_filter),
        streaming=options.stream and not options.polish,
        progress=progress,
    )
    # Every mode in which a model writes text sees its passages numbered, for
    # citations; no_text and context_only hand the passages on as they are.
    synth.numbered_passages = isinstance(synth, LLMSynthesizer)
    return synth


def check_options(llm: LLM, options: AskOptions, progress: Callable[[str], None] | None) -> BaseSynthesizer:
    """The synthesizer, once every option a Python caller could get wrong
    (ranges, reserved or missing template variables) is checked: ConfigError
    (exit 2) before anything is spent."""
    # The ranges the command line checks, for options made in Python.
    for name in ("top_k", "choice_batch_size", "candidates", "rerank", "max_calls", "retriever", "cutoff", "min_score"):
        try:
            check(name, getattr(options, name))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    reserved = sorted(RESERVED_VARIABLES & set(options.variables))
    if reserved:
        raise ConfigError(f"--var cannot set {', '.join(reserved)}: docsum fills it in itself")
    synth = make_synthesizer(llm, options, progress)
    # Fail on a template variable without a value before spending anything.
    synth.check_templates(options.variables)
    if options.polish:
        POLISH_PROMPT.check({"query_str", "existing_answer", "context_msg"})
    return synth


def ignored_options(options: AskOptions, extractive: bool) -> tuple[list[str], list[str]]:
    """The options given that will have no effect with this engine and the
    resolved synthesizer: (flags the offline engine ignores, flags the
    synthesizer ignores). The offline engine does each prompt's job on the
    prompt's values, so the wording a template or an emotion stimulus adds to
    a built-in mode's prompts, and the wording of the polish pass, change
    nothing; a custom synthesizer is handed the templates and may use them
    as it likes, so they are not counted as ignored for it. A mode that makes
    no call writes no answer to polish, with any engine."""
    mode = options.resolved_mode
    makes_calls = issubclass(mode.synthesizer, LLMSynthesizer) or not mode.builtin
    by_engine: list[str] = []
    by_mode: list[str] = []
    if options.polish:
        if not makes_calls:
            by_mode.append("--polish")
        elif extractive:
            by_engine.append("--polish")
    if extractive and mode.builtin and options.synthesizer is None:
        # (A built-in mode that takes no template refuses these: see Mode.refuse_untaken.)
        given = (
            ("--template", options.text_qa_template is not None),
            ("--refine-template", options.refine_template is not None),
            ("--emotion", emotion_key(options.emotion) is not None),
        )
        by_engine += [flag for flag, present in given if present]
    return by_engine, by_mode
