"""Damaged text in a SQLite store: found, set aside, named, rebuilt.

A bit flip on disk can leave a TEXT value that is not UTF-8 (a node's text, a
summary, a title). sqlite3 then fails the whole query with an OperationalError
that quotes the value, that is the document's own text, and the next build,
which compares only sizes, times and fingerprints, would call the file
unchanged forever. So when a read meets such a value (docsum.store.sqlite):

* every damaged value is found (a scan of the documents' and nodes' text
  columns as bytes: it runs only after a read failed, never on the healthy path);
* each is replaced by its bytes decoded with U+FFFD for what is not UTF-8,
  and its document's summary fingerprint by a mark no settings produce, so
  the store reads again and the next build sees the document as changed and
  rebuilds it from the file (a damaged path matches no file: the document is
  removed and the file added again). A reader opens a write connection of its
  own for that; where it cannot write, the store is left as it is;
* the documents are named, one line, never quoting the damaged text.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
from pathlib import Path

from docsum.errors import StoreDamagedError
from docsum.sanitize import clean_name
from docsum.store import sqlite_schema
from docsum.store.tables import DOCUMENTS, NODES, Table

log = logging.getLogger("docsum")

DAMAGED_MARK = "damaged"  # a summary fingerprint no settings produce (they are hex digests)

# sqlite3's message for a TEXT value that is not UTF-8 (CPython's _sqlite, unchanged since 2.x).
_DECODE_ERROR = "Could not decode to UTF-8"


def is_damaged_text(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and _DECODE_ERROR in str(exc)


def _text_columns(table: Table) -> list[str]:
    return [c.name for c in table.columns if c.kind == "text"]


# A row is found again by its key's bytes: a damaged doc_id is not equal to
# any text docsum could write in a WHERE clause.
Where = tuple[str, bytes, int | None, str]  # (table, doc_id as bytes, seq for a node, column)


def find_damaged(conn: sqlite3.Connection) -> dict[str, dict[Where, str]]:
    """doc_id -> {where the value is: the value with U+FFFD where it was not UTF-8}."""
    found: dict[str, dict[Where, str]] = {}
    for table, seq in ((DOCUMENTS, "NULL"), (NODES, "seq")):
        columns = _text_columns(table)
        blobs = ", ".join(f"CAST({c} AS BLOB)" for c in columns)
        for row in conn.execute(f"SELECT CAST(doc_id AS BLOB), {seq}, {blobs} FROM {table.name}"):
            key, number, values = bytes(row[0] or b""), row[1], row[2:]
            for column, value in zip(columns, values):
                if value is None:
                    continue
                try:
                    bytes(value).decode("utf-8")
                except UnicodeDecodeError:
                    doc_id = key.decode("utf-8", "replace")
                    where = (table.name, key, number, column)
                    found.setdefault(doc_id, {})[where] = bytes(value).decode("utf-8", "replace")
    return found


def _names(conn: sqlite3.Connection, damaged: dict[str, dict[Where, str]]) -> list[str]:
    names = []
    for doc_id in sorted(damaged):
        key = next(iter(damaged[doc_id]))[1]
        row = conn.execute("SELECT CAST(path AS BLOB) FROM documents WHERE CAST(doc_id AS BLOB) = ?", (key,)).fetchone()
        path = bytes(row[0]).decode("utf-8", "replace") if row and row[0] is not None else doc_id
        names.append(clean_name(path))
    return names


# The meta key listing the documents set aside, so that a later question
# leaves them out until a build has rebuilt them (docsum.store.sqlbase).
SET_ASIDE_KEY = "set_aside"


def _set_aside(conn: sqlite3.Connection, damaged: dict[str, dict[Where, str]]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (SET_ASIDE_KEY,)).fetchone()
        listed = set(json.loads(row[0])) if row else set()
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (SET_ASIDE_KEY, json.dumps(sorted(listed | set(damaged)))),
        )
        for values in damaged.values():
            for (table, key, seq, column), text in values.items():
                match = "CAST(doc_id AS BLOB) = ?" + ("" if seq is None else " AND seq = ?")
                params = (text, key) if seq is None else (text, key, seq)
                conn.execute(f"UPDATE {table} SET {column} = ? WHERE {match}", params)
            conn.execute(
                "UPDATE documents SET summary_fingerprint = ? WHERE CAST(doc_id AS BLOB) = ?", (DAMAGED_MARK, key)
            )
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def repair(conn: sqlite3.Connection, path: Path, readonly: bool) -> None:
    """Find and set aside every damaged value (see the module's notes). For a
    writer, a warning naming the documents, then the caller reads again; for
    a reader, StoreDamagedError naming them (what it asked for was damaged)."""
    damaged = find_damaged(conn)
    if not damaged:
        raise StoreDamagedError(
            f"{path}: the store cannot be read (text that is not UTF-8 in a table docsum cannot repair)"
        )
    names = _names(conn, damaged)
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    it = "it" if len(names) == 1 else "them"
    set_aside = False
    with contextlib.suppress(sqlite3.Error, OSError):
        writer = conn if not readonly else sqlite_schema.connect(path, readonly=False)
        try:
            _set_aside(writer, damaged)
            set_aside = True
        finally:
            if writer is not conn:
                writer.close()
    what = f"{path}: the stored text of {shown} {'is' if len(names) == 1 else 'are'} damaged (not valid UTF-8)"
    if not set_aside:
        raise StoreDamagedError(f"{what}; the store could not be written to set it aside: rebuild it where it can be")
    if readonly:
        raise StoreDamagedError(f"{what}; set aside: the next `docsum build` rebuilds {it} from the file")
    log.warning("%s; set aside: this build rebuilds %s from the file", what, it)
