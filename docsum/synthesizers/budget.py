"""How much text fits in a prompt, and packing text to fill it.

available = context window − tokens of the prompt as actually sent (system and
user messages with their fixed values, per-message overhead) − output budget −
padding. Unlike the reference system we size with the chat messages that really
go out, and when a template leaves no room we degrade (shrink, warn) instead of
raising.
"""

from __future__ import annotations

import logging

from docsum.citations import LABEL_TOKENS, has_labels, labelled_parts
from docsum.ingest.split import iter_split_tokens, split_tokens
from docsum.models.llm import PER_MESSAGE_TOKENS, REPLY_PRIMER_TOKENS, LLMMetadata
from docsum.models.prompts import PromptTemplate

log = logging.getLogger("docsum")

DEFAULT_PADDING = 5
DEFAULT_OVERLAP_RATIO = 0.1
# Below this many tokens per chunk a prompt is useless; we still send it (with a
# warning) rather than fail, because the caller asked for an answer.
MIN_CHUNK_TOKENS = 32


class PromptBudget:
    def __init__(
        self, metadata: LLMMetadata, padding: int = DEFAULT_PADDING, overlap_ratio: float = DEFAULT_OVERLAP_RATIO
    ) -> None:
        if not 0 <= overlap_ratio < 1:
            raise ValueError("overlap_ratio must be in [0, 1)")
        self.metadata = metadata
        self.tokenizer = metadata.tokenizer
        self.padding = padding
        self.overlap_ratio = overlap_ratio

    def prompt_tokens(self, template: PromptTemplate) -> int:
        """The template's own cost: every message with its free variables empty."""
        messages = template.render_empty()
        return sum(self.tokenizer.count(m["content"]) + PER_MESSAGE_TOKENS for m in messages) + REPLY_PRIMER_TOKENS

    def available(self, template: PromptTemplate, num_chunks: int = 1, extra_tokens: int = 0) -> int:
        """Tokens of context each of `num_chunks` chunks may use. Never below
        MIN_CHUNK_TOKENS; when the true figure is lower we warn."""
        room = self.metadata.context_window - self.prompt_tokens(template) - self.metadata.num_output - extra_tokens
        size = room // max(1, num_chunks) - self.padding
        if size < MIN_CHUNK_TOKENS:
            log.warning(
                "the %s prompt leaves only %d tokens for text in a %d-token window; sending %d-token pieces anyway",
                template.name,
                max(size, 0),
                self.metadata.context_window,
                MIN_CHUNK_TOKENS,
            )
            return MIN_CHUNK_TOKENS
        return size

    def fits(self, template: PromptTemplate, text: str, extra_tokens: int = 0) -> bool:
        return self.tokenizer.count(text) <= self.available(template, extra_tokens=extra_tokens)

    def repack(self, template: PromptTemplate, chunks: list[str], extra_tokens: int = 0) -> list[str]:
        """The fewest window-filling parts holding all of `chunks` (joined by a
        blank line), consecutive parts overlapping by about 10%."""
        texts = [c.strip() for c in chunks if c and c.strip()]
        if not texts:
            return []
        size = self.available(template, extra_tokens=extra_tokens)
        joined = "\n\n".join(texts)
        # Only count the whole text when it could plausibly fit: encoding a
        # 50 MB document in one go just to learn it does not fit costs far more
        # memory than the split below (no token spans more than 16 characters
        # often enough to matter; split_tokens verifies every piece anyway).
        if len(joined) <= size * 16 and self.tokenizer.count(joined) <= size:
            return [joined]
        if not has_labels(joined):
            return split_tokens(joined, size, int(size * self.overlap_ratio), self.tokenizer)
        # Numbered passages: a part starting inside one is given its label.
        size = max(MIN_CHUNK_TOKENS, size - LABEL_TOKENS)
        return labelled_parts(joined, split_tokens(joined, size, int(size * self.overlap_ratio), self.tokenizer))

    def truncate(self, template: PromptTemplate, chunks: list[str]) -> tuple[list[str], bool]:
        """Fit all chunks into one prompt, each cut to an equal share; returns
        the pieces and whether anything was cut."""
        texts = [c.strip() for c in chunks if c and c.strip()]
        if not texts:
            return [], False
        size = self.available(template, num_chunks=len(texts))
        out: list[str] = []
        cut = False
        for text in texts:
            if self.tokenizer.count(text) <= size:
                out.append(text)
            else:
                out.append(next(iter_split_tokens(text, size, 0, self.tokenizer)))
                cut = True
        return out, cut
