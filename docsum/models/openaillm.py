"""The engine for any OpenAI-compatible server, through the `openai` package.

The `openai` package is imported on the first request, not with this module:
a command that sends nothing (no store, an empty one, a refused plan) pays
nothing for it. numpy loads with the first embedding.

Requests go through the client's own `post()` (the way the package documents
for custom requests), not through `client.chat.completions.create()` and
`client.embeddings.create()`: they keep the client's retries, timeouts, auth,
headers and error classes, but skip walking the typed parameters
(`maybe_transform`) and building pydantic models of each reply, which cost
most of docsum's CPU per request, and never import the resource modules. The
reply is read as plain JSON (`replies`), as untrusted as it always was.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import time
import urllib.parse
import weakref
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from docsum.errors import ConfigError, ContextLengthError, LLMError
from docsum.lexical import LEXICAL_EMBED_MODEL, lexical_vectors
from docsum.models.llm import DEFAULT_NUM_OUTPUT, LLM, OVERRUN_FACTOR, LLMMetadata, context_window_for
from docsum.models.localembed import LOCAL_EMBED_MODEL, embed_locally
from docsum.models.prompts import PromptTemplate
from docsum.models.replies import (
    broke_off,
    completion_text,
    content_type,
    delta_texts,
    embedding_rows,
    error_message,
    is_context_error,
    is_timeout,
    member,
    mentions,
    one_line,
    token_count,
)
from docsum.models.tokens import tokenizer_for_model
from docsum.models.transport import deadline_client, is_redirect_refusal
from docsum.sanitize import Redactor, credential_secrets, mask_url, scrub, url_credentials, url_without_credentials
from docsum.schema import CallRecord
from docsum.settings import DEFAULT_LIMITS, Limits, default

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("docsum")

# What the openai package sends for `embeddings.create()` without an explicit
# format, kept: a vector as base64 of little-endian float32 is a quarter of its
# JSON size and decodes without parsing a number at a time.
EMBEDDING_ENCODING = "base64"


def openai_module() -> Any:
    """The `openai` package, imported on first use, with every name docsum
    reads from it checked to be there."""
    import openai

    _names_docsum_reads(openai)
    return openai


def _names_docsum_reads(openai: Any) -> None:
    for name in (
        "AsyncOpenAI",
        "AsyncStream",
        "OpenAIError",
        "APIStatusError",
        "APITimeoutError",
        "APIConnectionError",
        "BadRequestError",
    ):
        getattr(openai, name)


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
        limits: Limits = DEFAULT_LIMITS,
        timeout: float = default("timeout"),
        max_retries: int = default("max_retries"),
        temperature: float = 0.1,
    ) -> None:
        metadata = LLMMetadata(
            model=model,
            context_window=context_window or context_window_for(model),
            num_output=num_output or DEFAULT_NUM_OUTPUT,
            tokenizer=tokenizer_for_model(model),
            engine="openai",
            embed_model=embed_model,
            priced=is_openai(base_url),
        )
        super().__init__(metadata, limits)
        credentials = url_credentials(base_url)
        if credentials and api_key:
            # One Authorization header per request: a user:password in the URL
            # would silently replace the Bearer key (httpx turns it into Basic
            # auth), or the key the password.
            raise ConfigError(
                "the base URL carries a user:password and an API key is set too; "
                "a request can carry only one of them: remove one"
            )
        # The URL's user part travels as a Basic Authorization header that we
        # set ourselves, never inside the URL (where messages could show it).
        self.base_url = url_without_credentials(base_url) if base_url and credentials else base_url
        self._headers: dict[str, str] = {}
        if credentials:
            import base64

            token = base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode("ascii")
            self._headers["Authorization"] = f"Basic {token}"
        # Kept only in memory, never logged, never stored: see `__repr__`.
        self._api_key = api_key or "no-key-needed"
        # Everything a server could echo back that must not reach a terminal,
        # a log or the store.
        self._secrets = Redactor(credential_secrets(api_key, base_url))
        self.timeout = timeout
        self.max_retries = max_retries
        self.temperature = temperature
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._unsupported: set[str] = set()  # request options this server refused

    def __repr__(self) -> str:
        return f"OpenAILLM(model={self.metadata.model!r}, base_url={self._where()!r})"

    def _client(self) -> Any:
        openai = openai_module()  # imported here: the offline path never pays for it
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = openai.AsyncOpenAI(
                api_key=self._api_key,
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=self.max_retries,
                default_headers=self._headers or None,
                http_client=deadline_client(self.timeout, self.limits),
            )
            self._clients[loop] = client
        return client

    def _where(self) -> str:
        if not self.base_url:
            return "api.openai.com"
        # Credentials were taken out of the URL in __init__; this is the
        # second guard, for a URL changed afterwards.
        return mask_url(re.sub(r"//[^/@]*@", "//***@", self.base_url))

    def _translate(self, exc: Exception) -> LLMError:
        return self._scrub(self._translate_raw(exc))

    def _redact(self, text: str) -> str:
        # Some servers and proxies echo the Authorization header back in their
        # error text ("Incorrect API key provided: sk-..."); the key must never
        # reach a terminal or a log. Redact before shortening a message, so a
        # cut cannot leave a prefix of the key behind.
        return self._secrets.redact(text)

    def _message(self, text: str) -> str:
        # An error's text is the HTTP library's or the server's: besides the
        # known secrets, any it spells out (a proxy's echoed Authorization
        # header, a redirect URL with a password) goes (docsum.sanitize.scrub).
        # Not for answers: those forms may be a document's own words.
        return scrub(text, self._secrets)

    def _scrub(self, err: LLMError) -> LLMError:
        text = str(err)
        redacted = self._message(text)
        return err if redacted == text else type(err)(redacted, status=err.status)

    def _translate_raw(self, exc: Exception) -> LLMError:
        openai = openai_module()
        if isinstance(exc, openai.APIStatusError):
            message = one_line(self._message(error_message(exc)))
            if is_context_error(exc):
                return ContextLengthError(
                    f"prompt too long for {self.metadata.model} (docsum sized it for a "
                    f"{self.metadata.context_window}-token window; set --context-window to the model's): {message}",
                    status=exc.status_code,
                )
            return LLMError(f"LLM server {self._where()} answered {exc.status_code}: {message}", status=exc.status_code)
        if isinstance(exc, openai.APITimeoutError):
            return LLMError(
                f"LLM server {self._where()} timed out after {self.timeout:g}s (retried {self.max_retries}x)"
            )
        if isinstance(exc, openai.APIConnectionError):
            cause = one_line(self._message(str(exc.__cause__ or exc)))
            if broke_off(exc.__cause__):
                # The server was reached and began answering: "cannot reach"
                # would send the user chasing a network problem.
                return LLMError(f"connection to LLM server {self._where()} broke off mid-response: {cause}")
            return LLMError(f"cannot reach LLM server {self._where()}: {cause}")
        if isinstance(exc, ValueError):  # a body that is not JSON (json.JSONDecodeError)
            return LLMError(
                f"LLM server {self._where()} sent a malformed response (not JSON: {one_line(self._message(str(exc)))})"
            )
        if is_redirect_refusal(exc):
            return LLMError(self._message(str(exc)))
        return LLMError(f"LLM request failed: {one_line(self._message(str(exc)))}")

    async def apredict(self, template: PromptTemplate, *, json_mode: bool = False, **values: Any) -> str:
        openai = openai_module()
        messages = template.format_messages(**values)
        params = self._params(messages)
        if json_mode and "response_format" not in self._unsupported:
            params["response_format"] = {"type": "json_object"}
        self.admit(template.kind)
        async with self.limiter:
            started = time.monotonic()
            try:
                reply = await self._create(params, "response_format", ("response_format", "json"))
            except (openai.OpenAIError, ValueError) as exc:
                self.record(CallRecord(template.kind, self.metadata.model, 0, 0, time.monotonic() - started, ok=False))
                raise self._translate(exc) from None
        try:
            text = completion_text(reply)
        except ValueError as exc:
            self.record(CallRecord(template.kind, self.metadata.model, 0, 0, time.monotonic() - started, ok=False))
            raise LLMError(f"LLM server {self._where()} sent a malformed response ({exc})") from None
        self._record_usage(template.kind, messages, text, member(reply, "usage"), time.monotonic() - started)
        return self._redact(self._cap(text, template.kind))

    def _cap(self, text: str, kind: str) -> str:
        """`text` cut at OVERRUN_FACTOR times max_tokens, with a warning."""
        limit = self.metadata.num_output * OVERRUN_FACTOR
        # No text is more tokens than its UTF-8 bytes (byte-level BPE): most
        # replies are answered without encoding them.
        if len(text) * 4 <= limit or len(text.encode("utf-8", "surrogatepass")) <= limit:
            return text
        # A token is rarely longer than 16 characters: encode only that much
        # of a huge reply.
        head = text[: limit * 16]
        ids = self.metadata.tokenizer.encode(head)
        if len(ids) <= limit and len(head) == len(text):
            return text
        log.warning(
            "the %s reply from %s ran past %d tokens (max_tokens is %d); kept its first %d tokens",
            kind,
            self._where(),
            limit,
            self.metadata.num_output,
            limit,
        )
        return self.metadata.tokenizer.decode(ids[:limit])

    def _params(self, messages: list[dict[str, str]], **extra: Any) -> dict[str, Any]:
        return {
            "model": self.metadata.model,
            "messages": messages,
            "max_tokens": self.metadata.num_output,
            "temperature": self.temperature,
            **extra,
        }

    async def _create(self, params: dict[str, Any], option: str, words: tuple[str, ...]) -> Any:
        """One chat request: the reply's JSON, or for `stream` in `params` the
        stream of its chunks' JSON. Some local servers reject
        `response_format` or `stream_options`: then ask again without that
        option (and remember not to send it), parsing JSON tolerantly instead.
        Only when the error is about that option: any other 400 (bad model
        name, prompt too long) must surface, not silently switch a feature
        off."""
        openai = openai_module()
        try:
            return await self._post_chat(params)
        except openai.BadRequestError as exc:
            if option not in params or not mentions(exc, *words) or is_context_error(exc):
                raise
            self._unsupported.add(option)
            params.pop(option)
            return await self._post_chat(params)

    async def _post_chat(self, params: dict[str, Any]) -> Any:
        if params.get("stream"):
            # The package's SSE reader (error events, [DONE], transport errors
            # as APIConnectionError/APITimeoutError) with each chunk's JSON
            # handed over as it is: `object` means no model is built.
            return await self._client().post(
                "/chat/completions",
                body=params,
                options=request_options(),
                cast_to=object,
                stream=True,
                stream_cls=chunk_stream_class(),
            )
        return await self._post_json("/chat/completions", params)

    async def _post_json(self, path: str, body: dict[str, Any]) -> Any:
        """The JSON the server answers a request to `path` with; a body that
        is not JSON is a ValueError, reported as a malformed response."""
        import httpx2

        response = await self._client().post(path, body=body, options=request_options(), cast_to=httpx2.Response)
        return response.json()

    def _record_usage(self, kind: str, messages: list[dict[str, str]], text: str, usage: Any, seconds: float) -> None:
        prompt_tokens = token_count(member(usage, "prompt_tokens"))
        completion_tokens = token_count(member(usage, "completion_tokens") or 0)
        if prompt_tokens is not None and completion_tokens is not None:
            self.record(CallRecord(kind, self.metadata.model, prompt_tokens, completion_tokens, seconds))
        else:
            # No usage, or figures that are not token counts (NaN, 1e30,
            # "abc", negative): count locally rather than trust or crash.
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

    async def astream(self, template: PromptTemplate, **values: Any) -> AsyncIterator[str]:  # noqa: C901 (listed when the check came in: simplify, then drop this)
        openai = openai_module()
        messages = template.format_messages(**values)
        params = self._params(messages, stream=True)
        if "stream_options" not in self._unsupported:
            params["stream_options"] = {"include_usage": True}
        parts: list[str] = []
        usage: Any = None
        opened = False
        shown = self._secrets.stream()  # a key echoed back may arrive split across pieces
        # Counted piece by piece (a little above the count of the whole text)
        # so a server streaming past max_tokens is cut off.
        limit = self.metadata.num_output * OVERRUN_FACTOR
        received = 0
        self.admit(template.kind)
        async with self.limiter, contextlib.AsyncExitStack() as stack:
            started = time.monotonic()
            try:
                stream = await self._create(params, "stream_options", ("stream_options", "include_usage"))
                opened = True
                chunks = 0
                # Closing the response when the reader stops early: a stream
                # left open is closed at loop shutdown, noisily.
                stack.push_async_callback(stream.close)
                async for chunk in stream:
                    chunks += 1
                    if member(chunk, "usage") is not None:
                        usage = chunk["usage"]
                    for piece in delta_texts(chunk):
                        parts.append(piece)
                        received += self.metadata.tokenizer.count(piece)
                        safe = shown.feed(piece)
                        if safe:
                            yield safe
                    if received > limit:
                        log.warning(
                            "the %s reply from %s ran past %d tokens (max_tokens is %d); the rest was not read",
                            template.kind,
                            self._where(),
                            limit,
                            self.metadata.num_output,
                        )
                        break
                if chunks == 0:
                    # JSON (or a page, or nothing) where a stream was asked
                    # for: a fault of the server, not an empty answer.
                    raise LLMError(
                        f"LLM server {self._where()} answered a streaming request without a stream "
                        f"(no events; content type {content_type(stream) or 'missing'})"
                    )
                rest = shown.flush()
                if rest:
                    yield rest
            except LLMError:
                self.record(CallRecord(template.kind, self.metadata.model, 0, 0, time.monotonic() - started, ok=False))
                raise
            except (openai.OpenAIError, ValueError, OSError) as exc:
                self.record(CallRecord(template.kind, self.metadata.model, 0, 0, time.monotonic() - started, ok=False))
                if opened and (is_timeout(exc) or (exc.__cause__ is not None and is_timeout(exc.__cause__))):
                    raise LLMError(
                        f"stream from {self._where()} did not finish within {self.timeout:g}s "
                        f"(DOCSUM_TIMEOUT) after {len(parts)} pieces"
                    ) from None
                if opened and isinstance(exc, openai.APIConnectionError):
                    # The server was reached and began answering; "cannot reach"
                    # would send the user chasing a network problem.
                    raise self._scrub(
                        LLMError(
                            f"stream from {self._where()} broke off after {len(parts)} pieces: "
                            f"{one_line(self._message(str(exc.__cause__ or exc)))}"
                        )
                    ) from None
                raise self._translate(exc) from None
            except Exception as exc:  # httpx2 transport errors mid-stream
                self.record(CallRecord(template.kind, self.metadata.model, 0, 0, time.monotonic() - started, ok=False))
                if is_timeout(exc):
                    raise LLMError(
                        f"stream from {self._where()} did not finish within {self.timeout:g}s "
                        f"(DOCSUM_TIMEOUT) after {len(parts)} pieces"
                    ) from None
                raise self._scrub(
                    LLMError(
                        f"stream from {self._where()} broke off: {one_line(self._message(str(exc))) or type(exc).__name__}"
                    )
                ) from None
        self._record_usage(template.kind, messages, "".join(parts), usage, time.monotonic() - started)

    async def aembed(self, texts: list[str]) -> np.ndarray:  # noqa: C901 (listed when the check came in: simplify, then drop this)
        if self.metadata.embed_model == LOCAL_EMBED_MODEL:
            return await embed_locally(texts)
        if self.metadata.embed_model == LEXICAL_EMBED_MODEL:
            return lexical_vectors(texts)
        import numpy as np

        openai = openai_module()
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        rows: list[np.ndarray] = []
        batch = 64
        for start in range(0, len(texts), batch):
            chunk = [t if t.strip() else " " for t in texts[start : start + batch]]
            body = {"model": self.metadata.embed_model, "input": chunk, "encoding_format": EMBEDDING_ENCODING}
            async with self.limiter:
                began = time.monotonic()
                try:
                    reply = await self._post_json("/embeddings", body)
                except (openai.OpenAIError, ValueError) as exc:
                    self.record(
                        CallRecord("embed", self.metadata.embed_model, 0, 0, time.monotonic() - began, ok=False)
                    )
                    raise self._translate(exc) from None
            try:
                vectors = embedding_rows(reply)
            except ValueError:
                raise LLMError(
                    f"embedding server {self._where()} sent a malformed response (no list of vectors)"
                ) from None
            if not all(np.isfinite(v).all() for v in vectors):
                # One NaN would poison every similarity computed against it.
                raise LLMError(f"embedding server {self._where()} sent vectors with NaN or infinite values")
            if len(vectors) != len(chunk):
                raise LLMError(f"embedding server returned {len(vectors)} vectors for {len(chunk)} texts")
            rows.extend(vectors)
            tokens = token_count(member(member(reply, "usage"), "prompt_tokens"))
            if tokens is None:
                tokens = sum(self.metadata.tokenizer.count(t) for t in chunk)
            self.record(CallRecord("embed", self.metadata.embed_model, tokens, 0, time.monotonic() - began))
        dims = {len(r) for r in rows}
        if len(dims) != 1:
            raise LLMError(f"embedding server returned vectors of mixed sizes {sorted(dims)}")
        # In float64: squaring components near float32's limit overflows.
        matrix = normalise_rows(np.asarray(rows, dtype=np.float64))
        if not np.isfinite(matrix).all():
            raise LLMError(f"embedding server {self._where()} sent vectors that cannot be normalised")
        return matrix

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        client = self._clients.pop(loop, None)
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()


def request_options() -> dict[str, Any]:
    """The options of one request: the auth the package's chat and embeddings
    resources ask for (the API key as a Bearer token, not the admin key)."""
    return {"security": {"bearer_auth": True}}


@functools.cache
def chunk_stream_class() -> Any:
    return openai_module().AsyncStream[object]


def is_openai(base_url: str | None) -> bool:
    """Whether requests go to OpenAI itself (whose prices docsum knows)."""
    if not base_url:
        return True
    try:
        host = urllib.parse.urlsplit(base_url).hostname or ""
    except ValueError:
        return False
    return host == "api.openai.com"


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    """Each row scaled to length 1 (a zero row stays zero), as float32."""
    import numpy as np

    matrix = np.asarray(matrix)
    if matrix.dtype != np.float64:
        matrix = matrix.astype(np.float32)
    if matrix.ndim == 1:
        matrix = matrix.reshape(1, -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (matrix / norms).astype(np.float32)
