"""Response synthesizers: turn a question and scored nodes into an answer.

The eight modes keep the reference system's names, call counts and output
contracts (see the README's mode table), with these deliberate departures:
refine re-reads the newest answer before every step and ignores meta-answers;
tree_summarize runs each level concurrently, has a depth cap and must shrink;
no_text and context_only need no LLM; an empty result says why instead of
answering "Empty Response".
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any, AsyncIterator, Callable, Iterator

from docsum.errors import ConfigError
from docsum.models.llm import LLM, closing_stream, recording_calls, track_calls
from docsum.models.prompts import REFINE_PROMPT, TEXT_QA_PROMPT, TREE_SUMMARIZE_PROMPT, PromptTemplate, structured
from docsum.query.budget import PromptBudget
from docsum.schema import NodeWithScore, Response, ResponseMode, ResponseStatus

log = logging.getLogger("docsum")

ACCUMULATE_SEPARATOR = "\n" + "-" * 21 + "\n"
MAX_TREE_DEPTH = 6
# Why there is no answer when the model was asked and replied with nothing.
EMPTY_ANSWER_REASON = "the model returned an empty answer"

ProgressFn = Callable[[str], None]


class NotSatisfied(Exception):
    """Structured answer filtering found no chunk that answers the query."""


class BaseSynthesizer:
    """Subclass and implement `aget_response` (or `get_response`, or both).

    `synthesize` / `asynthesize` are inherited: they turn nodes into text chunks,
    call your method, and wrap the result in a `Response` with sources and usage.
    """

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

    async def aget_response(self, query_str: str, text_chunks: list[str], **response_kwargs: Any) -> str | AsyncIterator[str]:
        return await asyncio.to_thread(self.get_response, query_str, text_chunks, **response_kwargs)

    # -- what every synthesizer inherits -------------------------------------
    def progress(self, message: str) -> None:
        if self._progress is not None:
            self._progress(message)
        elif self.verbose:
            log.info(message)

    def check_templates(self, response_kwargs: dict[str, Any]) -> None:
        """Fail before any LLM call if a template variable will have no value."""

    async def asynthesize(self, query: str, nodes: list[NodeWithScore], **response_kwargs: Any) -> Response:
        self.check_templates(response_kwargs)
        if not nodes:
            return Response("", [], ResponseStatus.EMPTY, "there are no passages to answer from")
        chunks = [n.node.text for n in nodes]
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


# ---------------------------------------------------------------------------
# Meta-answers: refine outputs that talk about the refining instead of answering.
# Narrowed (was: any "new information" / "remains unchanged"), because those
# phrases occur in ordinary answers ("The new information desk opens in May",
# "The bridge remains unchanged since 1901") and a real refinement was thrown
# away. What is left names the answer or the context/material themselves.
_META = re.compile(
    r"\b(?:original|existing|previous|current|prior) answer\b"
    r"|\b(?:the|this) new (?:context|material)\b"
    r"|\b(?:provided|given|additional|new) (?:context|material|information) (?:is|does|doesn't|isn't)\b"
    r"|\bdoes not need (?:to be )?refin|\bno (?:need|changes?) (?:to|for) (?:the )?refin"
    r"|\banswer (?:remains?|stays|is still) (?:the same|unchanged|relevant|accurate|correct|valid)\b",
    re.IGNORECASE,
)


def is_meta_answer(text: str) -> bool:
    return bool(_META.search(text))


def parse_structured(text: str) -> tuple[str, bool]:
    """`{answer, query_satisfied}` from a reply that should be JSON, tolerating
    code fences, prose around the object, and string booleans."""
    candidate = text.strip()
    match = re.search(r"\{.*\}", candidate, re.DOTALL)
    if match:
        try:
            data = json.loads(match.group(0))
            if isinstance(data, dict) and "answer" in data:
                satisfied = data.get("query_satisfied", True)
                if isinstance(satisfied, str):
                    satisfied = satisfied.strip().lower() in ("true", "yes", "1")
                return str(data.get("answer") or ""), bool(satisfied)
        except json.JSONDecodeError:
            pass
    # Not JSON at all: treat as an unconditional answer, as a plain refine would.
    return candidate, bool(candidate)


class _LLMSynthesizer(BaseSynthesizer):
    """Shared machinery of the modes that call an LLM."""

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

    async def _call(self, template: PromptTemplate, stream: bool, json_mode: bool = False, **values: Any) -> str | AsyncIterator[str]:
        if stream:
            return self.llm.astream(template, **values)
        return await self.llm.apredict(template, json_mode=json_mode, **values)


class Refine(_LLMSynthesizer):
    """Answer from the first chunk, then refine the answer with each next chunk."""

    def templates_used(self) -> list[tuple[PromptTemplate, set[str]]]:
        return [
            (self.text_qa_template, {"query_str", "context_str"}),
            (self.refine_template, {"query_str", "context_msg", "existing_answer"}),
        ]

    def _templates(self, query: str, kw: dict[str, Any]) -> tuple[PromptTemplate, PromptTemplate]:
        qa = self.text_qa_template.partial_format(query_str=query, **kw)
        refine = self.refine_template.partial_format(query_str=query, **kw)
        if self.structured_answer_filtering:
            qa, refine = structured(qa), structured(refine)
        return qa, refine

    def plan_parts(self, query: str, text_chunks: list[str], **kw: Any) -> list[str]:
        """Every LLM call's context, in order: the first is asked with the QA
        template, the rest refine. The existing answer's room is reserved up
        front (an answer is at most the output budget), so the plan is exact."""
        qa, refine = self._templates(query, kw)
        reserve = self.llm.metadata.num_output
        # Every part after the first is normally sent with the refine template
        # (plus an answer of up to `reserve` tokens); with filtering, the QA
        # template is used again until some part satisfies the query. Size
        # such parts for whichever prompt leaves less room. (Previously the
        # first chunk was split for the QA prompt only, so its second and later
        # pieces, refined with an answer, could overflow the window.)
        if self.budget.available(refine, extra_tokens=reserve) <= self.budget.available(qa):
            tight, tight_extra = refine, reserve
        else:
            tight, tight_extra = qa, 0
        later, later_extra = (tight, tight_extra) if self.structured_answer_filtering else (refine, reserve)
        parts: list[str] = []
        for chunk in text_chunks:
            if not parts:
                first = self.budget.repack(qa, [chunk])
                if len(first) > 1:
                    first = self.budget.repack(tight, [chunk], extra_tokens=tight_extra)
                parts.extend(first)
            else:
                parts.extend(self.budget.repack(later, [chunk], extra_tokens=later_extra))
        return parts

    async def aget_response(self, query_str: str, text_chunks: list[str], **kw: Any) -> str | AsyncIterator[str]:
        self.check_templates(kw)
        return await self._refine_parts(query_str, self.plan_parts(query_str, text_chunks, **kw), kw)

    async def _refine_parts(self, query: str, parts: list[str], kw: dict[str, Any]) -> str | AsyncIterator[str]:
        qa, refine = self._templates(query, kw)
        filtering = self.structured_answer_filtering
        answer: str | None = None
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            stream = self.streaming and last and not filtering
            if i:
                self.progress(f"refine: step {i + 1} of {len(parts)}")
            # Filtering asks for {answer, query_satisfied} JSON: say so to the
            # engine too (response_format on a server; the offline engine only
            # answers JSON when asked), or every reply parsed as "satisfied".
            if answer is None:
                out = await self._call(qa, stream, json_mode=filtering, context_str=part)
            else:
                out = await self._call(refine, stream, json_mode=filtering, context_msg=part, existing_answer=answer)
            if not isinstance(out, str):
                return out if answer is None else guard_refine_stream(out, answer)
            if filtering:
                text, satisfied = parse_structured(out)
                if not satisfied or not text:
                    continue
                out = text
            if answer is not None and (not out.strip() or is_meta_answer(out)):
                self.progress("refine: kept the previous answer (the reply talked about refining, not the question)")
                continue
            answer = out
        if answer is None:
            if filtering:
                raise NotSatisfied(f"none of the {len(parts)} passages answered the question (structured answer filtering)")
            return ""
        if filtering and self.streaming:
            return _words(answer)
        return answer


async def guard_refine_stream(stream: AsyncIterator[str], previous: str) -> AsyncIterator[str]:
    """A streamed refinement of `previous` (a refine step, or ask's --polish):
    it cannot be checked before it is shown, so the opening words are
    buffered, and if they talk about refining (or say nothing), `previous`
    is shown instead."""
    head: list[str] = []
    async with closing_stream(stream):
        async for piece in stream:
            head.append(piece)
            if len("".join(head)) >= 80:
                break
        opening = "".join(head)
        # An empty reply keeps the previous answer too, as in the non-streamed refine.
        if is_meta_answer(opening) or not opening.strip():
            async for _ in stream:
                pass
            yield previous
            return
        # Replay the buffered pieces one by one: joining them made a short answer
        # arrive as a single blob, which is exactly the "streaming gives the whole
        # answer at once" complaint streaming is meant to fix.
        for piece in head:
            yield piece
        async for piece in stream:
            yield piece


async def _words(text: str) -> AsyncIterator[str]:
    for i, word in enumerate(text.split(" ")):
        yield word if i == 0 else " " + word


class CompactAndRefine(Refine):
    """Pack the chunks into the fewest window-filling parts, then refine."""

    def plan_parts(self, query: str, text_chunks: list[str], **kw: Any) -> list[str]:
        qa, refine = self._templates(query, kw)
        # Size with whichever prompt leaves less room, the refine prompt counted
        # with a full-length existing answer, so no part is split again.
        qa_room = self.budget.available(qa)
        refine_room = self.budget.available(refine, extra_tokens=self.llm.metadata.num_output)
        if refine_room < qa_room:
            return self.budget.repack(refine, text_chunks, extra_tokens=self.llm.metadata.num_output)
        return self.budget.repack(qa, text_chunks)


class TreeSummarize(_LLMSynthesizer):
    """Pack, answer every part concurrently, and recurse over the answers."""

    def templates_used(self) -> list[tuple[PromptTemplate, set[str]]]:
        return [(self.summary_template, {"query_str", "context_str"})]

    async def aget_response(self, query_str: str, text_chunks: list[str], **kw: Any) -> str | AsyncIterator[str]:
        self.check_templates(kw)
        template = self.summary_template.partial_format(query_str=query_str, **kw)
        texts = text_chunks
        previous_tokens: int | None = None
        for level in range(1, MAX_TREE_DEPTH + 1):
            parts = self.budget.repack(template, texts) or [""]
            if len(parts) == 1:
                return await self._call(template, self.streaming, context_str=parts[0])
            tokens = sum(self.budget.tokenizer.count(p) for p in parts)
            if previous_tokens is not None and tokens >= previous_tokens:
                log.warning("tree_summarize: level %d did not shrink the text (%d tokens); answering from what fits", level, tokens)
                break
            previous_tokens = tokens
            self.progress(f"tree_summarize: level {level}, {len(parts)} parts")
            texts = list(await asyncio.gather(*(self.llm.apredict(template, context_str=p) for p in parts)))
        else:
            log.warning("tree_summarize: stopped at the depth cap of %d levels; answering from what fits", MAX_TREE_DEPTH)
        fitted, _ = self.budget.truncate(template, texts)
        return await self._call(template, self.streaming, context_str="\n\n".join(fitted))


class SimpleSummarize(_LLMSynthesizer):
    """Everything truncated into one prompt; one call."""

    async def aget_response(self, query_str: str, text_chunks: list[str], **kw: Any) -> str | AsyncIterator[str]:
        self.check_templates(kw)
        template = self.text_qa_template.partial_format(query_str=query_str, **kw)
        fitted, cut = self.budget.truncate(template, ["\n".join(text_chunks)])
        if cut:
            log.warning(
                "simple_summarize: the passages did not fit one prompt; the text was truncated (use compact or tree_summarize to read all of it)"
            )
        return await self._call(template, self.streaming, context_str=fitted[0] if fitted else "")


class Accumulate(_LLMSynthesizer):
    """The question asked of every chunk separately; the answers listed in order."""

    separator = ACCUMULATE_SEPARATOR

    def plan_parts(self, query: str, text_chunks: list[str], **kw: Any) -> list[str]:
        template = self.text_qa_template.partial_format(query_str=query, **kw)
        parts: list[str] = []
        for chunk in text_chunks:
            parts.extend(self.budget.repack(template, [chunk]))
        return parts

    async def aget_response(self, query_str: str, text_chunks: list[str], **kw: Any) -> str | AsyncIterator[str]:
        self.check_templates(kw)
        template = self.text_qa_template.partial_format(query_str=query_str, **kw)
        parts = self.plan_parts(query_str, text_chunks, **kw)
        if not parts:
            return ""
        head_parts = parts[:-1] if self.streaming else parts
        answers = list(await asyncio.gather(*(self.llm.apredict(template, context_str=p) for p in head_parts)))
        if not self.streaming:
            return self.separator.join(f"Response {i}: {a}" for i, a in enumerate(answers, start=1))
        last = self.llm.astream(template, context_str=parts[-1])
        prefix = "".join(f"Response {i}: {a}{self.separator}" for i, a in enumerate(answers, start=1))
        return _prefixed(prefix + f"Response {len(parts)}: ", last)


async def _prefixed(prefix: str, stream: AsyncIterator[str]) -> AsyncIterator[str]:
    yield prefix
    async with closing_stream(stream):
        async for piece in stream:
            yield piece


class CompactAndAccumulate(Accumulate):
    def plan_parts(self, query: str, text_chunks: list[str], **kw: Any) -> list[str]:
        template = self.text_qa_template.partial_format(query_str=query, **kw)
        return self.budget.repack(template, text_chunks)


class NoText(BaseSynthesizer):
    """No LLM call: the sources only."""

    async def aget_response(self, query_str: str, text_chunks: list[str], **kw: Any) -> str:
        return ""


class ContextOnly(BaseSynthesizer):
    """No LLM call: the passages themselves, separated by a blank line."""

    async def aget_response(self, query_str: str, text_chunks: list[str], **kw: Any) -> str:
        return "\n\n".join(text_chunks)


_MODES: dict[ResponseMode, type[BaseSynthesizer]] = {
    ResponseMode.REFINE: Refine,
    ResponseMode.COMPACT: CompactAndRefine,
    ResponseMode.TREE_SUMMARIZE: TreeSummarize,
    ResponseMode.SIMPLE_SUMMARIZE: SimpleSummarize,
    ResponseMode.ACCUMULATE: Accumulate,
    ResponseMode.COMPACT_ACCUMULATE: CompactAndAccumulate,
    ResponseMode.NO_TEXT: NoText,
    ResponseMode.CONTEXT_ONLY: ContextOnly,
}


def get_response_synthesizer(
    response_mode: ResponseMode | str = ResponseMode.COMPACT,
    llm: LLM | None = None,
    text_qa_template: PromptTemplate | None = None,
    refine_template: PromptTemplate | None = None,
    summary_template: PromptTemplate | None = None,
    structured_answer_filtering: bool = False,
    streaming: bool = False,
    verbose: bool = False,
    progress: ProgressFn | None = None,
) -> BaseSynthesizer:
    try:
        mode = ResponseMode(response_mode)
    except ValueError:
        names = ", ".join(m.value for m in ResponseMode)
        raise ConfigError(f"unknown response mode {response_mode!r}; choose one of {names}") from None
    cls = _MODES[mode]
    if mode in (ResponseMode.NO_TEXT, ResponseMode.CONTEXT_ONLY):
        return cls(llm, streaming=streaming, verbose=verbose, progress=progress)
    if structured_answer_filtering and mode not in (ResponseMode.REFINE, ResponseMode.COMPACT):
        raise ConfigError("structured answer filtering works with the refine and compact modes only")
    if llm is None:
        raise ConfigError(f"response mode {mode.value} needs an LLM")
    return cls(  # type: ignore[call-arg]
        llm,
        text_qa_template=text_qa_template,
        refine_template=refine_template,
        summary_template=summary_template,
        structured_answer_filtering=structured_answer_filtering,
        streaming=streaming,
        verbose=verbose,
        progress=progress,
    )


ENTRY_POINT_GROUP = "docsum.synthesizers"


def load_synthesizer_class(spec: str) -> type[BaseSynthesizer]:
    """A custom synthesizer named on the command line: either a name another
    package registered under the `docsum.synthesizers` entry point group, or an
    import path `package.module:ClassName`."""
    import importlib
    from importlib.metadata import entry_points

    target: Any = None
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == spec:
            target = ep.load()
            break
    if target is None and ":" in spec:
        module_name, _, attr = spec.partition(":")
        try:
            target = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"cannot load synthesizer {spec!r}: {exc}") from None
    if target is None:
        names = ", ".join(m.value for m in ResponseMode)
        raise ConfigError(
            f"unknown response mode {spec!r}; choose one of {names}, a registered "
            f"{ENTRY_POINT_GROUP} name, or module:Class"
        )
    if not (isinstance(target, type) and issubclass(target, BaseSynthesizer)):
        raise ConfigError(f"{spec!r} is not a BaseSynthesizer subclass")
    return target


def planned_calls(synth: BaseSynthesizer, query: str, text_chunks: list[str], **kw: Any) -> int | None:
    """LLM calls this synthesizer will make for these chunks, where that is known
    before running (tree_summarize's upper levels depend on the answers: we count
    the first level plus one per level assuming each shrinks to one part)."""
    if isinstance(synth, (NoText, ContextOnly)):
        return 0
    if isinstance(synth, (Refine, Accumulate)):
        return len(synth.plan_parts(query, text_chunks, **kw))
    if isinstance(synth, SimpleSummarize):
        return 1
    if isinstance(synth, TreeSummarize):
        template = synth.summary_template.partial_format(query_str=query, **kw)
        parts = synth.budget.repack(template, text_chunks)
        if len(parts) <= 1:
            return 1
        per_answer = synth.llm.metadata.num_output
        room = synth.budget.available(template)
        total, level = len(parts), len(parts)
        # Mirror the synthesizer's own guards: at most MAX_TREE_DEPTH levels, and
        # a level that does not shrink ends in one final call over what fits.
        for _ in range(MAX_TREE_DEPTH - 1):
            nxt = max(1, -(-level * per_answer // room))
            if nxt >= level:
                return total + 1
            level = nxt
            total += level
            if level == 1:
                return total
        return total + 1
    return None
