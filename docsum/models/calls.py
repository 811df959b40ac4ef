"""Counting what the engines spend: every request an engine makes is
recorded on the engine and on every active `track_calls()` scope, so a
synthesizer can report exactly what its answer cost even while other
documents are being summarized concurrently."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator, Iterator

from docsum.errors import ConfigError
from docsum.schema import CallRecord

_active_sinks: contextvars.ContextVar[tuple[list[CallRecord], ...]] = contextvars.ContextVar(
    "docsum_call_sinks", default=()
)


class CallLimitError(ConfigError):
    """A call would exceed --max-calls; it was not sent (exit 2)."""


class CallBudget:
    """At most ``limit`` LLM calls (embeddings are not LLM calls) in one
    scope: the call past it is refused before it is sent. ``spent`` is the
    calls of the scope, for the refusal's account of what was spent."""

    def __init__(self, limit: int, what: str, option: str = "--max-calls") -> None:
        self.limit = limit
        self.what = what  # "this question", "this build"
        self.option = option
        self.sent = 0
        self.spent: list[CallRecord] = []

    def admit(self, kind: str) -> None:
        if self.sent >= self.limit:
            prompt = sum(c.prompt_tokens for c in self.spent if c.kind != "embed")
            completion = sum(c.completion_tokens for c in self.spent if c.kind != "embed")
            raise CallLimitError(
                f"{self.what} reached {self.option} {self.limit}: {self.sent} LLM calls sent "
                f"({prompt} prompt + {completion} completion tokens); the next ({kind}) was not sent. "
                f"Raise {self.option} (or its setting in config.toml)"
            )
        self.sent += 1


_active_budgets: contextvars.ContextVar[tuple[CallBudget, ...]] = contextvars.ContextVar(
    "docsum_call_budgets", default=()
)


@contextlib.contextmanager
def call_budget(limit: int | None, what: str, option: str = "--max-calls") -> Iterator[CallBudget | None]:
    """Hold every LLM call made in this context (and tasks started from it)
    to ``limit`` (None: no limit)."""
    if limit is None:
        yield None
        return
    budget = CallBudget(limit, what, option)
    token = _active_budgets.set(_active_budgets.get() + (budget,))
    try:
        with track_calls() as spent:
            budget.spent = spent
            yield budget
    finally:
        _active_budgets.reset(token)


def admit_call(kind: str) -> None:
    """Called by an engine before it sends an LLM call: ``CallLimitError``
    when that call would exceed a budget this context is in. Every budget is
    checked before any is charged, so a refused call costs none of them."""
    budgets = _active_budgets.get()
    for budget in budgets:
        if budget.sent >= budget.limit:
            budget.admit(kind)  # raises, with its account
    for budget in budgets:
        budget.admit(kind)


@contextlib.contextmanager
def track_calls() -> Iterator[list[CallRecord]]:
    """Collect every call made in this context (and tasks started from it)."""
    sink: list[CallRecord] = []
    token = _active_sinks.set(_active_sinks.get() + (sink,))
    try:
        yield sink
    finally:
        _active_sinks.reset(token)


def to_active_scopes(call: CallRecord) -> None:
    """Add `call` to every `track_calls()` scope this context is in."""
    for sink in _active_sinks.get():
        sink.append(call)


@contextlib.asynccontextmanager
async def closing_stream(stream: AsyncIterator[str]) -> AsyncIterator[AsyncIterator[str]]:
    """Use a stream and close it however the block ends. A wrapper generator
    that stops early (the reader of `docsum ask | head` went away) must close
    the stream it wraps, in its own task and context: left to the event loop's
    shutdown, a chain of half-consumed generators is closed all at once and
    prints errors on stderr."""
    try:
        yield stream
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()


def recording_calls(stream: AsyncIterator[str], calls: list[CallRecord]) -> AsyncIterator[str]:
    """`stream`, with every call made while it is drawn also recorded in
    `calls`, and held to the call budgets in force now: a streamed answer's
    final call is sent after the `track_calls()` block that planned it has
    been left, and must still be counted and limited there."""
    return _recording(stream, calls, _active_budgets.get())


async def _recording(
    stream: AsyncIterator[str], calls: list[CallRecord], budgets: tuple[CallBudget, ...]
) -> AsyncIterator[str]:
    """See `recording_calls`.

    The scope is entered and left around every step rather than once around
    the whole loop: a sync caller drives each step as a separate task (each
    with its own copy of the context), so a variable set in one step is gone
    in the next, and resetting a token from another step's context raises
    ValueError. One step always runs in one context. The stream is closed
    however the reader stops (see `closing_stream`)."""
    async with closing_stream(stream):
        iterator = stream.__aiter__()
        while True:
            current = _active_sinks.get()
            token = None if any(sink is calls for sink in current) else _active_sinks.set(current + (calls,))
            held = _active_budgets.get()
            missing = tuple(b for b in budgets if not any(b is h for h in held))
            budget_token = _active_budgets.set(held + missing) if missing else None
            try:
                piece = await iterator.__anext__()
            except StopAsyncIteration:
                return
            finally:
                if budget_token is not None:
                    _active_budgets.reset(budget_token)
                if token is not None:
                    _active_sinks.reset(token)
            yield piece
