"""Which synthesizer a mode names, resolved once.

`resolve_mode` turns what `--mode` (or `AskOptions.mode`) says into a `Mode`:
a built-in mode's name, a name another package registered under the
`docsum.synthesizers` entry point group, or an import path
`package.module:ClassName`. It is called when the answer options are made,
before any retrieval or call, so a wrong name is exit 2 with nothing spent;
`Mode.refuse_untaken` refuses an answer option the synthesizer would not use,
and `Mode.create` constructs it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from docsum.errors import ConfigError
from docsum.models.llm import LLM
from docsum.schema import ResponseMode
from docsum.synthesizers.accumulate import Accumulate, CompactAndAccumulate
from docsum.synthesizers.base import ANSWER_OPTIONS, AnswerOptions, BaseSynthesizer, LLMSynthesizer, ProgressFn
from docsum.synthesizers.compact import CompactAndRefine
from docsum.synthesizers.no_text import ContextOnly, NoText
from docsum.synthesizers.refine import Refine
from docsum.synthesizers.simple_summarize import SimpleSummarize
from docsum.synthesizers.tree_summarize import TreeSummarize

ENTRY_POINT_GROUP = "docsum.synthesizers"

# The built-in modes by name, in the order the README lists them.
BUILTIN_MODES: dict[str, type[BaseSynthesizer]] = {
    cls.label: cls
    for cls in (
        CompactAndRefine,
        Refine,
        TreeSummarize,
        SimpleSummarize,
        Accumulate,
        CompactAndAccumulate,
        NoText,
        ContextOnly,
    )
}
assert set(BUILTIN_MODES) == {m.value for m in ResponseMode}, "ResponseMode and the synthesizer classes disagree"


@dataclass(frozen=True)
class Mode:
    """A resolved `--mode`: the synthesizer class, and the name answers
    report it by (a built-in's mode name, else what the user named)."""

    label: str
    synthesizer: type[BaseSynthesizer]

    @property
    def builtin(self) -> bool:
        return BUILTIN_MODES.get(self.label) is self.synthesizer

    def refuse_untaken(
        self,
        *,
        template: bool = False,
        refine_template: bool = False,
        structured_filter: bool = False,
        emotion: bool = False,
    ) -> None:
        """ConfigError (exit 2) for an answer option given that this
        synthesizer would not use: never ignored in silence."""
        taken = self.synthesizer.options_taken()
        checks = (
            (template, "--template", ("text_qa_template", "summary_template")),
            (emotion, "--emotion", ("text_qa_template", "summary_template")),
            (refine_template, "--refine-template", ("refine_template",)),
            (structured_filter, "--filter (structured answer filtering)", ("structured_answer_filtering",)),
        )
        for given, flag, keywords in checks:
            if given and not taken.intersection(keywords):
                users = [name for name, cls in BUILTIN_MODES.items() if cls.options_taken().intersection(keywords)]
                where = f"the {self.label} mode"
                if not self.builtin:
                    where = f"the synthesizer {self.label} (its constructor takes no {' or '.join(keywords)} parameter)"
                raise ConfigError(f"{flag} does not apply to {where}; it works with {', '.join(users)}")

    def create(
        self,
        llm: LLM | None,
        options: AnswerOptions | None = None,
        *,
        streaming: bool = False,
        verbose: bool = False,
        progress: ProgressFn | None = None,
    ) -> BaseSynthesizer:
        """The synthesizer, given the answer options it takes (others are
        not passed: check them first with `refuse_untaken`)."""
        cls = self.synthesizer
        if llm is None and issubclass(cls, LLMSynthesizer):
            raise ConfigError(f"response mode {self.label} needs an LLM")
        taken = cls.options_taken()
        given = (options or AnswerOptions()).given()
        keywords = {name: value for name, value in given.items() if name in taken}
        # A custom class is built as `MySynth(llm, streaming=...)`; verbose and
        # progress only when its constructor names them (the base's does).
        accepted = cls.constructor_keywords()
        keywords |= {name: value for name, value in (("verbose", verbose), ("progress", progress)) if name in accepted}
        synth = cls(llm, streaming=streaming, **keywords)
        synth.label = self.label
        return synth


def resolve_mode(spec: str | ResponseMode) -> Mode:
    """The synthesizer `spec` names: a built-in mode, a registered entry
    point name, or `module:Class`; ConfigError (exit 2) otherwise."""
    name = spec.value if isinstance(spec, ResponseMode) else str(spec)
    if name in BUILTIN_MODES:
        return Mode(name, BUILTIN_MODES[name])
    return Mode(name, _load_custom(name))


def _load_custom(spec: str) -> type[BaseSynthesizer]:
    # Imported here: importlib.metadata (with the email package) was 0.01-0.02 s
    # of every question's start-up, paid for a plugin few use.
    from importlib.metadata import entry_points

    target: Any = None
    try:
        for point in entry_points(group=ENTRY_POINT_GROUP):
            if point.name == spec:
                target = point.load()
                break
        if target is None and ":" in spec:
            module_name, _, attr = spec.partition(":")
            target = getattr(importlib.import_module(module_name), attr)
    except Exception as exc:  # noqa: BLE001 - a plugin failing to import is the user's configuration error
        raise ConfigError(f"cannot load synthesizer {spec!r}: {type(exc).__name__}: {exc}") from None
    if target is None:
        raise ConfigError(
            f"unknown response mode {spec!r}; choose one of {', '.join(BUILTIN_MODES)}, a registered "
            f"{ENTRY_POINT_GROUP} name, or module:Class"
        )
    if not (isinstance(target, type) and issubclass(target, BaseSynthesizer)):
        raise ConfigError(f"{spec!r} is not a BaseSynthesizer subclass")
    return target


def get_response_synthesizer(
    response_mode: ResponseMode | str = ResponseMode.COMPACT,
    llm: LLM | None = None,
    *,
    streaming: bool = False,
    verbose: bool = False,
    progress: ProgressFn | None = None,
    numbered_passages: bool = False,
    **answer_options: Any,
) -> BaseSynthesizer:
    """The synthesizer of a mode, for use from Python. `answer_options` are
    the fields of `AnswerOptions` (text_qa_template, refine_template,
    summary_template, structured_answer_filtering), the keywords the built-in
    constructors take. Templates a mode does not use are accepted and left
    unused (pass all three freely); structured answer filtering where it
    cannot apply is refused. `numbered_passages` labels each passage `[n]
    (source: ...)` for citation, as `docsum ask` does."""
    try:
        options = AnswerOptions(**answer_options)
    except TypeError:
        unknown = sorted(set(answer_options) - set(ANSWER_OPTIONS))
        raise TypeError(f"get_response_synthesizer() got unexpected keyword(s) {', '.join(unknown)}") from None
    mode = resolve_mode(response_mode)
    mode.refuse_untaken(structured_filter=options.structured_answer_filtering)
    synth = mode.create(llm, options, streaming=streaming, verbose=verbose, progress=progress)
    synth.numbered_passages = numbered_passages
    return synth
