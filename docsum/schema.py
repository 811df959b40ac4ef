"""The objects that travel between pipeline stages: nodes, scored nodes, usage
records and the response a synthesizer returns."""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Node:
    """A piece of a document: the unit retrieval returns and synthesis reads."""

    text: str
    doc_id: str = ""
    path: str = ""
    seq: int = 0
    pages: tuple[int, ...] = ()
    start_char: int = 0
    end_char: int = 0
    token_count: int = 0
    node_id: str = ""

    def __post_init__(self) -> None:
        if not self.node_id:
            self.node_id = f"{self.doc_id}:{self.seq}" if self.doc_id else f"node:{id(self)}"


@dataclass
class NodeWithScore:
    node: Node
    score: float | None = None

    @property
    def text(self) -> str:
        return self.node.text


@dataclass
class CallRecord:
    """One LLM or embedding request: what it was for and what it cost."""

    kind: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    ok: bool = True
    counted_locally: bool = False  # the server sent no usage; tokens were counted here


@dataclass
class Usage:
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    embedding_calls: int = 0
    embedding_tokens: int = 0

    @classmethod
    def of(cls, calls: list[CallRecord]) -> Usage:
        usage = cls()
        for call in calls:
            if call.kind == "embed":
                usage.embedding_calls += 1
                usage.embedding_tokens += call.prompt_tokens
            else:
                usage.llm_calls += 1
                usage.prompt_tokens += call.prompt_tokens
                usage.completion_tokens += call.completion_tokens
        return usage

    def as_dict(self) -> dict[str, int]:
        return {
            "llm_calls": self.llm_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "embedding_calls": self.embedding_calls,
        }


class ResponseMode(str, enum.Enum):  # noqa: UP042 (str() of a StrEnum member differs)
    """How an answer is put together (docsum ask --mode). Here, not in
    docsum.synthesizers, so the CLI can list the modes without importing them."""

    REFINE = "refine"
    COMPACT = "compact"
    TREE_SUMMARIZE = "tree_summarize"
    SIMPLE_SUMMARIZE = "simple_summarize"
    NO_TEXT = "no_text"
    CONTEXT_ONLY = "context_only"
    ACCUMULATE = "accumulate"
    COMPACT_ACCUMULATE = "compact_accumulate"


class ResponseStatus(str, enum.Enum):  # noqa: UP042
    OK = "ok"
    EMPTY = "empty"  # nothing to answer from
    NOT_SATISFIED = "not_satisfied"  # structured filtering: no chunk answered the query


@dataclass
class Response:
    """The answer, where it came from, and what it cost. Never a bare 'Empty
    Response': when there is no answer, `status` and `reason` say why."""

    response: str
    source_nodes: list[NodeWithScore] = field(default_factory=list)
    status: ResponseStatus = ResponseStatus.OK
    reason: str = ""
    calls: list[CallRecord] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    # Set when streaming: the final call's tokens. Draining it fills `response`.
    stream: AsyncIterator[str] | None = None

    @property
    def usage(self) -> Usage:
        return Usage.of(self.calls)

    def __str__(self) -> str:
        return self.response

    async def drain(self) -> str:
        if self.stream is not None:
            parts = [token async for token in self.stream]
            self.response = "".join(parts)
            self.stream = None
        return self.response
