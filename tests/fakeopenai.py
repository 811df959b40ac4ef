"""A scriptable OpenAI-protocol HTTP server for tests.

docsum talks to "any OpenAI-compatible server", so its tests must exercise the
real client stack (openai -> httpx2 -> sockets) rather than a patched client:
retries, timeouts, SSE parsing and keep-alive bugs only show up on the wire.
This module starts a real HTTP/1.1 server on 127.0.0.1 (port 0, so parallel
test runs never collide) in a daemon thread, answers like OpenAI does, and
records every request so tests can assert on prompts, headers and concurrency.

Standard library only, so the fake can never mask or depend on a bug in the
packages docsum itself uses.

Typical use::

    with FakeOpenAI() as fake:
        fake.script("first answer", Reply(status=429, headers={"Retry-After": "0"}))
        client = openai.OpenAI(base_url=fake.base_url, api_key="test")
        ...
        assert fake.chat_requests()[0].prompt.startswith("Summarize")

Which reply a chat/completions request gets, in order of precedence:
 1. the next reply queued with `script()` (FIFO, shared by both endpoints);
 2. the `responder` callable given to the constructor (called with the body);
 3. the default: "ANSWER: " + the first 12 words of the last user message
    (or of the prompt, for /completions).
A `Reply` whose `text` is None (e.g. `Reply(delay=0.2)`) still gets the
default text, so tests can add a delay or headers without inventing an answer.

Embeddings use `script_embeddings()` first, then a deterministic hashed
bag-of-words vector, so that similar texts get similar vectors and retrieval
tests behave predictably.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import json
import math
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAI", "RecordedRequest", "Reply", "default_embedding", "word_count"]

# A fixed "created" timestamp keeps responses byte-identical between runs,
# which makes golden-file comparisons possible.
_CREATED = 1_700_000_000
_MODELS = ("fake-chat", "fake-embed")
_WORD_RE = re.compile(r"[a-z0-9]+")
# One streamed delta per word, with surrounding whitespace kept, so that
# concatenating the deltas reproduces the text exactly.
_PIECE_RE = re.compile(r"\s*\S+\s*")

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


@dataclass
class Reply:
    """What the fake sends for one request. Every field has a harmless default."""

    text: str | None = None  # assistant content / completion text; None -> default answer
    status: int = 200  # non-200: an OpenAI-style error JSON body
    error_message: str = "fake error"
    error_code: str | None = None  # e.g. "context_length_exceeded"
    headers: dict[str, str] = field(default_factory=dict)  # e.g. {"Retry-After": "0"}
    delay: float = 0.0  # seconds to wait before answering
    drop_mid_stream: bool = False  # send part of the body, then close the socket
    raw_body: bytes | None = None  # sent verbatim instead of the generated body
    usage: dict[str, Any] | None = None  # replaces the computed usage
    omit_usage: bool = False  # no usage field at all
    embedding_dim: int | None = None  # embeddings: vector length override
    echo_header: str | None = None  # the answer is this request header's value (e.g. "authorization")
    trickle: float = 0.0  # seconds between bytes of a body, or between events of a stream
    endless: bool = False  # a stream that never ends: a delta every `trickle` (or 10 ms) until stop()
    content_type: str | None = None  # with raw_body: the Content-Type to send (default: by the request)


@dataclass
class RecordedRequest:
    """One API request as the server saw it.

    `headers` keys are lower-cased because HTTP header names are
    case-insensitive and tests should not depend on the client's spelling.
    `started`/`finished` are `time.monotonic()` values; `finished` stays 0.0
    until the response is complete on the server's side (set just before its
    last bytes are written, or when the connection failed).
    """

    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    started: float
    finished: float = 0.0
    method: str = "POST"
    raw: bytes = b""  # the undecoded request body (useful when it was not JSON)

    @property
    def messages(self) -> list[dict[str, Any]]:
        msgs = self.body.get("messages")
        return msgs if isinstance(msgs, list) else []

    @property
    def prompt(self) -> str:
        """All text the model was asked to read, as one string.

        chat: every message's content joined with newlines; completions: the
        prompt; embeddings: the inputs joined with newlines.
        """
        if self.path.endswith("/chat/completions"):
            return "\n".join(_content_text(m.get("content")) for m in self.messages if isinstance(m, dict))
        if self.path.endswith("/completions"):
            return _prompt_text(self.body.get("prompt", ""))
        if self.path.endswith("/embeddings"):
            return "\n".join(_embedding_inputs(self.body.get("input")) or [])
        return ""


# ---------------------------------------------------------------------------
# pure helpers (also handy for tests that want to predict what the fake says)
# ---------------------------------------------------------------------------


def _content_text(content: Any) -> str:
    """Message content may be a string or a list of typed parts (vision API)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return str(content)


