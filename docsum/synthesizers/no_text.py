"""`no_text` and `context_only`: answers that need no LLM (the sources only,
or the passages themselves)."""

from __future__ import annotations

from typing import Any

from docsum.synthesizers.base import BaseSynthesizer


class NoText(BaseSynthesizer):
    """No LLM call: the sources only."""

    label = "no_text"

    def plan(self, query_str: str, text_chunks: list[str], **kw: Any) -> int | None:
        return 0

    async def aget_response(self, query_str: str, text_chunks: list[str], **kw: Any) -> str:
        return ""


class ContextOnly(NoText):
    """No LLM call: the passages themselves, separated by a blank line."""

    label = "context_only"

    async def aget_response(self, query_str: str, text_chunks: list[str], **kw: Any) -> str:
        return "\n\n".join(text_chunks)
