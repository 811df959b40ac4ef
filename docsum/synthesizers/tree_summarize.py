"""`tree_summarize`: pack the passages, answer every part concurrently, and
summarize the answers level by level until one remains. Departures from the
reference system: each level runs concurrently, the depth is capped, and a
level must shrink the text."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from docsum.models.prompts import PromptTemplate
from docsum.synthesizers.base import LLMSynthesizer

log = logging.getLogger("docsum")

MAX_TREE_DEPTH = 6


class TreeSummarize(LLMSynthesizer):
    """Pack, answer every part concurrently, and recurse over the answers."""

    label = "tree_summarize"
    takes = frozenset({"summary_template"})

    def templates_used(self) -> list[tuple[PromptTemplate, set[str]]]:
        return [(self.summary_template, {"query_str", "context_str"})]

    def planned_levels(self, query_str: str, text_chunks: list[str], **kw: Any) -> list[int]:
        """The calls of each level, first to last. The first level is exact;
        the upper ones read answers that do not exist yet, each counted at
        the full output budget, and mirror the synthesizer's own guards: at
        most MAX_TREE_DEPTH levels, and a level that does not shrink ends in
        one final call over what fits."""
        template = self.summary_template.partial_format(query_str=query_str, **kw)
        level = len(self.budget.repack(template, text_chunks))
        if level <= 1:
            return [1]
        per_answer = self.llm.metadata.num_output
        room = max(1, self.budget.available(template))
        levels = [level]
        for _ in range(MAX_TREE_DEPTH - 1):
            upper = max(1, -(-level * per_answer // room))
            if upper >= level:
                break
            levels.append(upper)
            if upper == 1:
                return levels
            level = upper
        return levels + [1]

    def plan(self, query_str: str, text_chunks: list[str], **kw: Any) -> int | None:
        return sum(self.planned_levels(query_str, text_chunks, **kw))

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
                log.warning(
                    "tree_summarize: level %d did not shrink the text (%d tokens); answering from what fits",
                    level,
                    tokens,
                )
                break
            previous_tokens = tokens
            self.progress(f"tree_summarize: level {level}, {len(parts)} parts")
            texts = list(await asyncio.gather(*(self.llm.apredict(template, context_str=p) for p in parts)))
        else:
            log.warning(
                "tree_summarize: stopped at the depth cap of %d levels; answering from what fits", MAX_TREE_DEPTH
            )
        fitted, _ = self.budget.truncate(template, texts)
        return await self._call(template, self.streaming, context_str="\n\n".join(fitted))