def _prompt_text(prompt: Any) -> str:
    # /completions accepts a string, a list of strings, or token id lists.
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        return "\n".join(p if isinstance(p, str) else " ".join(map(str, p)) for p in prompt)
    return str(prompt)


def _embedding_inputs(inp: Any) -> list[str] | None:
    """The texts to embed, or None when `input` has a shape OpenAI rejects."""
    if isinstance(inp, str):
        return [inp]
    if isinstance(inp, list):
        if inp and all(isinstance(x, int) for x in inp):
            return [" ".join(map(str, inp))]  # a single pre-tokenised input
        out: list[str] = []
        for x in inp:
            if isinstance(x, str):
                out.append(x)
            elif isinstance(x, list):
                out.append(" ".join(map(str, x)))
            else:
                return None
        return out
    return None


def word_count(text: str) -> int:
    """The fake's token count: whitespace-separated words (cheap and predictable)."""
    return len(text.split())


def default_answer(text: str) -> str:
    return "ANSWER: " + " ".join(text.split()[:12])


def default_embedding(text: str, dim: int) -> list[float]:
    """Hashed bag of lowercase words, each word adding +1 or -1 to one bucket.

    sha256 rather than hash() because Python salts str hashes per process and
    the vectors must be identical across runs. An empty text gets a unit
    vector on axis 0 because a zero vector cannot be L2-normalised.
    """
    vec = [0.0] * dim
    for word in _WORD_RE.findall(text.lower()):
        digest = hashlib.sha256(word.encode("utf-8")).digest()
        bucket = int.from_bytes(digest[:8], "little") % dim
        vec[bucket] += 1.0 if digest[8] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vec))
    if norm == 0.0:
        vec[0] = 1.0
        return vec
    return [x / norm for x in vec]


def _last_user_text(messages: list[Any]) -> str:
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            return _content_text(m.get("content"))
    # No user turn (e.g. system-only prompts): fall back to the last message.
    for m in reversed(messages):
        if isinstance(m, dict):
            return _content_text(m.get("content"))
    return ""


def _pieces(text: str) -> list[str]:
    return _PIECE_RE.findall(text) or ([text] if text else [])


# ---------------------------------------------------------------------------
# HTTP layer
# ---------------------------------------------------------------------------


