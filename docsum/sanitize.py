"""Text on its way out: secrets redacted, terminal control sequences removed.

Everything docsum prints comes from places it does not control (documents,
file names, LLM servers), so two guards sit on every path out:

* `Redactor` replaces secrets (the API key, a password in the base URL) with
  `***`, also when a server streams one back split across pieces.
* `clean_text` and `clean_name` remove what could act on a terminal: escape
  sequences, other control characters, bidirectional overrides, and lone
  surrogates (which cannot even be encoded for printing). Text keeps its line
  breaks and tabs; a name is kept on one line with such characters shown as
  escapes (`\\n`, `\\x1b`), so a listing stays one line per file and the
  name can still be told apart.
"""

from __future__ import annotations

import base64
import re
import urllib.parse
from collections.abc import Iterable

REDACTED = "***"

# A secret this short is redacted only where it stands as a whole word:
# replacing every "abc" inside ordinary words would mangle answers.
_SHORT_SECRET = 8

_C0 = [c for c in range(0x20) if chr(c) not in "\n\t"]
_CONTROLS = [*_C0, 0x7F, *range(0x80, 0xA0)]
# Bidirectional embeddings, overrides and isolates: they reorder what a
# terminal shows ("Trojan Source"), and a few invisible format characters.
_FORMAT = [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C]
_SURROGATES = range(0xD800, 0xE000)

_TEXT_TABLE: dict[int, str | None] = {c: None for c in (*_CONTROLS, *_FORMAT)}
_TEXT_TABLE.update({c: "\N{REPLACEMENT CHARACTER}" for c in _SURROGATES})
_TEXT_TABLE[ord("\r")] = None  # "\r\n" keeps its "\n"; a lone "\r" would overwrite the line

_NAME_TABLE: dict[int, str] = {
    c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}")
    for c in (*range(0x20), 0x7F, *range(0x80, 0xA0), *_FORMAT, *_SURROGATES)
}
_NAME_TABLE.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})


def clean_text(text: str) -> str:
    """`text` without anything that could act on a terminal; line breaks and
    tabs kept. Safe on pieces of a stream: it works character by character."""
    return text.translate(_TEXT_TABLE)


def clean_name(name: str) -> str:
    """A file name (or any one-line value) for printing: control and format
    characters shown as escapes, so it stays on one line and cannot move the
    cursor or recolour the terminal."""
    return name.translate(_NAME_TABLE)


def clean_json_text(serialized: str) -> str:
    """Serialized JSON with the characters json.dumps leaves raw (DEL, C1
    controls, bidi overrides, surrogates) written as \\u escapes: the same
    document, but inert on a terminal."""
    return serialized.translate(_JSON_TABLE)


_JSON_TABLE: dict[int, str] = {c: f"\\u{c:04x}" for c in (0x7F, *range(0x80, 0xA0), *_FORMAT, *_SURROGATES)}


