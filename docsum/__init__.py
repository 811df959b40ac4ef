"""docsum: summary-first question answering over folders of documents.

The library under the `docsum` command. Typical use::

    from docsum import ExtractiveLLM, get_response_synthesizer, NodeWithScore, Node

    synth = get_response_synthesizer("tree_summarize", llm=ExtractiveLLM())
    print(synth.synthesize("What is this about?", [NodeWithScore(Node("Some text."))]))
"""

from docsum.errors import DocsumError, ExitCode
from docsum.extractive import ExtractiveLLM
from docsum.llm import LLM, OpenAILLM, track_calls
from docsum.prompts import PromptTemplate
from docsum.schema import Node, NodeWithScore, Response, ResponseStatus
from docsum.synthesize import BaseSynthesizer, ResponseMode, get_response_synthesizer

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