class _DropConnection(Exception):
    """Raised inside a handler to abandon the response without finishing it."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a test that forgets stop() must not hang the interpreter
    allow_reuse_address = True
    request_queue_size = 128  # concurrency tests open many connections at once

    fake: FakeOpenAI

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up (timeouts, dropped streams, stop()) are expected in
        # these tests; the default handler would print scary tracebacks.
        pass


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 so the openai client's keep-alive pool is exercised for real.
    protocol_version = "HTTP/1.1"
    server_version = "FakeOpenAI/1.0"
    disable_nagle_algorithm = True  # small SSE chunks should leave immediately
    server: _Server
    _open_rec: RecordedRequest | None = None  # the request being answered

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # keep pytest output clean

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass  # the peer is already gone; nothing left to flush
        finally:
            self.server.fake._track(self.connection, add=False)

    # -- request plumbing -------------------------------------------------

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    # Consume optional trailers up to the blank line.
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()  # CRLF after each chunk
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _api_path(self) -> str:
        # Accept both "/v1/x" and "/x" so a base_url without /v1 also works.
        path = self.path.split("?", 1)[0].rstrip("/")
        return path[3:] if path.startswith("/v1/") else path

    def do_GET(self) -> None:
        self._dispatch("GET", b"")

    def do_POST(self) -> None:
        self._dispatch("POST", self._read_body())

    def _dispatch(self, method: str, raw: bytes) -> None:
        fake = self.server.fake
        try:
            body: Any = json.loads(raw) if raw else {}
            bad_json = not isinstance(body, dict)
        except ValueError:
            body, bad_json = {}, True
        rec = RecordedRequest(
            path=self.path.split("?", 1)[0],
            body=body if isinstance(body, dict) else {},
            headers={k.lower(): v for k, v in self.headers.items()},
            started=time.monotonic(),
            method=method,
            raw=raw,
        )
        fake._enter(rec)
        self._open_rec = rec
        try:
            self._route(method, self._api_path(), rec, bad_json)
        except _DropConnection:
            self._abort()
        except OSError:
            # The client gave up (e.g. its timeout fired during our delay).
            self.close_connection = True
        except Exception as exc:
            # A bug in a test's responder: keep it for the test to inspect
            # and answer 500 rather than silently dropping the connection.
            fake.errors.append(exc)
            try:
                self._send_error(Reply(status=500, error_message=f"fake server error: {exc!r}"))
            except OSError:
                self.close_connection = True
        finally:
            self._complete()

    def _complete(self) -> None:
        """Mark the request finished. Called just before the last bytes go
        out: once the client holds the whole response it may look at the
        record (or send its next request), so the record must already say
        finished and the request must no longer count as in flight."""
        rec, self._open_rec = self._open_rec, None
        if rec is not None:
            self.server.fake._leave(rec)

    def _route(self, method: str, path: str, rec: RecordedRequest, bad_json: bool) -> None:
        fake = self.server.fake
        if method == "GET":
            if path == "/models":
                fake._sleep(fake.latency)
                data = [{"id": m, "object": "model", "created": _CREATED, "owned_by": "fake"} for m in _MODELS]
                return self._send_json(200, {"object": "list", "data": data})
            return self._send_error(Reply(status=404, error_message=f"unknown path {self.path}"))
        if path not in ("/chat/completions", "/completions", "/embeddings"):
            return self._send_error(Reply(status=404, error_message=f"unknown path {self.path}"))
        if bad_json:
            return self._send_error(Reply(status=400, error_message="request body is not a JSON object"))
        if path == "/embeddings":
            reply = fake._next_embedding_reply()
        else:
            reply = fake._next_reply(rec.body)
        fake._sleep(fake.latency + reply.delay)
        if reply.status != 200:
            return self._send_error(reply)
        if reply.raw_body is not None:
            stream = bool(rec.body.get("stream")) and path != "/embeddings"
            ctype = reply.content_type or ("text/event-stream" if stream else "application/json")
            return self._send_bytes(200, reply.raw_body, ctype, reply)
        if path == "/chat/completions":
            return self._chat(rec, reply)
        if path == "/completions":
            return self._completion(rec, reply)
        return self._embeddings(rec, reply)

    # -- response writers -------------------------------------------------

    def _send_bytes(self, status: int, data: bytes, ctype: str, reply: Reply | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        # Content-Length on every response: without it an HTTP/1.1 client
        # cannot tell where the body ends on a kept-alive connection.
        self.send_header("Content-Length", str(len(data)))
        for k, v in (reply.headers if reply else {}).items():
            self.send_header(k, v)
        self.end_headers()
        if reply is not None and reply.drop_mid_stream:
            # Promise the whole body but deliver half: the client sees a
            # connection closed before Content-Length bytes arrived.
            self.wfile.write(data[: len(data) // 2])
            raise _DropConnection
        if reply is not None and reply.trickle > 0:
            # One byte at a time: every read the client makes succeeds
            # quickly, so only an overall deadline can stop it.
            for i in range(len(data)):
                if self.server.fake._stopping.is_set():
                    raise _DropConnection
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
                self.server.fake._sleep(reply.trickle)
            self._complete()
            return
        self._complete()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_json(self, status: int, obj: Any, reply: Reply | None = None) -> None:
        ctype = "application/json"
        self._send_bytes(status, json.dumps(obj, separators=(",", ":")).encode("utf-8"), ctype, reply)

    def _send_error(self, reply: Reply) -> None:
        err = {
            "error": {
                "message": reply.error_message,
                "type": _ERROR_TYPES.get(
                    reply.status, "server_error" if reply.status >= 500 else "invalid_request_error"
                ),
                "param": None,
                "code": reply.error_code,
            }
        }
        if reply.raw_body is not None:
            return self._send_bytes(reply.status, reply.raw_body, "application/json", reply)
        self._send_json(reply.status, err, reply)

    def _start_sse(self, reply: Reply) -> None:
        # Chunked transfer encoding lets the connection stay alive after the
        # stream, exactly as OpenAI's servers behave.
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for k, v in reply.headers.items():
            self.send_header(k, v)
        self.end_headers()

    def _sse(self, payload: Any) -> None:
        text = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
        event = f"data: {text}\n\n".encode()
        self.wfile.write(b"%x\r\n" % len(event) + event + b"\r\n")
        self.wfile.flush()

    def _end_sse(self) -> None:
        self._complete()
        self._sse("[DONE]")
        self.wfile.write(b"0\r\n\r\n")  # the terminating zero-length chunk
        self.wfile.flush()

    def _stream(self, events: Iterator[dict[str, Any]], reply: Reply) -> None:
        todo = list(events)
        # With drop_mid_stream, let a few chunks through (at least one, never
        # all of them) so the client has started iterating when the socket dies.
        cut = max(1, min(3, len(todo) - 1)) if reply.drop_mid_stream else len(todo)
        self._start_sse(reply)
        fake = self.server.fake
        for event in todo[:cut]:
            self._sse(event)
            fake._sleep(reply.trickle)
        if reply.endless:
            more = dict(todo[min(1, len(todo) - 1)])
            more["choices"] = [{"index": 0, "delta": {"content": "more "}, "logprobs": None, "finish_reason": None}]
            more.pop("usage", None)
            while not fake._stopping.is_set():
                self._sse(more)
                fake._sleep(reply.trickle or 0.01)
            raise _DropConnection
        if reply.drop_mid_stream:
            # No [DONE] and no terminating zero-length chunk: the client sees
            # a truncated chunked body, i.e. a broken connection.
            raise _DropConnection
        self._end_sse()

    def _abort(self) -> None:
        """Close the socket with no further bytes, like a crashed server."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- endpoints ----------------------------------------------------------

    @staticmethod
    def _usage(reply: Reply, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
        if reply.usage is not None:
            return reply.usage
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }

    def _chat(self, rec: RecordedRequest, reply: Reply) -> None:
        body = rec.body
        text = reply.text if reply.text is not None else default_answer(_last_user_text(rec.messages))
        if reply.echo_header is not None:
            text = f"The header said: {rec.headers.get(reply.echo_header.lower(), '')}. That is all."
        usage = self._usage(reply, word_count(rec.prompt), word_count(text))
        model = body.get("model") or _MODELS[0]
        cid = "chatcmpl-fake" + hashlib.sha1(rec.raw).hexdigest()[:20]
        if not body.get("stream"):
            out: dict[str, Any] = {
                "id": cid,
                "object": "chat.completion",
                "created": _CREATED,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text, "refusal": None},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
            }
            if not reply.omit_usage:
                out["usage"] = usage
            return self._send_json(200, out, reply)

        include_usage = bool((body.get("stream_options") or {}).get("include_usage")) and not reply.omit_usage

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            d: dict[str, Any] = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": _CREATED,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }
            if include_usage:
                d["usage"] = None  # OpenAI sends null usage on every chunk but the last
            return d

        def events() -> Iterator[dict[str, Any]]:
            yield chunk({"role": "assistant", "content": ""})
            for piece in _pieces(text):
                yield chunk({"content": piece})
            yield chunk({}, "stop")
            if include_usage:
                yield {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": _CREATED,
                    "model": model,
                    "choices": [],
                    "usage": usage,
                }

        self._stream(events(), reply)

    def _completion(self, rec: RecordedRequest, reply: Reply) -> None:
        body = rec.body
        prompt = rec.prompt
        text = reply.text if reply.text is not None else default_answer(prompt)
        usage = self._usage(reply, word_count(prompt), word_count(text))
        model = body.get("model") or _MODELS[0]
        cid = "cmpl-fake" + hashlib.sha1(rec.raw).hexdigest()[:20]

        def choice(piece: str, finish: str | None) -> dict[str, Any]:
            return {"index": 0, "text": piece, "logprobs": None, "finish_reason": finish}

        base = {"id": cid, "object": "text_completion", "created": _CREATED, "model": model}
        if not body.get("stream"):
            out: dict[str, Any] = {**base, "choices": [choice(text, "stop")]}
            if not reply.omit_usage:
                out["usage"] = usage
            return self._send_json(200, out, reply)

        include_usage = bool((body.get("stream_options") or {}).get("include_usage")) and not reply.omit_usage

        def events() -> Iterator[dict[str, Any]]:
            for piece in _pieces(text):
                yield {**base, "choices": [choice(piece, None)]}
            yield {**base, "choices": [choice("", "stop")]}
            if include_usage:
                yield {**base, "choices": [], "usage": usage}

        self._stream(events(), reply)

    def _embeddings(self, rec: RecordedRequest, reply: Reply) -> None:
        body = rec.body
        inputs = _embedding_inputs(body.get("input"))
        if inputs is None:
            return self._send_error(Reply(status=400, error_message="'input' must be a string or a list"))
        requested = body.get("dimensions")
        dim = reply.embedding_dim or (requested if isinstance(requested, int) and requested > 0 else None)
        dim = dim or self.server.fake.embedding_dim
        as_base64 = body.get("encoding_format") == "base64"
        data: list[dict[str, Any]] = []
        for i, text in enumerate(inputs):
            vec = default_embedding(text, dim)
            emb: Any = base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode("ascii") if as_base64 else vec
            data.append({"object": "embedding", "index": i, "embedding": emb})
        tokens = sum(word_count(t) for t in inputs)
        out: dict[str, Any] = {"object": "list", "data": data, "model": body.get("model") or _MODELS[1]}
        if not reply.omit_usage:
            out["usage"] = reply.usage if reply.usage is not None else {"prompt_tokens": tokens, "total_tokens": tokens}
        self._send_json(200, out, reply)


