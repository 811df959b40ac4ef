"""`refine`: answer from the first passage, then refine the answer with each
next one. Deliberate departures from the reference system: the newest answer
is re-read before every step, and a reply that talks about the refining
instead of answering (a meta-answer) keeps the previous answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

from docsum.lazyre import LazyPattern
from docsum.models.llm import closing_stream
from docsum.models.prompts import PromptTemplate, structured
from docsum.synthesizers.base import LLMSynthesizer, NotSatisfied

# Meta-answers: refine outputs that talk about the refining instead of answering.
# Narrowed (was: any "new information" / "remains unchanged"), because those
# phrases occur in ordinary answers ("The new information desk opens in May",
# "The bridge remains unchanged since 1901") and a real refinement was thrown
# away. What is left names the answer or the context/material themselves.
_META = LazyPattern(
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


class Refine(LLMSynthesizer):
    """Answer from the first chunk, then refine the answer with each next chunk."""

    label = "refine"
    takes = frozenset({"text_qa_template", "refine_template", "structured_answer_filtering"})

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

    def plan(self, query_str: str, text_chunks: list[str], **kw: Any) -> int | None:
        return len(self.plan_parts(query_str, text_chunks, **kw))

    async def aget_response(self, query_str: str, text_chunks: list[str], **kw: Any) -> str | AsyncIterator[str]:
        self.check_templates(kw)
        return await self._refine_parts(query_str, self.plan_parts(query_str, text_chunks, **kw), kw)

    async def _refine_parts(self, query: str, parts: list[str], kw: dict[str, Any]) -> str | AsyncIterator[str]:  # noqa: C901 (listed when the check came in: simplify, then drop this)
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
                raise NotSatisfied(
                    f"none of the {len(parts)} passages answered the question (structured answer filtering)"
                )
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