class Redactor:
    """Replaces each secret with `***`. Secrets of 8 characters or more are
    replaced wherever they occur; shorter ones where they stand alone (not
    inside a longer run of letters and digits)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: list[str] = []
        self._pattern: re.Pattern[str] | None = None
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str | None) -> None:
        if not secret or secret in self._secrets:
            return
        self._secrets.append(secret)
        # Longest first, so a secret containing another is replaced whole.
        parts = []
        for s in sorted(self._secrets, key=len, reverse=True):
            escaped = re.escape(s)
            parts.append(escaped if len(s) >= _SHORT_SECRET else rf"(?<![A-Za-z0-9]){escaped}(?![A-Za-z0-9])")
        self._pattern = re.compile("|".join(parts))

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def redact(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(REDACTED, text)

    def stream(self) -> StreamRedactor:
        return StreamRedactor(self)


class StreamRedactor:
    """Redacts a text that arrives in pieces: a secret split across two pieces
    is still caught. Holds back only the end of the text that could be the
    start of a secret, so an answer is shown as it streams."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._held = ""
        self._before = ""

    def feed(self, piece: str) -> str:
        """What of the text so far can be shown now."""
        pattern = self._redactor._pattern  # noqa: SLF001 - same module
        if pattern is None:
            return piece
        # The last character already shown goes in front, unshown again: a
        # short secret's match depends on the character before it.
        start = len(self._before)
        text = self._before + self._held + piece
        out: list[str] = []
        done = start
        for match in pattern.finditer(text, start):
            if match.end() >= len(text):
                break  # a short secret's word boundary is not known yet: held below
            out.append(text[done : match.start()])
            out.append(REDACTED)
            done = match.end()
        hold = len(text) - self._secret_start_at_end(text, done)
        out.append(text[done:hold])
        self._held = text[hold:]
        if hold > start:
            self._before = text[hold - 1]
        return "".join(out)

    def _secret_start_at_end(self, text: str, done: int) -> int:
        """Length of the longest end of `text` (after `done`) that begins a
        secret, the whole secret included."""
        room = len(text) - done
        longest = 0
        for secret in self._redactor._secrets:  # noqa: SLF001 - same module
            for k in range(min(len(secret), room), longest, -1):
                if secret.startswith(text[len(text) - k :]):
                    longest = k
                    break
        return longest

    def flush(self) -> str:
        """The rest, at the end of the stream."""
        pattern = self._redactor._pattern  # noqa: SLF001 - same module
        start = len(self._before)
        text, self._held, self._before = self._before + self._held, "", ""
        if pattern is None:
            return text[start:]
        out: list[str] = []
        done = start
        for match in pattern.finditer(text, start):
            out += [text[done : match.start()], REDACTED]
            done = match.end()
        out.append(text[done:])
        return "".join(out)


# ---------------------------------------------------------------- credentials


# Query parameters that carry a credential in the URLs of proxies and hosted
# endpoints (`?api-key=`, `?key=`, `?access_token=`, `?sig=`): their values
# are secrets like the password of the user part. Matched on the name only, so
# an `api-version` or `model` parameter is still shown as typed.
_SECRET_PARAM = re.compile(r"key|token|secret|pass|pwd|sig|auth|credential|session", re.IGNORECASE)


def mask_url(url: str) -> str:
    """`url` with the password of its user part (if any) and the values of
    its credential-like query parameters shown as ***."""
    masked = re.sub(r"(//[^/@:]*):[^/@]*@", r"\1:***@", url)
    head, mark, query = masked.partition("?")
    if not mark:
        return masked
    fragment = ""
    if "#" in query:
        query, _, fragment = query.partition("#")
        fragment = "#" + fragment
    pairs = [_mask_param(pair) for pair in query.split("&")]
    return f"{head}?{'&'.join(pairs)}{fragment}"


def _mask_param(pair: str) -> str:
    name, eq, value = pair.partition("=")
    return f"{name}={REDACTED}" if eq and value and _SECRET_PARAM.search(urllib.parse.unquote_plus(name)) else pair


def url_query_secrets(url: str | None) -> list[str]:
    """The values of the URL's credential-like query parameters, as typed and
    percent-decoded (a server's error may echo either)."""
    if not url or "?" not in url:
        return []
    try:
        query = urllib.parse.urlsplit(url).query
    except ValueError:
        query = url.partition("?")[2].partition("#")[0]
    found: list[str] = []
    for pair in query.split("&"):
        name, eq, value = pair.partition("=")
        if eq and value and _SECRET_PARAM.search(urllib.parse.unquote_plus(name)):
            found += [value, urllib.parse.unquote_plus(value)]
    return list(dict.fromkeys(found))


def url_credentials(url: str | None) -> tuple[str, str] | None:
    """The (user, password) of the base URL's user part, if it has one."""
    if not url:
        return None
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return None
    if parts.username is None and parts.password is None:
        return None
    return urllib.parse.unquote(parts.username or ""), urllib.parse.unquote(parts.password or "")


def url_without_credentials(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=host))


