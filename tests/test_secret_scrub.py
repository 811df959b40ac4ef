"""Guarantee 6 against other libraries' messages: whatever libpq, psycopg, an
HTTP client or a server writes about a connection, no password, API key or
Authorization header reaches stderr, the --json error, `config show` or the
store (docsum.sanitize.scrub), and libpq's keyword=value connection strings
are a PostgreSQL store, never a file named with the password."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from helpers import run_cli
from pgserver import TEST_PASSWORD, TEST_ROLE

from docsum.errors import ConfigError, DocsumError
from docsum.locations import display_location, is_postgres
from docsum.sanitize import Redactor, connection_secrets, scrub
from docsum.store.opening import open_store

SAMPLE_DOCS = Path(__file__).resolve().parents[1] / "sample_data" / "docs"
MALFORMED = "postgresql://postgres:pw-S3CRET@[::1:54329/ds"


def every_file(*roots: Path) -> list[str]:
    return [str(p) for root in roots for p in root.rglob("*")]


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ('in URI: "postgresql://postgres:pw-S3CRET@[::1:54329/ds"', "pw-S3CRET"),
        ("host=db user=me password=KVS3CRET dbname=ds", "KVS3CRET"),
        ("host=db password='two words\\' KV' dbname=ds", "two words"),
        ("sslpassword=KEYS3CRET host=db", "KEYS3CRET"),
        ("Headers({'authorization': 'Bearer sk-live-PLANTED99'})", "sk-live-PLANTED99"),
        ("Proxy-Authorization: Basic dXNlcjpTM0NSRVQ=", "dXNlcjpTM0NSRVQ"),
        ("POST https://gw.example/v1/chat?api-key=GWS3CRET&api-version=2", "GWS3CRET"),
        ("redirected to http://u:Pa55word9@other:81/v1", "Pa55word9"),
        ("{'x-api-key': 'XKEYS3CRET'}", "XKEYS3CRET"),
    ],
)
def test_scrub_removes_a_secret_written_in_a_known_form(text: str, secret: str) -> None:
    scrubbed = scrub(text)
    assert secret not in scrubbed and "***" in scrubbed


def test_scrub_keeps_what_is_not_a_secret_and_replaces_known_ones() -> None:
    plain = 'connection to server at "127.0.0.1", port 54329 failed: api-version=2 dbname=ds'
    assert scrub(plain) == plain
    assert scrub("the key tok-ABCDEFGH was refused", Redactor(["tok-ABCDEFGH"])) == "the key *** was refused"


def test_connection_secrets_are_found_in_a_string_that_does_not_parse() -> None:
    assert "pw-S3CRET" in connection_secrets(MALFORMED)
    assert "p@ss" in connection_secrets("postgresql://u:p%40ss@[::1/x")
    assert "a b'c" in connection_secrets("user=x password='a b\\'c' dbname=x")


# ---------------------------------------------------------------- the malformed URL (issue 26)


def test_a_driver_quoting_a_malformed_url_never_shows_its_password(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    plain = run_cli("summaries", "--store", MALFORMED)
    as_json = run_cli("summaries", "--json", "--store", MALFORMED)
    shown = run_cli("config", "show", "--json", "--store", MALFORMED)
    assert plain.code == 1 and as_json.code == 1 and shown.code == 0
    assert "IPv6" in plain.stderr and "***" in plain.stderr
    assert "***" in as_json.json()["error"]["message"]
    assert "***" in shown.json()["vector_search"]
    for out in (plain, as_json, shown):
        assert "pw-S3CRET" not in out.stdout + out.stderr
    # The library's own error (for `docsum.index`, MCP) is as clean.
    with pytest.raises(DocsumError) as raised:
        open_store(MALFORMED)
    assert "pw-S3CRET" not in str(raised.value)


# ---------------------------------------------------------------- keyword=value connection strings


def conninfo(pg_server: Any, db: str, password: str = TEST_PASSWORD) -> str:
    return f"host=127.0.0.1 port={pg_server.port} user={TEST_ROLE} password={password} dbname={db}"


def test_a_keyword_connection_string_is_a_postgresql_store(
    pg_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, docsum_home: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    location = conninfo(pg_server, pg_server.new_database())
    assert is_postgres(location) and TEST_PASSWORD not in display_location(location)
    outputs = [
        run_cli("build", SAMPLE_DOCS, "--store", location),
        run_cli("summaries", "--store", location),
        run_cli("config", "show", "--store", location),
        run_cli("config", "show", "--json", "--store", location),
    ]
    assert [o.code for o in outputs] == [0, 0, 0, 0], outputs
    assert "beekeepers_newsletter" in outputs[1].stdout  # the sample documents, summarized into PostgreSQL
    assert outputs[3].json()["store_backend"] == "postgresql"
    wrong = run_cli("summaries", "--store", conninfo(pg_server, "nosuchdb", TEST_PASSWORD + "x"))
    assert wrong.code == 1 and "password authentication failed" in wrong.stderr
    for out in [*outputs, wrong]:
        assert TEST_PASSWORD not in out.stdout + out.stderr
    assert not [name for name in every_file(tmp_path, docsum_home) if TEST_PASSWORD in name or "dbname" in name]


@pytest.mark.parametrize(
    "location",
    [
        "host=127.0.0.1 passwrd=KVS3CRET dbname=ds",  # a keyword libpq does not know
        "host=127.0.0.1 password=KV S3CRET dbname=ds",  # a value with a space, unquoted
        "host=127.0.0.1 password='KVS3CRET dbname=ds",  # a quote never closed
        "host=127.0.0.1 dbname=ds KVS3CRET",  # a word that is no keyword=value
    ],
)
def test_a_keyword_string_libpq_would_not_take_is_refused_creating_nothing(
    location: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, docsum_home: Path
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    for args in (["build", SAMPLE_DOCS], ["summaries"], ["config", "show"], ["ask", "oven"]):
        result = run_cli(*args, "--store", location)
        assert result.code == 2, (args, result)
        assert "--store" in result.stderr and "KVS3CRET" not in result.stdout + result.stderr
        assert "S3CRET" not in result.stderr
    with pytest.raises(ConfigError):
        open_store(location)
    assert every_file(cwd) == []
    assert not [name for name in every_file(docsum_home) if "S3CRET" in name]


def test_a_file_named_like_a_keyword_is_still_reachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert is_postgres("host=x dbname=y") and not is_postgres("./host=x dbname=y")
    assert not is_postgres("notes=2024.sqlite")  # not a libpq keyword: a file
    result = run_cli("build", SAMPLE_DOCS, "--store", "./host=x")
    assert result.code == 0, result
    assert os.path.exists(tmp_path / "host=x")


def test_an_unclosed_quote_in_a_keyword_string_is_named_as_such() -> None:
    result = run_cli("summaries", "--store", "host=127.0.0.1 password='KVS3CRET dbname=ds")
    assert result.code == 2 and "'password' opens a quote it never closes" in result.stderr, result
    assert "KVS3CRET" not in result.stderr
