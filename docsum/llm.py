"""The one LLM interface the build, the retrievers and the synthesizers use.

Two engines implement it: `OpenAILLM` (any OpenAI-compatible server, through the
`openai` package) and `ExtractiveLLM` (offline, deterministic, no model weights;
see `docsum.extractive`). Both are async first; `predict` is a sync convenience.

Every request is recorded as a `CallRecord` on the engine and on every active
`track_calls()` scope, so a synthesizer can report exactly what its answer cost
even while other documents are being summarized concurrently.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import contextvars
import logging
import re
import time
import weakref
from dataclasses import dataclass
from typing import Any, AsyncIterator, Iterator

import numpy as np

from docsum.errors import ContextLengthError, LLMError
from docsum.lexical import LEXICAL_EMBED_MODEL, lexical_vectors
from docsum.localembed import LOCAL_EMBED_MODEL, embed_locally
from docsum.prompts import PromptTemplate
from docsum.schema import CallRecord
from docsum.tokens import Tokenizer, tokenizer_for_model

log = logging.getLogger("docsum")

DEFAULT_CONTEXT_WINDOW = 3900  # the reference system's default when a model is unknown
DEFAULT_NUM_OUTPUT = 256
DEFAULT_CONCURRENCY = 8
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_RETRIES = 4

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

# Tokens a chat message costs beyond its content (role markers); the OpenAI
# cookbook's figure for current chat models, plus the reply primer.
PER_MESSAGE_TOKENS = 4
REPLY_PRIMER_TOKENS = 3


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

    @property
    def extractive(self) -> bool:
        return self.engine == "extractive"


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


class LLM(abc.ABC):
    """Complete, stream and embed; count what it costs; bound requests in flight."""

    metadata: LLMMetadata

    def __init__(self, metadata: LLMMetadata, concurrency: int = DEFAULT_CONCURRENCY) -> None:
        self.metadata = metadata
        self.concurrency = max(1, concurrency)
        self.calls: list[CallRecord] = []
        # One limit per event loop: a semaphore cannot be shared across loops, and
        # the sync wrappers run short-lived loops of their own.
        self._limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    # -- accounting -------------------------------------------------------
    def record(self, call: CallRecord) -> None:
        self.calls.append(call)
        for sink in _active_sinks.get():
            sink.append(call)

    @property
    def limiter(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        sem = self._limiters.get(loop)
        if sem is None:
            sem = self._limiters[loop] = asyncio.Semaphore(self.concurrency)
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


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix.reshape(1, -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


class OpenAILLM(LLM):
    """Any server that speaks the OpenAI protocol: OpenAI itself, Ollama, vLLM,
    llama.cpp's server, LM Studio. A base URL alone selects a keyless server."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None,
        embed_model: str = "text-embedding-3-small",
        context_window: int | None = None,
        num_output: int | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        temperature: float = 0.1,
    ) -> None:
        metadata = LLMMetadata(
            model=model,
            context_window=context_window or context_window_for(model),
            num_output=num_output or DEFAULT_NUM_OUTPUT,
            tokenizer=tokenizer_for_model(model),
            engine="openai",
            embed_model=embed_model,
        )
        super().__init__(metadata, concurrency)
        self.base_url = base_url
        # Kept only in memory, never logged, never stored: see `__repr__`.
        self._api_key = api_key or "no-key-needed"
        self.timeout = timeout
        self.max_retries = max_retries
        self.temperature = temperature
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._unsupported: set[str] = set()  # request options this server refused

    def __repr__(self) -> str:
        return f"OpenAILLM(model={self.metadata.model!r}, base_url={self._where()!r})"

    def _client(self) -> Any:
        import openai  # imported here: the offline path never pays for it

        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = openai.AsyncOpenAI(
                api_key=self._api_key,
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=self.max_retries,
            )
            self._clients[loop] = client
        return client

    def _where(self) -> str:
        if not self.base_url:
            return "api.openai.com"
        # A URL can carry credentials (https://user:secret@host/v1): never show them.
        return re.sub(r"//[^/@]*@", "//***@", self.base_url)

    def _translate(self, exc: Exception) -> LLMError:
        return self._scrub(self._translate_raw(exc))

    def _redact(self, text: str) -> str:
        # Some servers and proxies echo the Authorization header back in their
        # error text ("Incorrect API key provided: sk-..."); the key must never
        # reach a terminal or a log. Redact before shortening a message, so a
        # cut cannot leave a prefix of the key behind.
        if self._api_key and self._api_key != "no-key-needed":
            return text.replace(self._api_key, "***")
        return text

    def _scrub(self, err: LLMError) -> LLMError:
        text = str(err)
        redacted = self._redact(text)
        return err if redacted == text else type(err)(redacted, status=err.status)

    def _translate_raw(self, exc: Exception) -> LLMError:
        import openai

        if isinstance(exc, openai.APIStatusError):
            message = _one_line(self._redact(_error_message(exc)))
            if _is_context_error(exc):
                return ContextLengthError(
                    f"prompt too long for {self.metadata.model} (docsum sized it for a "
                    f"{self.metadata.context_window}-token window; set --context-window to the model's): {message}",
                    status=exc.status_code,
                )
            return LLMError(f"LLM server {self._where()} answered {exc.status_code}: {message}", status=exc.status_code)
        if isinstance(exc, openai.APITimeoutError):
            return LLMError(f"LLM server {self._where()} timed out after {self.timeout:g}s (retried {self.max_retries}x)")
        if isinstance(exc, openai.APIConnectionError):
            cause = _one_line(self._redact(str(exc.__cause__ or exc)))
            if _broke_off(exc.__cause__):
                # The server was reached and began answering: "cannot reach"
                # would send the user chasing a network problem.
                return LLMError(f"connection to LLM server {self._where()} broke off mid-response: {cause}")
            return LLMError(f"cannot reach LLM server {self._where()}: {cause}")
        if isinstance(exc, ValueError):  # a body that is not JSON (json.JSONDecodeError)
            return LLMError(f"LLM server {self._where()} sent a malformed response (not JSON: {_one_line(self._redact(str(exc)))})")
        return LLMError(f"LLM request failed: {_one_line(self._redact(str(exc)))}")

    async def apredict(self, template: PromptTemplate, *, json_mode: bool = False, **values: Any) -> str:
        import openai

        messages = template.format_messages(**values)
        params = self._params(messages)
        if json_mode and "response_format" not in self._unsupported:
            params["response_format"] = {"type": "json_object"}
        async with self.limiter:
            started = time.monotonic()
            try:
                resp = await self._create(params, "response_format", ("response_format", "json"))
            except (openai.OpenAIError, ValueError) as exc:
                self.record(CallRecord(template.kind, self.metadata.model, 0, 0, time.monotonic() - started, ok=False))
                raise self._translate(exc) from None
        choices = getattr(resp, "choices", None)
        if not isinstance(choices, list) or not choices or getattr(choices[0], "message", None) is None:
            # JSON, but not a chat completion (an error page, a proxy's own
            # reply): a fault of the server, not an empty answer.
            self.record(CallRecord(template.kind, self.metadata.model, 0, 0, time.monotonic() - started, ok=False))
            raise LLMError(f"LLM server {self._where()} sent a malformed response (a completion without choices)")
        text = choices[0].message.content or ""
        self._record_usage(template.kind, messages, text, getattr(resp, "usage", None), time.monotonic() - started)
        return text

    def _params(self, messages: list[dict[str, str]], **extra: Any) -> dict[str, Any]:
        return {
            "model": self.metadata.model,
            "messages": messages,
            "max_tokens": self.metadata.num_output,
            "temperature": self.temperature,
            **extra,
        }

    async def _create(self, params: dict[str, Any], option: str, words: tuple[str, ...]) -> Any:
        """One chat request. Some local servers reject `response_format` or
        `stream_options`: then ask again without that option (and remember not
        to send it), parsing JSON tolerantly instead. Only when the error is
        about that option: any other 400 (bad model name, prompt too long) must
        surface, not silently switch a feature off."""
        import openai

        try:
            return await self._client().chat.completions.create(**params)
        except openai.BadRequestError as exc:
            if option not in params or not _mentions(exc, *words) or _is_context_error(exc):
                raise
            self._unsupported.add(option)
            params.pop(option)
            return await self._client().chat.completions.create(**params)

    def _record_usage(self, kind: str, messages: list[dict[str, str]], text: str, usage: Any, seconds: float) -> None:
        if usage is not None and getattr(usage, "prompt_tokens", None) is not None:
            self.record(
                CallRecord(kind, self.metadata.model, int(usage.prompt_tokens), int(usage.completion_tokens or 0), seconds)
            )
        else:
            self.record(
                CallRecord(
                    kind,
                    self.metadata.model,
                    self.count_messages(messages),
                    self.metadata.tokenizer.count(text),
                    seconds,
                    counted_locally=True,
                )
            )

    async def astream(self, template: PromptTemplate, **values: Any) -> AsyncIterator[str]:
        import openai

        messages = template.format_messages(**values)
        params = self._params(messages, stream=True)
        if "stream_options" not in self._unsupported:
            params["stream_options"] = {"include_usage": True}
        parts: list[str] = []
        usage: Any = None
        opened = False
        async with self.limiter:
            started = time.monotonic()
            try:
                stream = await self._create(params, "stream_options", ("stream_options", "include_usage"))
                opened = True
                async for chunk in stream:
                    if getattr(chunk, "usage", None) is not None:
                        usage = chunk.usage
                    for choice in getattr(chunk, "choices", None) or []:
                        piece = getattr(choice.delta, "content", None) if choice.delta else None
                        if piece:
                            parts.append(piece)
                            yield piece
            except (openai.OpenAIError, ValueError, OSError) as exc:
                self.record(CallRecord(template.kind, self.metadata.model, 0, 0, time.monotonic() - started, ok=False))
                if opened and isinstance(exc, openai.APIConnectionError):
                    # The server was reached and began answering; "cannot reach"
                    # would send the user chasing a network problem.
                    raise self._scrub(
                        LLMError(
                            f"stream from {self._where()} broke off after {len(parts)} pieces: "
                            f"{_one_line(self._redact(str(exc.__cause__ or exc)))}"
                        )
                    ) from None
                raise self._translate(exc) from None
            except Exception as exc:  # httpx2 transport errors mid-stream
                self.record(CallRecord(template.kind, self.metadata.model, 0, 0, time.monotonic() - started, ok=False))
                raise self._scrub(
                    LLMError(f"stream from {self._where()} broke off: {_one_line(self._redact(str(exc))) or type(exc).__name__}")
                ) from None
        self._record_usage(template.kind, messages, "".join(parts), usage, time.monotonic() - started)

    async def aembed(self, texts: list[str]) -> np.ndarray:
        if self.metadata.embed_model == LOCAL_EMBED_MODEL:
            return await embed_locally(texts)
        import openai

        if self.metadata.embed_model == LEXICAL_EMBED_MODEL:
            return lexical_vectors(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        rows: list[np.ndarray] = []
        batch = 64
        for start in range(0, len(texts), batch):
            chunk = [t if t.strip() else " " for t in texts[start : start + batch]]
            async with self.limiter:
                began = time.monotonic()
                try:
                    resp = await self._client().embeddings.create(model=self.metadata.embed_model, input=chunk)
                except (openai.OpenAIError, ValueError) as exc:
                    self.record(CallRecord("embed", self.metadata.embed_model, 0, 0, time.monotonic() - began, ok=False))
                    raise self._translate(exc) from None
            try:
                data = sorted(resp.data, key=lambda d: d.index)
                vectors = [np.asarray(d.embedding, dtype=np.float32) for d in data]
                if any(v.ndim != 1 or v.size == 0 for v in vectors):
                    raise ValueError("not a list of vectors")
            except (TypeError, ValueError, AttributeError):
                raise LLMError(f"embedding server {self._where()} sent a malformed response (no list of vectors)") from None
            if len(data) != len(chunk):
                raise LLMError(f"embedding server returned {len(data)} vectors for {len(chunk)} texts")
            rows.extend(vectors)
            used = getattr(getattr(resp, "usage", None), "prompt_tokens", None)
            tokens = int(used) if used is not None else sum(self.metadata.tokenizer.count(t) for t in chunk)
            self.record(CallRecord("embed", self.metadata.embed_model, tokens, 0, time.monotonic() - began))
        dims = {len(r) for r in rows}
        if len(dims) != 1:
            raise LLMError(f"embedding server returned vectors of mixed sizes {sorted(dims)}")
        return normalise_rows(np.asarray(rows, dtype=np.float32))

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        client = self._clients.pop(loop, None)
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()


def _error_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(getattr(exc, "message", "") or exc)


def _is_context_error(exc: Exception) -> bool:
    """A 400/413 saying the prompt is longer than the model's window."""
    if getattr(exc, "status_code", None) not in (400, 413):
        return False
    lowered = _error_message(exc).lower()
    return bool(
        "context" in lowered and ("length" in lowered or "window" in lowered)
        or "maximum context" in lowered
        or "too many tokens" in lowered
        or getattr(exc, "code", None) == "context_length_exceeded"
    )


def _broke_off(cause: BaseException | None) -> bool:
    """A transport error after the connection was made (the peer closed it
    mid-response), as opposed to one that never connected."""
    names = {k.__name__ for k in type(cause).__mro__} if cause is not None else set()
    return bool(names & {"ProtocolError", "ReadError"})


def _mentions(exc: Exception, *words: str) -> bool:
    text = (_error_message(exc) + " " + str(exc)).lower()
    return any(w in text for w in words)


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