def credential_secrets(api_key: str | None, base_url: str | None) -> list[str]:
    """Every value that must never be printed: the API key, the password in
    the base URL and that password as a server would echo it back (the
    base64 of user:password in a Basic Authorization header), and the values
    of the base URL's credential-like query parameters."""
    secrets = [str(api_key)] if api_key else []
    credentials = url_credentials(base_url)
    if credentials and credentials[1]:
        user, password = credentials
        secrets += [password, base64.b64encode(f"{user}:{password}".encode()).decode("ascii")]
    secrets += [s for s in url_query_secrets(base_url) if s not in secrets]
    return secrets


# ---------------------------------------------------------------- library messages

# A URL anywhere in a message, up to the first character that cannot be part
# of one as a library quotes it (space, quote, backslash of a JSON escape).
_URL_IN_TEXT = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s\"'<>\\]+")
# A user part with a password, where the URL around it does not parse (libpq
# quotes a malformed URL whole): "scheme://user:password@".
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/?#@:\"'\\]*):[^\s\"'\\]*@")
# A value as libpq's keyword=value strings write it: 'quoted, with \' escapes' or one word.
_WORD_VALUE = r"(?:'(?:[^'\\]|\\.)*'|[^\s'\"&,;)]+)"
# Keyword forms of a credential: libpq's `password=` and `sslpassword=`, and
# the API keys and tokens of HTTP clients' messages.
_KEYWORD_SECRET = re.compile(
    rf"(?i)(?<![\w-])((?:ssl)?password|passwd|pwd|api[_-]?key|access[_-]?token|client[_-]?secret)(\s*=\s*){_WORD_VALUE}"
)
# An Authorization header (or an API-key header) as an HTTP library prints
# one: `Authorization: Bearer sk-…`, `'authorization': 'Basic …'`.
_HEADER_SECRET = re.compile(
    r"(?i)\b((?:proxy-)?authorization|x-api-key|api-key)(['\"]?\s*:\s*['\"]?)(?:(bearer|basic|token)\s+)?[^\s'\",}]+"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/-]{8,}=*")


def scrub(text: str, known: Redactor | None = None) -> str:
    """A message from a library (libpq, psycopg, httpx, openai, sqlite), or
    anything else about to be printed, stored or returned, with every secret
    replaced by ***: the `known` ones (the API key, the store's password), and
    any written in a form that says it is one (a URL's password or credential
    parameter, `password=…` of a connection string, an Authorization header),
    known or not. The one function every exit path calls (the CLI's stderr and
    JSON error, `config show`, stored failures, eval reports, MCP tool errors)."""
    if not text:
        return text
    if known:
        text = known.redact(text)
    if "://" in text:
        text = _USERINFO.sub(rf"\1:{REDACTED}@", text)
        text = _URL_IN_TEXT.sub(lambda m: mask_url(m.group()), text)
    if "=" in text:
        text = _KEYWORD_SECRET.sub(rf"\1\2{REDACTED}", text)
    text = _HEADER_SECRET.sub(
        lambda m: f"{m.group(1)}{m.group(2)}{(m.group(3) or '') and m.group(3) + ' '}{REDACTED}", text
    )
    return _BEARER.sub(rf"\1 {REDACTED}", text)


def conninfo_value(raw: str) -> str:
    """A keyword=value connection string's value as libpq reads it: quotes
    removed, backslash escapes undone."""
    if len(raw) >= 2 and raw[0] == raw[-1] == "'":
        return re.sub(r"\\(.)", r"\1", raw[1:-1])
    return raw


def connection_secrets(location: str) -> list[str]:
    """The passwords in a connection string, URL or keyword=value form, as
    typed and as decoded (a driver's message may echo either), found without
    parsing the whole string: a malformed one is exactly what a driver quotes."""
    secrets: list[str] = []
    for match in re.finditer(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s/?#@:]*:([^\s]*)@", location):
        typed = match.group(1)
        secrets += [typed, urllib.parse.unquote(typed)]
    for match in _KEYWORD_SECRET.finditer(location):
        typed = match.group(0)[match.end(2) - match.start(0) :]
        secrets += [typed, conninfo_value(typed), urllib.parse.unquote_plus(typed)]
    secrets += url_query_secrets(location) if "://" in location else []
    return list(dict.fromkeys(s for s in secrets if s))
