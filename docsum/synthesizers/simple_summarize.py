"""`simple_summarize`: every passage in one prompt (truncated to fit, with a
warning), one call."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from docsum.synthesizers.base import LLMSynthesizer

log = logging.getLogger("docsum")


class SimpleSummarize(LLMSynthesizer):
    """Everything truncated into one prompt; one call."""

    label = "simple_summarize"
    takes = frozenset({"text_qa_template"})

    def plan(self, query_str: str, text_chunks: list[str], **kw: Any) -> int | None:
        return 1

    async def aget_response(self, query_str: str, text_chunks: list[str], **kw: Any) -> str | AsyncIterator[str]:
        self.check_templates(kw)
        template = self.text_qa_template.partial_format(query_str=query_str, **kw)
        fitted, cut = self.budget.truncate(template, ["\n".join(text_chunks)])
        if cut:
            log.warning(
                "simple_summarize: the passages did not fit one prompt; the text was truncated (use compact or tree_summarize to read all of it)"
            )
        return await self._call(template, self.streaming, context_str=fitted[0] if fitted else "")
