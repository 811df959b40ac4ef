"""The one LLM interface the build, the retrievers and the synthesizers use.

Two engines implement it: `OpenAILLM` (any OpenAI-compatible server, through the
`openai` package; `docsum.models.openaillm`) and `ExtractiveLLM` (offline,
deterministic, no model weights; `docsum.models.extractive`). Both are async
first; `predict` is a sync convenience.

Every request is recorded as a `CallRecord` on the engine and on every active
`track_calls()` scope (`docsum.models.calls`, whose names are also importable
from here, where the engines' users have always found them).
"""

from __future__ import annotations

import abc
import asyncio
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from docsum.errors import ConfigError
from docsum.models.calls import admit_call, closing_stream, recording_calls, to_active_scopes, track_calls
from docsum.models.prompts import PromptTemplate
from docsum.models.tokens import Tokenizer
from docsum.schema import CallRecord
from docsum.settings import DEFAULT_LIMITS, FALLBACK_CONTEXT_WINDOW, Limits, default

if TYPE_CHECKING:  # numpy loads with the first vector, not with the interface
    import numpy as np

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_NUM_OUTPUT",
    "KNOWN_CONTEXT_WINDOWS",
    "KNOWN_PRICES",
    "LLM",
    "LLMMetadata",
    "OVERRUN_FACTOR",
    "PER_MESSAGE_TOKENS",
    "REPLY_PRIMER_TOKENS",
    "closing_stream",
    "context_window_for",
    "estimated_cost",
    "recording_calls",
    "track_calls",
]

DEFAULT_CONTEXT_WINDOW = FALLBACK_CONTEXT_WINDOW
DEFAULT_NUM_OUTPUT = default("max_output_tokens")

# Context windows of models people commonly point docsum at. Prefix match, longest first.
KNOWN_CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
}

# USD per million tokens (input, output), for the estimated cost line. Unknown
# models get no estimate rather than a wrong one.
KNOWN_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-3.5-turbo": (0.50, 1.50),
}

# A completion may run this many times the requested max_tokens before it is
# cut (servers count with their own tokenizer, docsum with its own): a server
# that ignores max_tokens must not put megabytes into a summary or an answer.
OVERRUN_FACTOR = 2

# Tokens a chat message costs beyond its content (role markers); the OpenAI
# cookbook's figure for current chat models, plus the reply primer.
PER_MESSAGE_TOKENS = 4
REPLY_PRIMER_TOKENS = 3


# Fewest tokens the context window must keep for the prompt beside the
# answer's --max-output-tokens: a template and a question need about this
# much before any document text fits at all.
MIN_PROMPT_ROOM = 64


def check_window(context_window: int, num_output: int) -> None:
    """ConfigError (exit 2) when the answer's budget leaves the prompt no
    room in the window: checked once, where the engine is made, so build,
    ask and eval refuse the same settings with the same message."""
    room = context_window - num_output
    if room >= MIN_PROMPT_ROOM:
        return
    left = "no room" if room <= 0 else f"only {room} tokens"
    raise ConfigError(
        f"--max-output-tokens {num_output} leaves {left} for the prompt in a "
        f"{context_window}-token context window (docsum needs at least {MIN_PROMPT_ROOM}); "
        "lower --max-output-tokens or raise --context-window"
    )


def _by_prefix(table: dict[str, Any], model: str | None) -> Any:
    if not model:
        return None
    name = model.lower().split("/")[-1]
    for prefix in sorted(table, key=len, reverse=True):
        if name.startswith(prefix):
            return table[prefix]
    return None


def context_window_for(model: str | None) -> int:
    return _by_prefix(KNOWN_CONTEXT_WINDOWS, model) or DEFAULT_CONTEXT_WINDOW


def estimated_cost(model: str | None, prompt_tokens: int, completion_tokens: int) -> float | None:
    price = _by_prefix(KNOWN_PRICES, model)
    if price is None:
        return None
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000


@dataclass
class LLMMetadata:
    model: str
    context_window: int
    num_output: int
    tokenizer: Tokenizer
    engine: str  # "openai" | "extractive"
    embed_model: str
    # Whether the model's price table applies: a local server answering to
    # "gpt-4o-mini" costs nothing of the sort.
    priced: bool = True

    @property
    def extractive(self) -> bool:
        return self.engine == "extractive"

    @property
    def price_key(self) -> str | None:
        """The model name to look a price up by, or None when none applies."""
        return self.model if self.priced else None


class LLM(abc.ABC):
    """Complete, stream and embed; count what it costs; bound requests in flight."""

    metadata: LLMMetadata

    def __init__(self, metadata: LLMMetadata, limits: Limits = DEFAULT_LIMITS) -> None:
        self.metadata = metadata
        self.limits = limits  # `requests` bounds requests in flight; the HTTP pool is sized from it
        self.calls: list[CallRecord] = []
        # One limit per event loop: a semaphore cannot be shared across loops, and
        # the sync wrappers run short-lived loops of their own.
        self._limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    # -- accounting -------------------------------------------------------
    def record(self, call: CallRecord) -> None:
        self.calls.append(call)
        to_active_scopes(call)

    def admit(self, kind: str) -> None:
        """Every engine calls this just before it sends an LLM call: the
        call a budget in force (--max-calls) cannot afford is refused here,
        unsent (CallLimitError, exit 2)."""
        admit_call(kind)

    @property
    def limiter(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        sem = self._limiters.get(loop)
        if sem is None:
            sem = self._limiters[loop] = asyncio.Semaphore(self.limits.requests)
        return sem

    def count_messages(self, messages: list[dict[str, str]]) -> int:
        """Tokens of a prompt as it is sent: every message plus its overhead."""
        tok = self.metadata.tokenizer
        return sum(tok.count(m["content"]) + PER_MESSAGE_TOKENS for m in messages) + REPLY_PRIMER_TOKENS

    # -- the interface ----------------------------------------------------
    @abc.abstractmethod
    async def apredict(self, template: PromptTemplate, *, json_mode: bool = False, **values: Any) -> str:
        """Fill `template` with `values` and return the completion text."""

    @abc.abstractmethod
    def astream(self, template: PromptTemplate, **values: Any) -> AsyncIterator[str]:
        """Like `apredict`, yielding the completion in pieces as they arrive."""

    @abc.abstractmethod
    async def aembed(self, texts: list[str]) -> np.ndarray:
        """One L2-normalised float32 row per text."""

    def predict(self, template: PromptTemplate, *, json_mode: bool = False, **values: Any) -> str:
        return asyncio.run(self.apredict(template, json_mode=json_mode, **values))

    def embed(self, texts: list[str]) -> np.ndarray:
        return asyncio.run(self.aembed(texts))

    async def aclose(self) -> None:
        return None
