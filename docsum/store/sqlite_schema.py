"""The SQLite store's schema: its migrations, in order, and how a migration
script is cut into statements (see docsum.store.sqlite for how they run)."""

from __future__ import annotations

import re
import sqlite3

# Index i brings the schema from version i to version i+1. Never edit or reorder
# an entry once released: stores in the wild are at every version. Add a new
# entry instead. Each entry runs in its own transaction; statements are split
# with sqlite3.complete_statement, so triggers with BEGIN ... END are fine.
MIGRATIONS: list[str] = [
    # v1: initial schema.
    """
    CREATE TABLE documents (
        doc_id              TEXT PRIMARY KEY,
        path                TEXT NOT NULL,      -- relative to root, POSIX separators
        root                TEXT NOT NULL,      -- absolute folder the build was given
        size                INTEGER NOT NULL,
        mtime_ns            INTEGER NOT NULL,
        sha256              TEXT NOT NULL,
        title               TEXT NOT NULL DEFAULT '',
        kind                TEXT NOT NULL,
        token_count         INTEGER NOT NULL,
        page_count          INTEGER,            -- NULL for formats without pages
        split_fingerprint   TEXT NOT NULL,
        summary_fingerprint TEXT NOT NULL,
        summary             TEXT NOT NULL,
        summary_model       TEXT NOT NULL,
        embedding           BLOB,               -- little-endian float32 vector
        embedding_model     TEXT,
        added_at            TEXT NOT NULL,
        updated_at          TEXT NOT NULL
    );
    CREATE UNIQUE INDEX documents_root_path ON documents(root, path);
    CREATE INDEX documents_path ON documents(path);

    CREATE TABLE nodes (
        doc_id      TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
        seq         INTEGER NOT NULL,
        text        TEXT NOT NULL,
        start_char  INTEGER NOT NULL,
        end_char    INTEGER NOT NULL,
        pages       TEXT NOT NULL DEFAULT '[]', -- JSON list of 1-based page numbers
        token_count INTEGER NOT NULL,
        PRIMARY KEY (doc_id, seq)
    ) WITHOUT ROWID;

    CREATE TABLE failures (
        root       TEXT NOT NULL,
        path       TEXT NOT NULL,
        error      TEXT NOT NULL,
        attempts   INTEGER NOT NULL DEFAULT 1,
        first_seen TEXT NOT NULL,
        last_seen  TEXT NOT NULL,
        PRIMARY KEY (root, path)
    );

    CREATE TABLE runs (
        id                INTEGER PRIMARY KEY AUTOINCREMENT,
        kind              TEXT NOT NULL,
        started_at        TEXT NOT NULL,
        finished_at       TEXT,
        status            TEXT NOT NULL DEFAULT 'running',
        settings          TEXT NOT NULL DEFAULT '{}',
        llm_calls         INTEGER NOT NULL DEFAULT 0,
        prompt_tokens     INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        usage             TEXT NOT NULL DEFAULT '{}',
        documents         TEXT NOT NULL DEFAULT '{}'
    );

    CREATE TABLE calls (
        id                INTEGER PRIMARY KEY,
        run_id            INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        kind              TEXT NOT NULL,
        model             TEXT NOT NULL,
        prompt_tokens     INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        seconds           REAL NOT NULL DEFAULT 0,
        ok                INTEGER NOT NULL,
        at                TEXT NOT NULL
    );
    CREATE INDEX calls_run ON calls(run_id);

    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL                     -- JSON
    );
    """,
    # v2: documents indexed by (path, root) instead of (path) alone. Every
    # listing orders by path, root (list_documents, which each `docsum ask`
    # reads in full, summary_matrix, find_documents), and with v1's index
    # SQLite sorted the root part of that order in a temporary B-tree on every
    # call; (path, root) serves that ORDER BY as it stands and, as its prefix,
    # every `WHERE path = ?` the old index served, so the old one goes (one
    # index to maintain per write, not two). Indexes only: no data changes.
    """
    CREATE INDEX documents_path_root ON documents(path, root);
    DROP INDEX documents_path;
    """,
    # v3: a log of summary-vector changes, so the vector file beside the store
    # (docsum.store.vectors) learns what changed since it was written without
    # reading every document. One row per document ever stored: a change
    # moves the document's row to a new, higher seq (AUTOINCREMENT never
    # reuses one), a removal leaves its row as the tombstone. The triggers keep
    # it exact whatever writes the documents table (delete then insert, not
    # INSERT OR REPLACE: an outer statement's conflict policy overrides the
    # one written inside a trigger). store_id tells this store
    # from another one later created at the same path.
    """
    CREATE TABLE vector_log (
        seq    INTEGER PRIMARY KEY AUTOINCREMENT,
        doc_id TEXT NOT NULL UNIQUE
    );
    INSERT INTO vector_log (doc_id) SELECT doc_id FROM documents ORDER BY path, root;
    CREATE TRIGGER documents_vector_insert AFTER INSERT ON documents BEGIN
        DELETE FROM vector_log WHERE doc_id = NEW.doc_id;
        INSERT INTO vector_log (doc_id) VALUES (NEW.doc_id);
    END;
    CREATE TRIGGER documents_vector_update AFTER UPDATE OF embedding, embedding_model ON documents BEGIN
        DELETE FROM vector_log WHERE doc_id = NEW.doc_id;
        INSERT INTO vector_log (doc_id) VALUES (NEW.doc_id);
    END;
    CREATE TRIGGER documents_vector_delete AFTER DELETE ON documents BEGIN
        DELETE FROM vector_log WHERE doc_id = OLD.doc_id;
        INSERT INTO vector_log (doc_id) VALUES (OLD.doc_id);
    END;
    INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', '"' || lower(hex(randomblob(16))) || '"');
    """,
]


def split_statements(script: str) -> list[str]:
    """Split a migration script into statements.

    Not executescript(): in Python 3.11 it COMMITs any open transaction first,
    which would break the one-transaction-per-migration guarantee.
    """
    statements: list[str] = []
    buffer = ""
    # Cut at each ';' that sqlite itself considers the end of a statement (not
    # one inside a string, comment or trigger body). Quadratic, but migration
    # scripts are tiny and this runs once per store upgrade.
    for char in script:
        buffer += char
        if char == ";" and sqlite3.complete_statement(buffer):
            if buffer.strip().strip(";").strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        # A trailing statement without ';' is accepted (sqlite would run it too).
        statements.append(buffer.strip())
    return statements



def created_tables(script: str) -> set[str]:
    """The tables a migration script creates (lower case). Those of the first
    migration are in every docsum store, which tells it apart from another
    application's SQLite file."""
    return {name.lower() for name in re.findall(r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", script, re.IGNORECASE)}
