"""docsum.sanitize: secrets redacted on every path out, streamed or not, and
nothing from a document or a server acting on the terminal."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from docsum.sanitize import Redactor, clean_json_text, clean_name, clean_text, credential_secrets, mask_url

SECRETS = ["sk-test-PLANTED-123", "k3y-Ab", "ab"]


@settings(max_examples=300, deadline=None)
@given(
    words=st.lists(st.sampled_from([*SECRETS, "x", " ", "y.", "sk-", "k3y", "-Ab", "a", "b", "\n"]), max_size=40),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=30),
)
def test_a_stream_is_redacted_as_the_whole_text_would_be(words: list[str], cuts: list[int]) -> None:
    redactor = Redactor(SECRETS)
    text = "".join(words)
    points = sorted({c for c in cuts if 0 < c < len(text)})
    pieces = [text[i:j] for i, j in zip([0, *points], [*points, len(text)])]
    stream = redactor.stream()
    shown = "".join(stream.feed(p) for p in pieces) + stream.flush()
    assert shown == redactor.redact(text)
    assert "sk-test-PLANTED-123" not in shown


def test_short_secrets_are_redacted_where_they_stand_alone() -> None:
    redactor = Redactor(["k3y-Ab"])
    assert redactor.redact("Bearer k3y-Ab.") == "Bearer ***."
    assert redactor.redact("xk3y-Aby") == "xk3y-Aby"  # inside a longer word: left alone


def test_a_stream_shows_text_as_it_arrives() -> None:
    stream = Redactor(["sk-test-PLANTED-123"]).stream()
    assert stream.feed("Bees make ") == "Bees make "
    assert stream.feed("honey sk-te") == "honey "  # could be the key: held
    assert stream.feed("a time") == "sk-tea time"
    assert stream.flush() == ""


def test_terminal_text_keeps_lines_and_loses_control_sequences() -> None:
    assert clean_text("red \x1b[31mtext\x1b[0m\r\nnext\tline\x07\u202e\ud800") == "red [31mtext[0m\nnext\tline\ufffd"
    assert clean_name("a\nb\x1b[2J\u202ec.txt") == "a\\nb\\x1b[2J\\u202ec.txt"
    assert clean_json_text('"\x9b\u202e"') == '"\\u009b\\u202e"'


def test_url_credentials() -> None:
    url = "http://alice:s3cr3t@127.0.0.1:8080/v1"
    assert mask_url(url) == "http://alice:***@127.0.0.1:8080/v1"
    assert credential_secrets("sk-x", url) == ["sk-x", "s3cr3t", "YWxpY2U6czNjcjN0"]
    assert credential_secrets(None, "http://127.0.0.1/v1") == []


def test_credential_query_parameters_are_secrets() -> None:
    """A proxy's key in the base URL's query (`?api-key=`) was printed in
    every error naming the server; `api-version` is not a credential."""
    url = "https://proxy.example/v1?api-version=2024-06-01&api-key=k%2Fsecret123&sig=abcdefgh#frag"
    assert mask_url(url) == "https://proxy.example/v1?api-version=2024-06-01&api-key=***&sig=***#frag"
    assert credential_secrets(None, url) == ["k%2Fsecret123", "k/secret123", "abcdefgh"]
    assert mask_url("http://h/v1?model=m") == "http://h/v1?model=m"


def test_a_connection_strings_ssl_key_passphrase_is_a_secret() -> None:
    """`sslpassword=` (libpq's passphrase of the client key) was shown by
    `config show` and every store error."""
    from docsum.locations import display_location, location_secrets

    url = "postgresql://u:pw1@h/db?sslpassword=pass-phrase-2&sslmode=require"
    assert display_location(url) == "postgresql://u:***@h/db?sslpassword=***&sslmode=require"
    assert {"pw1", "pass-phrase-2"} <= set(location_secrets(url))
