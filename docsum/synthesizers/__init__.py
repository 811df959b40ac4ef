"""Response synthesizers: turn a question and its passages into an answer.

One module per family of modes (refine, compact, tree_summarize,
simple_summarize, accumulate and compact_accumulate, no_text and
context_only), their shared base, and the registry that resolves a mode
name, a `docsum.synthesizers` entry point or `module:Class` into one.
"""

from docsum.synthesizers.accumulate import ACCUMULATE_SEPARATOR, Accumulate, CompactAndAccumulate
from docsum.synthesizers.base import (
    ANSWER_OPTIONS,
    EMPTY_ANSWER_REASON,
    AnswerOptions,
    BaseSynthesizer,
    LLMSynthesizer,
    NotSatisfied,
    iter_tokens,
)
from docsum.synthesizers.compact import CompactAndRefine
from docsum.synthesizers.no_text import ContextOnly, NoText
from docsum.synthesizers.refine import Refine, guard_refine_stream, is_meta_answer, parse_structured
from docsum.synthesizers.registry import (
    BUILTIN_MODES,
    ENTRY_POINT_GROUP,
    Mode,
    get_response_synthesizer,
    resolve_mode,
)
from docsum.synthesizers.simple_summarize import SimpleSummarize
from docsum.synthesizers.tree_summarize import MAX_TREE_DEPTH, TreeSummarize

__all__ = [
    "ACCUMULATE_SEPARATOR",
    "ANSWER_OPTIONS",
    "BUILTIN_MODES",
    "EMPTY_ANSWER_REASON",
    "ENTRY_POINT_GROUP",
    "MAX_TREE_DEPTH",
    "Accumulate",
    "AnswerOptions",
    "BaseSynthesizer",
    "CompactAndAccumulate",
    "CompactAndRefine",
    "ContextOnly",
    "LLMSynthesizer",
    "Mode",
    "NoText",
    "NotSatisfied",
    "Refine",
    "SimpleSummarize",
    "TreeSummarize",
    "get_response_synthesizer",
    "guard_refine_stream",
    "is_meta_answer",
    "iter_tokens",
    "parse_structured",
    "resolve_mode",
]
