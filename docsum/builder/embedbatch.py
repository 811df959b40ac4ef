"""Summary embeddings for a build, sent in shared requests.

Each document is committed together with its summary's embedding, so a crash
never leaves a summary without a vector. Sending one embedding request per
summary kept that simple but cost a round trip per document: at 1,000 documents
that is 1,000 requests where a batching client sends 20, and on a slow or
single-slot server each one holds up the next summary.

`SummaryEmbedder` keeps the per-document contract (a document awaits its own
vector and commits it with its summary) while documents that finish at about
the same time share one request. A waiting summary is sent when

- every document the build is working on is waiting for its vector or has it
  on the way in an earlier request (nobody else can join soon), or
- the embedder is full: `capacity` documents are waiting or in a request, or
- it has waited `window` seconds (a slow neighbour does not hold it up long).

A document waiting for its vector gives up its place among the documents
being summarized (the `release` callback), so the LLM keeps summarizing the
next ones meanwhile; `capacity` bounds how many such documents are held in
memory on top of those.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from docsum.errors import ContextLengthError, LLMError
from docsum.models.llm import LLM

# A 4xx other than these says something about the input (too long, empty,
# refused): worth retrying each text alone so one bad summary does not cost its
# neighbours their vectors. Auth, rate-limit and server errors would fail alone
# just the same.
_NOT_ABOUT_INPUT = {401, 403, 404, 408, 409, 429}


@dataclass
class _Waiting:
    text: str
    result: asyncio.Future[np.ndarray] = field(repr=False)
    context: contextvars.Context = field(repr=False)  # the waiting document's (its call-tracking scopes)


class SummaryEmbedder:
    """Embeds summaries for concurrent documents in shared requests.

    Callers bracket each document with `enter()`/`leave()` so the embedder
    knows how many documents could still join a batch. Make one per run: it
    holds an asyncio semaphore bound to the run's event loop."""

    def __init__(self, llm: LLM, capacity: int, window: float = 0.5) -> None:
        self.llm = llm
        self.capacity = max(1, capacity)
        self.window = window
        self.active = 0  # documents between enter() and leave()
        self.held = 0  # documents waiting for a vector or in a request
        self._room = asyncio.Semaphore(self.capacity)
        self._waiting: list[_Waiting] = []
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def enter(self) -> None:
        self.active += 1

    def leave(self) -> None:
        self.active -= 1
        self._maybe_send()

    async def embed(self, text: str, release: Callable[[], None] | None = None) -> np.ndarray:
        """This text's vector (L2-normalised); raises LLMError as `aembed` does.
        `release` is called once the text has a place in a batch."""
        await self._room.acquire()
        self.held += 1
        try:
            if release is not None:
                release()
            loop = asyncio.get_running_loop()
            waiting = _Waiting(text, loop.create_future(), contextvars.copy_context())
            self._waiting.append(waiting)
            if self._timer is None:
                self._timer = loop.call_later(self.window, self._send)
            self._maybe_send()
            return await waiting.result
        finally:
            self.held -= 1
            self._room.release()

    def _maybe_send(self) -> None:
        # Every document being worked on is waiting for its vector, or already
        # has it on the way (in `held`, not in `_waiting`): none can join.
        if self._waiting and (self.held >= self.active or self.held >= self.capacity):
            self._send()

    def _send(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._waiting = self._waiting, []
        if not batch:
            return
        # The request runs in the first waiting document's context: its usage
        # lands in that document's call-tracking scope (still open, as the
        # document awaits its vector) and is committed in its transaction,
        # whoever triggered the send (a timer, another document leaving).
        task = asyncio.get_running_loop().create_task(self._request(batch), context=batch[0].context)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _request(self, batch: list[_Waiting]) -> None:
        try:
            vectors = await self.llm.aembed([w.text for w in batch])
        except Exception as exc:  # noqa: BLE001 - each waiting document decides what a failure means
            if len(batch) > 1 and isinstance(exc, LLMError) and _about_input(exc):
                for one in batch:
                    await self._request([one])
                return
            for w in batch:
                if not w.result.done():
                    w.result.set_exception(exc)
            return
        for w, vector in zip(batch, vectors, strict=True):
            if not w.result.done():
                w.result.set_result(vector)


def _about_input(exc: LLMError) -> bool:
    if isinstance(exc, ContextLengthError):
        return True
    return exc.status is not None and 400 <= exc.status < 500 and exc.status not in _NOT_ABOUT_INPUT