# ---------------------------------------------------------------------------
# public server object
# ---------------------------------------------------------------------------


class FakeOpenAI:
    """A real OpenAI-protocol server on 127.0.0.1 with scripted replies."""

    def __init__(
        self,
        responder: Callable[[dict[str, Any]], Reply | str] | None = None,
        latency: float = 0.0,
        embedding_dim: int = 64,
    ) -> None:
        self.responder = responder
        self.latency = latency  # added to every API request, before any Reply.delay
        self.embedding_dim = embedding_dim
        self.requests: list[RecordedRequest] = []
        # Exceptions raised by the responder (or by the fake itself); a test
        # can assert this is empty to catch mistakes in its own responder.
        self.errors: list[BaseException] = []
        self.max_inflight = 0
        self._inflight = 0
        self._lock = threading.Lock()
        self._script: collections.deque[Reply] = collections.deque()
        self._embed_script: collections.deque[Reply] = collections.deque()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> FakeOpenAI:
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        self._server = server
        self.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        # A short poll interval keeps stop() fast.
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="FakeOpenAI", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()  # wakes handlers sleeping in a Reply.delay
        server.shutdown()
        server.server_close()
        # Kept-alive connections park a handler thread in readline(); closing
        # them lets those threads end now instead of leaking until the client
        # process exits.
        with self._lock:
            conns = list(self._connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting and inspection --------------------------------------------

    def script(self, *replies: Reply | str) -> None:
        """Queue replies for the next chat/completions requests (FIFO)."""
        with self._lock:
            self._script.extend(Reply(text=r) if isinstance(r, str) else r for r in replies)

    def script_embeddings(self, *replies: Reply) -> None:
        """Queue replies for the next embeddings requests (FIFO)."""
        with self._lock:
            self._embed_script.extend(replies)

    def chat_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def completion_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [
                r for r in self.requests if r.path.endswith("/completions") and not r.path.endswith("/chat/completions")
            ]

    def embedding_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/embeddings")]

    def take_finished(self) -> list[RecordedRequest]:
        """The finished requests, forgotten by the server as they are handed
        over (requests still in flight stay recorded): a long benchmark logs
        them as it goes instead of keeping every prompt in memory."""
        with self._lock:
            finished = [r for r in self.requests if r.finished]
            self.requests[:] = [r for r in self.requests if not r.finished]
        return finished

    def reset(self) -> None:
        """Forget recorded requests and queued replies (the server keeps running)."""
        with self._lock:
            self.requests.clear()
            self.errors.clear()
            self._script.clear()
            self._embed_script.clear()
            # Requests still in flight count again from here on.
            self.max_inflight = self._inflight

    # -- called by the handler threads ----------------------------------------

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._script:
                return self._script.popleft()
        if self.responder is not None:
            # Called outside the lock so a slow responder does not serialise
            # concurrent requests (which would hide concurrency bugs).
            r = self.responder(body)
            return Reply(text=r) if isinstance(r, str) else r
        return Reply()

    def _next_embedding_reply(self) -> Reply:
        with self._lock:
            return self._embed_script.popleft() if self._embed_script else Reply()

    def _enter(self, rec: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(rec)
            self._inflight += 1
            self.max_inflight = max(self.max_inflight, self._inflight)

    def _leave(self, rec: RecordedRequest) -> None:
        with self._lock:
            self._inflight -= 1
            rec.finished = time.monotonic()

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)
