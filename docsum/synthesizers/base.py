"""The base of every response synthesizer, and the machinery the modes that
call an LLM share.

A synthesizer turns a question and scored nodes into an answer (a `Response`
with its sources and what it cost). The built-in modes keep the reference
system's names, call counts and output contracts (see the README's mode
table); an empty result says why instead of answering "Empty Response".
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from docsum.errors import ConfigError
from docsum.models.llm import LLM, recording_calls, track_calls
from docsum.models.prompts import REFINE_PROMPT, TEXT_QA_PROMPT, TREE_SUMMARIZE_PROMPT, PromptTemplate
from docsum.schema import NodeWithScore, Response, ResponseStatus
from docsum.synthesizers.budget import PromptBudget

log = logging.getLogger("docsum")

# Why there is no answer when the model was asked and replied with nothing.
EMPTY_ANSWER_REASON = "the model returned an empty answer"


@dataclass(frozen=True)
class AnswerOptions:
    """What `docsum ask`'s answer options ask of a synthesizer, by the
    constructor keyword each reaches it through: --template (text_qa_template,
    or summary_template for a summarizing mode; --emotion changes both),
    --refine-template, --filter. A synthesizer that takes none of an option's
    keywords refuses the option rather than ignore it. None / False: not given."""

    text_qa_template: PromptTemplate | None = None
    refine_template: PromptTemplate | None = None
    summary_template: PromptTemplate | None = None
    structured_answer_filtering: bool = False

    def given(self) -> dict[str, Any]:
        """The keywords given, with their values."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {name: value for name, value in values.items() if value is not None and value is not False}


ANSWER_OPTIONS = tuple(f.name for f in fields(AnswerOptions))

ProgressFn = Callable[[str], None]


class NotSatisfied(Exception):
    """Structured answer filtering found no chunk that answers the query."""


