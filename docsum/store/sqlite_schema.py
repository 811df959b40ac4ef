"""The SQLite store's schema: its migrations, in order, how a migration script
is cut into statements, and the connection-level steps of opening a store
file: connecting, telling docsum's own stores from other SQLite files,
migrating (docsum.store.sqlite's Store.open runs these in order).

* WAL journal mode, so `docsum ask` in one process can read while `docsum build`
  writes in another; readers see the last committed state and never block.
* synchronous=NORMAL: in WAL mode a committed transaction survives a process
  crash (only a power loss may drop the last commits, never corrupt the file),
  and it avoids one fsync per commit, which matters because a build commits once
  per document and once per LLM call.
* The schema evolves only through MIGRATIONS, ordered and append-only; the
  schema version is PRAGMA user_version. A store written by a newer docsum is
  refused before anything is written to it.
"""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path

from docsum.errors import DocsumError, StoreVersionError
from docsum.store.tables import V1_TABLES

BUSY_TIMEOUT_MS = 30_000

# Index i brings the schema from version i to version i+1. Never edit or reorder
# an entry once released: stores in the wild are at every version. Add a new
# entry instead. Each entry runs in its own transaction; statements are split
# with sqlite3.complete_statement, so triggers with BEGIN ... END are fine.
MIGRATIONS: list[str] = [
    # v1: the tables both stores keep (docsum.store.tables), with their indexes.
    "\n".join(table.create("sqlite") for table in V1_TABLES)
    + """
    CREATE UNIQUE INDEX documents_root_path ON documents(root, path);
    CREATE INDEX documents_path ON documents(path);
    CREATE INDEX calls_run ON calls(run_id);
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
    # v4: where each page's text came from (docsum.ingest.ocr: "t" text
    # layer, "o" OCR, "-" none), one character a page; '' for documents
    # without pages and for those stored before v4.
    """
    ALTER TABLE documents ADD COLUMN page_origins TEXT NOT NULL DEFAULT '';
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
    return {
        name.lower() for name in re.findall(r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", script, re.IGNORECASE)
    }


def connect(path: Path, readonly: bool) -> sqlite3.Connection:
    """A connection to the store file at `path`, read-only at the file level
    when `readonly`, waiting out a writer for up to BUSY_TIMEOUT_MS."""
    if readonly:
        # mode=ro in a URI: SQLite refuses every write at the file level.
        uri = path.resolve().as_uri() + "?mode=ro"
        if _needs_immutable(path):
            # A WAL reader needs a -shm file beside the store; in a folder
            # we cannot write to, with no build leaving one there, SQLite
            # could not open the store at all. immutable=1 reads the file
            # without the -shm; safe because nobody without write access
            # to that folder can be writing the store either (a writer
            # would have left its -wal and -shm there).
            uri += "&immutable=1"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    else:
        # isolation_level=None: autocommit, we issue BEGIN/COMMIT ourselves
        # so every transaction boundary is explicit and visible here.
        conn = sqlite3.connect(str(path), isolation_level=None)
    # Before anything else: even the version check must wait out a writer.
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def _needs_immutable(path: Path) -> bool:
    """Whether a reader can only open `path` without a -shm file: its folder
    is not writable to us and no writer has left a -shm file there."""
    folder = path.resolve().parent
    shm = folder / (path.name + "-shm")
    return not os.access(folder, os.W_OK) and not shm.exists()


def check_version(conn: sqlite3.Connection, path: Path) -> int:
    """The store's schema version; raises unless the file is docsum's own
    store (or an empty database) at a version this docsum can read.
    Reads only, so a refused file stays byte-identical."""
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        tables = {str(row[0]).lower() for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise DocsumError(f"{path}: not a docsum store ({exc})") from exc
    if version == 0 and not tables:
        return 0  # a new, empty database: ours to create the schema in
    if version == 0 or not created_tables(MIGRATIONS[0]) <= tables:
        # Another application's SQLite file (possibly with its own
        # user_version): never migrate or convert it.
        raise DocsumError(f"{path}: not a docsum store (an SQLite database without docsum's tables); left untouched")
    if version > len(MIGRATIONS):
        raise StoreVersionError(
            f"{path}: written by a newer docsum (schema v{version}, this one knows up to v{len(MIGRATIONS)}); upgrade docsum"
        )
    return version


def configure_writer(conn: sqlite3.Connection) -> None:
    # journal_mode is persistent in the file; only switch when needed so an
    # open next to a running build does not ask for an exclusive lock.
    if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")


def migrate(conn: sqlite3.Connection) -> None:
    """Apply the migrations the store lacks, each in its own IMMEDIATE transaction."""
    # MIGRATIONS is looked up at call time (tests substitute their own list).
    migrations = MIGRATIONS
    while True:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version >= len(migrations):
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-read under the write lock: another process opening the
            # same store at the same time may have migrated meanwhile.
            current = conn.execute("PRAGMA user_version").fetchone()[0]
            if current == version:
                for statement in split_statements(migrations[version]):
                    conn.execute(statement)
                # PRAGMA takes no bound parameters; the value is our own int.
                conn.execute(f"PRAGMA user_version = {version + 1:d}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def upgrade(path: Path, version: int) -> None:
    """Migrate an older store for a caller that only reads it."""
    try:
        conn = connect(path, readonly=False)
    except (OSError, sqlite3.OperationalError) as exc:
        reason = str(exc)
    else:
        try:
            check_version(conn, path)  # another docsum may have moved it on meanwhile
            configure_writer(conn)
            migrate(conn)
            return
        except sqlite3.OperationalError as exc:  # e.g. "attempt to write a readonly database"
            reason = str(exc)
        finally:
            conn.close()
    raise StoreVersionError(
        f"{path}: schema v{version} is older than v{len(MIGRATIONS)} and cannot be upgraded here ({reason}); "
        "run `docsum build` once with write access to upgrade it"
    )
