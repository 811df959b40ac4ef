"""The HTTP client under the `openai` package: what docsum adds to httpx's
own timeouts so that no server, slow or hostile, holds a request forever or
fills memory with its reply, and the rule that a redirect never sends a
request (its body holds the question and the documents' text) to another
origin than the server it was written for."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from typing import Any

from docsum.settings import Limits

# The most docsum reads of one reply. The largest honest one is an embedding
# request's (64 texts; at 4,096 dimensions about 1.4 MiB in base64, 6 MiB
# from a server that ignores base64 and writes decimals), so this leaves
# room for any model. A server sending more is broken or hostile, and the
# deadline alone bounds only how long it may send, not how much memory.
MAX_REPLY_BYTES = 128 * 1024 * 1024


def deadline_client(seconds: float, limits: Limits) -> Any:  # noqa: C901 (listed when the check came in: simplify, then drop this)
    """An HTTP client for the openai package whose every request, body
    included, must finish within `seconds`: httpx's own timeout bounds only
    each wait for the next bytes, so a server trickling one byte a second (or
    streaming forever) would hold docsum indefinitely. Running out is a read
    timeout, which the openai client retries like any other. A reply past
    `MAX_REPLY_BYTES` is a protocol error, as a connection broken off is."""
    import httpx2

    class DeadlineStream(httpx2.AsyncByteStream):
        def __init__(self, inner: Any, deadline: float, request: Any) -> None:
            self.inner, self.deadline, self.request = inner, deadline, request

        async def __aiter__(self) -> AsyncIterator[bytes]:
            chunks = self.inner.__aiter__()
            received = 0
            while True:
                try:
                    async with asyncio.timeout_at(self.deadline):
                        chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise httpx2.ReadTimeout(
                        f"no complete response within {seconds:g}s", request=self.request
                    ) from None
                received += len(chunk)
                if received > MAX_REPLY_BYTES:
                    raise httpx2.RemoteProtocolError(
                        f"the reply passed {MAX_REPLY_BYTES // 2**20} MiB, more than any answer docsum asks for; "
                        "the rest was not read",
                        request=self.request,
                    )
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

    class DeadlineTransport(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            pool = httpx2.Limits(max_connections=limits.connections, max_keepalive_connections=limits.keepalive)
            self.inner = httpx2.AsyncHTTPTransport(limits=pool)

        async def handle_async_request(self, request: Any) -> Any:
            deadline = asyncio.get_running_loop().time() + seconds
            try:
                async with asyncio.timeout_at(deadline):
                    response = await self.inner.handle_async_request(request)
            except TimeoutError:
                raise httpx2.ReadTimeout(f"no response within {seconds:g}s", request=request) from None
            response.stream = DeadlineStream(response.stream, deadline, request)
            return response

        async def aclose(self) -> None:
            await self.inner.aclose()

    async def refuse_other_origins(response: Any) -> None:
        # Called for every response before httpx follows it. httpx drops only
        # the Authorization header when a redirect leaves the origin and
        # re-sends the body (a 307/308 keeps the method): the passages would
        # go to whichever server the Location names.
        if not response.has_redirect_location:
            return
        here = response.request.url
        there = here.join(response.headers["location"])
        if origin(here) != origin(there):
            await response.aclose()
            raise redirect_refused(response.status_code, here, there)

    return httpx2.AsyncClient(
        transport=DeadlineTransport(),
        timeout=seconds,
        follow_redirects=True,
        event_hooks={"response": [refuse_other_origins]},
    )


def origin(url: Any) -> tuple[str, str, int | None]:
    """(scheme, host, port) of an httpx URL, the port filled in for the scheme."""
    default = {"http": 80, "https": 443}.get(url.scheme)
    return (url.scheme, url.host, url.port or default)


def _origin_text(url: Any) -> str:
    scheme, host, port = origin(url)
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}:{port}"


@functools.cache
def _refusal_class() -> type[Exception]:
    """An openai.OpenAIError, which the openai client raises as it is instead
    of retrying (a retry would ask the same server again for the same
    redirect). Made on first use: openai is imported by the first request."""
    import openai

    class RedirectRefused(openai.OpenAIError):
        pass

    return RedirectRefused


def redirect_refused(status: int, here: Any, there: Any) -> Exception:
    """The error for a redirect to another origin."""
    return _refusal_class()(
        f"LLM server {_origin_text(here)} answered {status}, a redirect to {_origin_text(there)}; "
        "docsum does not send your question and passages to another server: "
        "set --base-url to the server that should answer"
    )


def is_redirect_refusal(exc: BaseException) -> bool:
    """`exc` is the error `redirect_refused` made: its message is whole and
    says what to do, so it is shown as it is, never cut."""
    return isinstance(exc, _refusal_class())
