"""What an OpenAI-compatible server sent back, checked: the text of a
completion or of a streamed piece, the vectors of an embedding reply, a usage
figure, and the one-line message and kind of an error. Replies arrive as the
JSON the server sent (no model classes in between), and everything in them is
untrusted (types, sizes, numbers): a field of the wrong type is a missing
field or a malformed reply, never a crash."""

from __future__ import annotations

import base64
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

# The most tokens a usage figure may claim: beyond that (1e30, say) it is not
# a count but garbage, and docsum counts the tokens itself.
MAX_PLAUSIBLE_TOKENS = 100_000_000


def message_text(content: Any) -> str | None:
    """A completion's text: a string, a list of text parts (some servers send
    the content-parts form back), or nothing; None when it is anything else."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and isinstance(p.get("text", ""), str) for p in content):
        return "".join(p.get("text", "") for p in content)
    return None


def member(value: Any, key: str) -> Any:
    """`value[key]` of a JSON object; None for a missing key or a value that
    is not an object."""
    return value.get(key) if isinstance(value, dict) else None


def completion_text(reply: Any) -> str:
    """The text of a chat completion's first choice. ValueError (saying why)
    for JSON that is not a completion (an error page, a proxy's own reply: a
    fault of the server, not an empty answer) or whose content is not text."""
    choices = member(reply, "choices")
    message = member(choices[0], "message") if isinstance(choices, list) and choices else None
    if message is None:
        raise ValueError("a completion without choices")
    text = message_text(member(message, "content"))
    if text is None:
        raise ValueError("the completion is not text")
    return text


def delta_texts(chunk: Any) -> list[str]:
    """The text pieces of one streamed chunk; anything that is not text
    (a number, a list of the wrong shape) is a malformed stream."""
    choices = member(chunk, "choices")
    if choices is None:
        return []
    if not isinstance(choices, list):
        raise ValueError("a stream chunk whose choices are not a list")
    pieces = []
    for choice in choices:
        delta = member(choice, "delta")
        text = message_text(member(delta, "content")) if delta is not None else ""
        if text is None:
            raise ValueError("a stream chunk whose content is not text")
        if text:
            pieces.append(text)
    return pieces


def embedding_rows(reply: Any) -> list[np.ndarray]:
    """The vectors of an embeddings reply, in input order: each one a list of
    numbers or (as asked for) base64 of little-endian float32. ValueError for
    anything else."""
    import numpy as np

    data = member(reply, "data")
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise ValueError("no list of vectors")
    indexes = [d.get("index") for d in data]
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in indexes):
        raise ValueError("a vector without its index")
    rows = []
    for item in sorted(data, key=lambda d: d["index"]):
        value = item.get("embedding")
        try:
            if isinstance(value, str):
                row = np.frombuffer(base64.b64decode(value, validate=True), dtype="<f4").astype(np.float32)
            elif isinstance(value, list) and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in value
            ):
                row = np.asarray(value, dtype=np.float32)
            else:
                raise ValueError("a vector that is not a list of numbers")
        except (TypeError, OverflowError) as exc:
            raise ValueError(str(exc)) from None
        if row.ndim != 1 or row.size == 0:
            raise ValueError("an empty vector")
        rows.append(row)
    return rows


def token_count(value: Any) -> int | None:
    """A usage figure if it is a plausible token count, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        return None
    count = int(value)
    return count if 0 <= count <= MAX_PLAUSIBLE_TOKENS else None


def content_type(stream: Any) -> str:
    response = getattr(stream, "response", None)
    headers = getattr(response, "headers", None)
    try:
        return str(headers.get("content-type", "")) if headers is not None else ""
    except Exception:  # an unexpected headers object: unknown
        return ""


def is_timeout(exc: BaseException) -> bool:
    return any(k.__name__ in ("TimeoutException", "ReadTimeout", "TimeoutError") for k in type(exc).__mro__)


def error_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(getattr(exc, "message", "") or exc)


def is_context_error(exc: Exception) -> bool:
    """A 400/413 saying the prompt is longer than the model's window."""
    if getattr(exc, "status_code", None) not in (400, 413):
        return False
    lowered = error_message(exc).lower()
    return bool(
        "context" in lowered
        and ("length" in lowered or "window" in lowered)
        or "maximum context" in lowered
        or "too many tokens" in lowered
        or getattr(exc, "code", None) == "context_length_exceeded"
    )


def broke_off(cause: BaseException | None) -> bool:
    """A transport error after the connection was made (the peer closed it
    mid-response), as opposed to one that never connected."""
    names = {k.__name__ for k in type(cause).__mro__} if cause is not None else set()
    return bool(names & {"ProtocolError", "ReadError"})


def mentions(exc: Exception, *words: str) -> bool:
    text = (error_message(exc) + " " + str(exc)).lower()
    return any(w in text for w in words)


def one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
