"""The tables both stores keep, declared once: their columns, in order, with a
portable type each. Both stores' first migration (docsum.store.sqlite_schema
and docsum.store.pgschema) writes its CREATE TABLE statements from here, in
its own dialect, and the column lists the statements read and write
(docsum.store.records) come from here too, so a column cannot be named in
one place and forgotten in another.

Frozen: these declarations are part of migration 1, which stores in the
wild have already run. Never edit one. A later change is a new migration in
both lists (an ALTER TABLE each), and a column the stores read is then added
to the column lists in docsum.store.records by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Dialect = Literal["sqlite", "postgres"]

# Portable type -> (SQLite, PostgreSQL). SQLite stores every integer in up to
# 8 bytes under one type; PostgreSQL needs BIGINT for sizes, nanosecond times
# and counts that can pass 2**31. `serial` is a generated key that is never
# reused; `rowid` one that may be (SQLite's plain INTEGER PRIMARY KEY).
TYPES: dict[str, tuple[str, str]] = {
    "text": ("TEXT", "TEXT"),
    "int": ("INTEGER", "INTEGER"),
    "bigint": ("INTEGER", "BIGINT"),
    "blob": ("BLOB", "BYTEA"),
    "real": ("REAL", "DOUBLE PRECISION"),
    "bool": ("INTEGER", "BOOLEAN"),
    "serial": ("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY"),
    "rowid": ("INTEGER PRIMARY KEY", "BIGSERIAL PRIMARY KEY"),
}


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # a key of TYPES
    rest: str = ""  # NOT NULL, DEFAULT, REFERENCES: the same words in both dialects

    def sql(self, dialect: Dialect) -> str:
        sqlite_type, pg_type = TYPES[self.kind]
        return " ".join(
            part for part in (self.name, sqlite_type if dialect == "sqlite" else pg_type, self.rest) if part
        )


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    key: str = ""  # a PRIMARY KEY (...) clause over several columns
    sqlite_options: str = ""  # after the closing parenthesis, SQLite only

    @property
    def column_names(self) -> str:
        """The columns in order, as a SELECT or INSERT lists them."""
        return ", ".join(c.name for c in self.columns)

    def create(self, dialect: Dialect, extra: tuple[str, ...] = ()) -> str:
        """CREATE TABLE in `dialect`; `extra` adds that dialect's own columns."""
        lines = [c.sql(dialect) for c in self.columns] + list(extra) + ([self.key] if self.key else [])
        body = ",\n    ".join(lines)
        options = f" {self.sqlite_options}" if dialect == "sqlite" and self.sqlite_options else ""
        return f"CREATE TABLE {self.name} (\n    {body}\n){options};"


NN = "NOT NULL"

DOCUMENTS = Table("documents", (
    Column("doc_id", "text", "PRIMARY KEY"),
    Column("path", "text", NN),  # relative to root, POSIX separators
    Column("root", "text", NN),  # absolute folder the build was given
    Column("size", "bigint", NN),
    Column("mtime_ns", "bigint", NN),
    Column("sha256", "text", NN),
    Column("title", "text", "NOT NULL DEFAULT ''"),
    Column("kind", "text", NN),
    Column("token_count", "bigint", NN),
    Column("page_count", "int"),  # NULL for formats without pages
    Column("split_fingerprint", "text", NN),
    Column("summary_fingerprint", "text", NN),
    Column("summary", "text", NN),
    Column("summary_model", "text", NN),
    Column("embedding", "blob"),  # little-endian float32 vector
    Column("embedding_model", "text"),
    Column("added_at", "text", NN),
    Column("updated_at", "text", NN),
))  # fmt: skip

NODES = Table("nodes", (
    Column("doc_id", "text", "NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE"),
    Column("seq", "int", NN),
    Column("text", "text", NN),
    Column("start_char", "bigint", NN),
    Column("end_char", "bigint", NN),
    Column("pages", "text", "NOT NULL DEFAULT '[]'"),  # JSON list of 1-based page numbers
    Column("token_count", "bigint", NN),
), key="PRIMARY KEY (doc_id, seq)", sqlite_options="WITHOUT ROWID")  # fmt: skip

FAILURES = Table("failures", (
    Column("root", "text", NN),
    Column("path", "text", NN),
    Column("error", "text", NN),
    Column("attempts", "int", "NOT NULL DEFAULT 1"),
    Column("first_seen", "text", NN),
    Column("last_seen", "text", NN),
), key="PRIMARY KEY (root, path)")  # fmt: skip

RUNS = Table("runs", (
    Column("id", "serial"),
    Column("kind", "text", NN),
    Column("started_at", "text", NN),
    Column("finished_at", "text"),
    Column("status", "text", "NOT NULL DEFAULT 'running'"),
    Column("settings", "text", "NOT NULL DEFAULT '{}'"),
    Column("llm_calls", "bigint", "NOT NULL DEFAULT 0"),
    Column("prompt_tokens", "bigint", "NOT NULL DEFAULT 0"),
    Column("completion_tokens", "bigint", "NOT NULL DEFAULT 0"),
    Column("usage", "text", "NOT NULL DEFAULT '{}'"),
    Column("documents", "text", "NOT NULL DEFAULT '{}'"),
))  # fmt: skip

CALLS = Table("calls", (
    Column("id", "rowid"),
    Column("run_id", "bigint", "NOT NULL REFERENCES runs(id) ON DELETE CASCADE"),
    Column("kind", "text", NN),
    Column("model", "text", NN),
    Column("prompt_tokens", "bigint", "NOT NULL DEFAULT 0"),
    Column("completion_tokens", "bigint", "NOT NULL DEFAULT 0"),
    Column("seconds", "real", "NOT NULL DEFAULT 0"),
    Column("ok", "bool", NN),
    Column("at", "text", NN),
))  # fmt: skip

META = Table("meta", (
    Column("key", "text", "PRIMARY KEY"),
    Column("value", "text", NN),  # JSON
))  # fmt: skip

V1_TABLES = (DOCUMENTS, NODES, FAILURES, RUNS, CALLS, META)