class BaseSynthesizer:
    """Subclass and implement `aget_response` (or `get_response`, or both).

    `synthesize` / `asynthesize` are inherited: they turn nodes into text chunks,
    call your method, and wrap the result in a `Response` with sources and usage.

    Each class says what `docsum ask` reports it by (`label`), which answer
    options its constructor takes (`takes`; see ANSWER_OPTIONS) and how many
    LLM calls an answer will make (`plan`), so that `--max-calls` and
    `--explain` can count it before anything is sent.
    """

    # What answers report this synthesizer by (`AskResult.mode`): the mode
    # name of a built-in, else the class name (a custom one named on the
    # command line is reported by the name the user gave).
    label: str = ""
    # The ANSWER_OPTIONS its constructor takes; None: read from the
    # constructor's signature (a custom class opts in by naming them).
    takes: ClassVar[frozenset[str] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "label" not in cls.__dict__:
            cls.label = cls.__name__

    def __init__(
        self,
        llm: LLM | None = None,
        *,
        streaming: bool = False,
        verbose: bool = False,
        progress: ProgressFn | None = None,
    ) -> None:
        cls = type(self)
        if cls.get_response is BaseSynthesizer.get_response and cls.aget_response is BaseSynthesizer.aget_response:
            # Each default calls the other; a subclass must break the circle.
            raise TypeError(f"{cls.__name__} must implement get_response or aget_response")
        self.llm = llm
        self.streaming = streaming
        self.verbose = verbose
        self._progress = progress

    # -- what a synthesizer implements ---------------------------------------
    def get_response(self, query_str: str, text_chunks: list[str], **response_kwargs: Any) -> str | AsyncIterator[str]:
        return _run_sync(self.aget_response(query_str, text_chunks, **response_kwargs))

    async def aget_response(
        self, query_str: str, text_chunks: list[str], **response_kwargs: Any
    ) -> str | AsyncIterator[str]:
        return await asyncio.to_thread(self.get_response, query_str, text_chunks, **response_kwargs)

    # Whether the passages reach `get_response` numbered for citation; off by
    # default (a library caller's chunks arrive as given).
    numbered_passages = False

    def plan(self, query_str: str, text_chunks: list[str], **response_kwargs: Any) -> int | None:
        """LLM calls an answer from these chunks will make, where that is
        known before running; None (the default) when it is not."""
        return None

    @classmethod
    def constructor_keywords(cls) -> frozenset[str]:
        """The names of the constructor's parameters."""
        return frozenset(inspect.signature(cls.__init__).parameters)

    @classmethod
    def options_taken(cls) -> frozenset[str]:
        """The ANSWER_OPTIONS this class's constructor accepts."""
        if cls.takes is not None:
            return cls.takes
        return cls.constructor_keywords().intersection(ANSWER_OPTIONS)

    # -- what every synthesizer inherits -------------------------------------
    def progress(self, message: str) -> None:
        if self._progress is not None:
            self._progress(message)
        elif self.verbose:
            log.info(message)

    def check_templates(self, response_kwargs: dict[str, Any]) -> None:
        """Fail before any LLM call if a template variable will have no value."""

    def passages(self, nodes: list[NodeWithScore]) -> list[str]:
        """The text chunks `get_response` receives for these nodes: numbered
        for citation (docsum.citations) when `numbered_passages` is on,
        as `docsum ask` sets it for every mode; as given otherwise."""
        if self.numbered_passages:
            from docsum.citations import number_passages

            return number_passages(nodes)
        return [n.node.text for n in nodes]

    async def asynthesize(self, query: str, nodes: list[NodeWithScore], **response_kwargs: Any) -> Response:
        self.check_templates(response_kwargs)
        if not nodes:
            return Response("", [], ResponseStatus.EMPTY, "there are no passages to answer from")
        chunks = self.passages(nodes)
        with track_calls() as calls:
            try:
                result = await self.aget_response(query, chunks, **response_kwargs)
            except NotSatisfied as exc:
                return Response("", list(nodes), ResponseStatus.NOT_SATISFIED, str(exc), calls)
        response = Response("", list(nodes), calls=calls)
        if isinstance(result, str):
            if not result.strip() and calls:
                # The model was asked and said nothing: never a bare empty
                # answer with status ok (modes that make no call may be empty).
                return Response("", list(nodes), ResponseStatus.EMPTY, EMPTY_ANSWER_REASON, calls)
            response.response = result
        else:
            response.stream = recording_calls(result, calls)
        return response

    def synthesize(self, query: str, nodes: list[NodeWithScore], **response_kwargs: Any) -> Response:
        """Sync twin of `asynthesize`. With streaming, `Response.iter_tokens()`
        drives the stream from this thread."""
        loop = asyncio.new_event_loop()
        response = loop.run_until_complete(self.asynthesize(query, nodes, **response_kwargs))
        if response.stream is None:
            loop.close()
            return response
        response.metadata["sync_stream"] = _sync_stream(loop, response)
        return response


def iter_tokens(response: Response) -> Iterator[str]:
    """Tokens of a response made by the sync `synthesize` with streaming on."""
    gen = response.metadata.get("sync_stream")
    if gen is None:
        yield response.response
        return
    yield from gen


def _sync_stream(loop: asyncio.AbstractEventLoop, response: Response) -> Iterator[str]:
    stream = response.stream
    assert stream is not None
    parts: list[str] = []
    try:
        while True:
            try:
                token = loop.run_until_complete(stream.__anext__())
            except StopAsyncIteration:
                break
            parts.append(token)
            yield token
    finally:
        response.response = "".join(parts)
        response.stream = None
        loop.close()


def _run_sync(coro: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()  # never awaited: close it so Python does not warn about it
    raise RuntimeError("get_response called from a running event loop; await aget_response instead")


class LLMSynthesizer(BaseSynthesizer):
    """Shared machinery of the modes that call an LLM. Every template is
    accepted (a library caller may pass all three); `takes` says which one a
    mode really uses, and `docsum ask` refuses the others."""

    def __init__(
        self,
        llm: LLM,
        *,
        text_qa_template: PromptTemplate | None = None,
        refine_template: PromptTemplate | None = None,
        summary_template: PromptTemplate | None = None,
        structured_answer_filtering: bool = False,
        streaming: bool = False,
        verbose: bool = False,
        progress: ProgressFn | None = None,
    ) -> None:
        if llm is None:
            raise ConfigError("this response mode needs an LLM")
        super().__init__(llm, streaming=streaming, verbose=verbose, progress=progress)
        self.llm: LLM = llm
        self.budget = PromptBudget(llm.metadata)
        self.text_qa_template = text_qa_template or TEXT_QA_PROMPT
        self.refine_template = refine_template or REFINE_PROMPT
        self.summary_template = summary_template or TREE_SUMMARIZE_PROMPT
        self.structured_answer_filtering = structured_answer_filtering

    def templates_used(self) -> list[tuple[PromptTemplate, set[str]]]:
        return [(self.text_qa_template, {"query_str", "context_str"})]

    def check_templates(self, response_kwargs: dict[str, Any]) -> None:
        for template, supplied in self.templates_used():
            template.check(supplied | set(response_kwargs))

    async def _call(
        self, template: PromptTemplate, stream: bool, json_mode: bool = False, **values: Any
    ) -> str | AsyncIterator[str]:
        if stream:
            return self.llm.astream(template, **values)
        return await self.llm.apredict(template, json_mode=json_mode, **values)
