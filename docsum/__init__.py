"""docsum: summary-first question answering over folders of documents.

The library under the `docsum` command. Typical use::

    from docsum import ExtractiveLLM, get_response_synthesizer, NodeWithScore, Node

    synth = get_response_synthesizer("tree_summarize", llm=ExtractiveLLM())
    print(synth.synthesize("What is this about?", [NodeWithScore(Node("Some text."))]))
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Where each public name lives. They are imported on first use (PEP 562), so
# `import docsum.store.sqlite` or the CLI's start-up does not pay for the engines,
# numpy and the tokenizer until something needs them.
_PUBLIC = {
    "BaseSynthesizer": "docsum.synthesizers",
    "DocsumError": "docsum.errors",
    "ExitCode": "docsum.errors",
    "ExtractiveLLM": "docsum.models.extractive",
    "LLM": "docsum.models.llm",
    "Node": "docsum.schema",
    "NodeWithScore": "docsum.schema",
    "OpenAILLM": "docsum.models.openaillm",
    "PromptTemplate": "docsum.models.prompts",
    "Response": "docsum.schema",
    "ResponseMode": "docsum.schema",
    "ResponseStatus": "docsum.schema",
    "get_response_synthesizer": "docsum.synthesizers",
    "track_calls": "docsum.models.llm",
}

if TYPE_CHECKING:
    from docsum.errors import DocsumError, ExitCode
    from docsum.models.extractive import ExtractiveLLM
    from docsum.models.llm import LLM, track_calls
    from docsum.models.openaillm import OpenAILLM
    from docsum.models.prompts import PromptTemplate
    from docsum.schema import Node, NodeWithScore, Response, ResponseMode, ResponseStatus
    from docsum.synthesizers import BaseSynthesizer, get_response_synthesizer


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'docsum' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "BaseSynthesizer",
    "DocsumError",
    "ExitCode",
    "ExtractiveLLM",
    "LLM",
    "Node",
    "NodeWithScore",
    "OpenAILLM",
    "PromptTemplate",
    "Response",
    "ResponseMode",
    "ResponseStatus",
    "get_response_synthesizer",
    "track_calls",
]
__version__ = "0.1.0"
