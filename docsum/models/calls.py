"""Counting what the engines spend: every request an engine makes is
recorded on the engine and on every active `track_calls()` scope, so a
synthesizer can report exactly what its answer cost even while other
documents are being summarized concurrently."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator, Iterator

from docsum.schema import CallRecord

_active_sinks: contextvars.ContextVar[tuple[list[CallRecord], ...]] = contextvars.ContextVar(
    "docsum_call_sinks", default=()
)


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


async def recording_calls(stream: AsyncIterator[str], calls: list[CallRecord]) -> AsyncIterator[str]:
    """`stream`, with every call made while it is drawn also recorded in
    `calls`: a streamed answer's final call finishes after the `track_calls()`
    block that planned it has been left, and must still be counted there.

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
            try:
                piece = await iterator.__anext__()
            except StopAsyncIteration:
                return
            finally:
                if token is not None:
                    _active_sinks.reset(token)
            yield piece
