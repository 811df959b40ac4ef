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
# Tokens of the blank line between two answers packed into one part.
_JOIN_TOKENS = 2


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
        most MAX_TREE_DEPTH levels, then one final call over what fits. An
        upper bound: the calls actually sent are held to --max-calls anyway
        (docsum.models.calls)."""
        template = self.summary_template.partial_format(query_str=query_str, **kw)
        level = len(self.budget.repack(template, text_chunks))
        if level <= 1:
            return [1]
        # Each answer at its full budget plus the blank line joining it to
        # the next, repacked as `repack` does: window-filling parts that
        # overlap by its ratio (ignoring the overlap planned too few calls).
        per_answer = self.llm.metadata.num_output + _JOIN_TOKENS
        room = max(1, self.budget.available(template))
        overlap = int(room * self.budget.overlap_ratio)
        levels = [level]
        for _ in range(MAX_TREE_DEPTH - 1):
            total = level * per_answer
            upper = 1 if total <= room else -(-(total - overlap) // max(1, room - overlap))
            if upper >= level:
                # No fewer parts: the synthesizer goes on while the text
                # still shrinks, up to its depth cap. Counted as it may.
                levels.extend([level] * (MAX_TREE_DEPTH - len(levels)))
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
