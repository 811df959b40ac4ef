"""`accumulate` and `compact_accumulate`: the question asked of every passage
(or packed part) separately and concurrently, the answers listed in order as
`Response 1: …` blocks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from docsum.models.llm import closing_stream
from docsum.synthesizers.base import LLMSynthesizer

ACCUMULATE_SEPARATOR = "\n" + "-" * 21 + "\n"


class Accumulate(LLMSynthesizer):
    """The question asked of every chunk separately; the answers listed in order."""

    label = "accumulate"
    takes = frozenset({"text_qa_template"})

    separator = ACCUMULATE_SEPARATOR

    def plan_parts(self, query: str, text_chunks: list[str], **kw: Any) -> list[str]:
        template = self.text_qa_template.partial_format(query_str=query, **kw)
        parts: list[str] = []
        for chunk in text_chunks:
            parts.extend(self.budget.repack(template, [chunk]))
        return parts

    def plan(self, query_str: str, text_chunks: list[str], **kw: Any) -> int | None:
        return len(self.plan_parts(query_str, text_chunks, **kw))

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
    """Pack the chunks into the fewest window-filling parts, then accumulate."""

    label = "compact_accumulate"

    def plan_parts(self, query: str, text_chunks: list[str], **kw: Any) -> list[str]:
        template = self.text_qa_template.partial_format(query_str=query, **kw)
        return self.budget.repack(template, text_chunks)
