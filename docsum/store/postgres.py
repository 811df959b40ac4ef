"""The shared store: the same documents, nodes, failures, runs and calls as the
SQLite store (docsum.store.sqlite), in a PostgreSQL database, for a team.

Design notes (the why):

* Same records, same guarantees: each write is one transaction (a document with
  its nodes and the calls that made it, or nothing), migrations run in order
  under an advisory lock, and a schema from a newer docsum is refused before
  anything is written (docsum.store.pgschema). The tables live in their own
  schema, `docsum`, so they never collide with a team's other tables. What the
  two stores do in the same SQL is written once, in docsum.store.sqlbase.
* Several builders at once: a builder claims a document before summarizing it
  (docsum.store.pgclaims).
* Search without pgvector: every document row carries the id of the
  transaction that last wrote it (`txid`, a trigger sets it) and every deletion
  leaves a tombstone. A reader remembers the oldest transaction still running
  when it last read (the xmin of its snapshot); next time it fetches only rows
  and tombstones written by transactions from that one on. Rows of
  transactions that were still running are fetched again: harmless, whereas a
  plain sequence would skip a row whose transaction committed late. The copy
  is docsum.store.vectors' vector file, kept in the local data directory.
* The connection string may hold a password: every message goes through
  display_location / pgschema.driver_errors, never the raw string.

psycopg is imported by docsum.store.pgschema only, and this module only when a
PostgreSQL store is used.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import socket
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from docsum.errors import DocsumError, StoreVersionError
from docsum.locations import display_location
from docsum.paths import data_dir
from docsum.store import pgclaims, pgschema, pgvector
from docsum.store.pgschema import driver_errors
from docsum.store.records import Executor, StoredVersion, aggregate_row, decode_embedding
from docsum.store.sqlbase import SqlStore
from docsum.store.vectors import VectorChange, VectorChanges

if TYPE_CHECKING:
    import psycopg


@functools.lru_cache(maxsize=256)
def pg_placeholders(sql: str) -> str:
    """`sql` written with `?` placeholders (docsum.store.sqlbase) in psycopg's
    `%s` style; a literal `%` is doubled so psycopg keeps it."""
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresStore(SqlStore):
    """One connection to a docsum schema in PostgreSQL. Open with PostgresStore.open()."""

    ABANDONED_RUN_CONDITION = f" AND {pgclaims.backend_gone('runs')}"
    UPSERT_SUFFIX = " RETURNING doc_id"

    def __init__(self, url: str, conn: psycopg.Connection[Any], readonly: bool, claim_seconds: float) -> None:
        self._url = url
        self._conn: psycopg.Connection[Any] | None = conn
        self.readonly = readonly
        self.claim_seconds = claim_seconds
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._heartbeat: pgclaims.Heartbeat | None = None
        # pgvector (docsum.store.pgvector): whether this connection may keep
        # the vector table, its dimension once there is one, and why not.
        self._pgvector = False
        self._vector_dim: int | None = None
        self._pgvector_note = ""

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, url: str, *, create: bool = True, readonly: bool = False) -> PostgresStore:
        """Connect and, if needed, create or migrate the schema (see Store.open)."""
        claim_seconds = pgclaims.claim_seconds_from_env()
        conn = pgschema.connect(url)
        try:
            with driver_errors(url):
                version = pgschema.schema_version(conn)
                if version is None and (not create or readonly):
                    raise FileNotFoundError(errno.ENOENT, "no docsum store here", display_location(url))
                if version is not None and version > len(pgschema.PG_MIGRATIONS):
                    raise StoreVersionError(
                        f"{display_location(url)}: written by a newer docsum (schema v{version}, this one knows up "
                        f"to v{len(pgschema.PG_MIGRATIONS)}); upgrade docsum"
                    )
                if version is None or version < len(pgschema.PG_MIGRATIONS):
                    # Even a reader upgrades an older schema, as with SQLite.
                    pgschema.migrate(conn, display_location(url))
                if readonly:
                    conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            store = cls(url, conn, readonly, claim_seconds)
            if not readonly:
                store._prepare_vectors()
        except BaseException:
            conn.close()
            raise
        return store

    @classmethod
    def exists(cls, url: str) -> bool:
        conn = pgschema.connect(url)
        try:
            with driver_errors(url):
                return pgschema.schema_version(conn) is not None
        finally:
            conn.close()

    # ------------------------------------------------------------------ lifetime

    @property
    def conn(self) -> psycopg.Connection[Any]:
        if self._conn is None:
            raise DocsumError(f"{self.label}: store is closed")
        return self._conn

    @property
    def label(self) -> str:
        return display_location(self._url)

    @property
    def path(self) -> str:
        return self.label

    @property
    def shared(self) -> bool:
        return True

    def close(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()

    @property
    def schema_version(self) -> int:
        with driver_errors(self._url):
            return pgschema.schema_version(self.conn) or 0

    @contextlib.contextmanager
    def _write(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction: all of it commits or none (psycopg rolls back on any exception)."""
        with driver_errors(self._url):
            conn = self.conn
            with conn.transaction():
                yield conn

    def _sql(self, sql: str) -> str:
        return pg_placeholders(sql)

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with driver_errors(self._url):
            return self.conn.execute(pg_placeholders(sql), params).fetchall()

    def _insert_id(self, conn: Executor, sql: str, params: Sequence[Any]) -> int:
        return int(conn.execute(pg_placeholders(sql + " RETURNING id"), params).fetchone()[0])

    def _upserted(self, cursor: Any) -> bool:
        return cursor.fetchone() is not None

    @contextlib.contextmanager
    def _document_transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """The statements go out as one pipeline (psycopg's pipeline mode): a
        builder writes every document it summarizes, and one round trip per
        statement was a large part of its time on a busy server."""
        with self._write() as conn, pgschema.pipeline(conn):
            yield conn

    def _forget_claim(self, conn: Executor, doc_id: str) -> None:
        conn.execute(pgclaims.RELEASE_SQL, (doc_id, self.owner))

    def _run_finished(self, conn: Executor) -> None:
        # Claims nobody holds any more (a builder killed after recording a
        # failure, before releasing): swept, so the table shows only live work.
        conn.execute(pgclaims.SWEEP_SQL)

    # ------------------------------------------------------------------ documents

    def vector_changes(self, since: int) -> VectorChanges:
        """Documents written or removed by transactions from `since` on (0:
        every document), read in one snapshot; the generation is that
        snapshot's xmin, so a transaction still running now is reported again
        next time rather than missed. Only ids and vectors travel."""
        with driver_errors(self._url):
            conn = self.conn
            # REPEATABLE READ: the xmin, the rows and the tombstones all come from one snapshot.
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                generation = int(aggregate_row(conn.execute("SELECT pg_snapshot_xmin(pg_current_snapshot())::text"))[0])
                store_id = str(self.get_meta("store_id", ""))
                if since > generation:
                    since = 0
                if since == 0:
                    rows = conn.execute(
                        "SELECT doc_id, embedding, embedding_model FROM documents ORDER BY path, root"
                    ).fetchall()
                    removed: list[tuple[Any, ...]] = []
                else:
                    rows = conn.execute(
                        "SELECT doc_id, embedding, embedding_model FROM documents WHERE txid >= %s::text::xid8",
                        (str(since),),
                    ).fetchall()
                    removed = conn.execute(
                        "SELECT DISTINCT r.doc_id FROM removed_documents r WHERE r.txid >= %s::text::xid8 "
                        "AND NOT EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = r.doc_id)",
                        (str(since),),
                    ).fetchall()
            finally:
                conn.execute("COMMIT")
        changes = [VectorChange(r[0], decode_embedding(r[1]), r[2] if r[1] is not None else None) for r in rows]
        changes += [VectorChange(r[0], None, None, removed=True) for r in removed]
        return VectorChanges(store_id, generation, len(changes), [changes] if changes else [])

    @property
    def vectors_file(self) -> Path:
        """The local vector file of this server's store, named after its
        location without the password (one per user and machine)."""
        key = hashlib.sha256(self.label.encode("utf-8")).hexdigest()[:16]
        return data_dir() / "cache" / f"pg-{key}.vectors"

    # ------------------------------------------------------------------ pgvector

    def _prepare_vectors(self) -> None:
        """A writer: create pgvector if the server offers it and this user may,
        make the vector table if stored vectors can fill it, and add the rows
        missing from it (see docsum.store.pgvector)."""
        with driver_errors(self._url):
            conn = self.conn
            self._pgvector_note = pgvector.try_create_extension(
                conn, lambda exc: pgschema.driver_message(self._url, exc)
            )
            self._pgvector = not self._pgvector_note
            if not self._pgvector:
                return
            self._vector_dim = pgvector.table_dim(conn)
            if self._vector_dim is None:
                shape = pgvector.common_shape(conn)
                if shape is not None:
                    self._vector_dim = pgvector.create_table(conn, shape[1])
            if self._vector_dim is not None:
                pgvector.add_missing_rows(conn, self._vector_dim)

    def _ready_for_vector(self, vector: np.ndarray | None, model: str | None) -> None:
        """Before the first searchable vector is written: the table, sized by it."""
        if self._pgvector and self._vector_dim is None and vector is not None and pgvector.searchable(model):
            with driver_errors(self._url):
                self._vector_dim = pgvector.create_table(self.conn, int(vector.shape[-1]))

    def _vector_written(self, conn: Executor, doc_id: str, vector: np.ndarray | None, model: str | None) -> None:
        if self._pgvector and self._vector_dim is not None:
            pgvector.write_row(conn, self._vector_dim, doc_id, vector, model)

    def server_search(self) -> pgvector.ServerSearch | None:
        """Whether questions find nearest summaries in SQL now (None: the
        local vector file). A writer first adds rows other builders left
        out (they started before the table existed)."""
        with driver_errors(self._url):
            if not self.readonly and self._pgvector:
                self._vector_dim = self._vector_dim or pgvector.table_dim(self.conn)
                if self._vector_dim is not None:
                    pgvector.add_missing_rows(self.conn, self._vector_dim)
            found, self._pgvector_note = pgvector.server_search(self.conn)
        return found

    def nearest_summaries(self, query: np.ndarray, limit: int | None) -> tuple[list[str], np.ndarray]:
        """The `limit` documents whose summary vectors are nearest `query`, found
        by the server (every document when None); see pgvector.nearest."""
        with driver_errors(self._url):
            return pgvector.nearest(self.conn, query, limit)

    def search_description(self) -> str:
        found = self.server_search()
        if found is not None:
            how = (
                "an HNSW index"
                if found.indexed
                else f"an exact scan (pgvector indexes at most {pgvector.HNSW_MAX_DIM} dimensions)"
            )
            return (
                f"PostgreSQL store {self.label}: pgvector; the nearest summaries are found in SQL by {how} "
                f"over {found.dim}-dimension vectors of {found.model} (inner product)"
            )
        return (
            f"PostgreSQL store {self.label}: {self._pgvector_note}; summary vectors are scored in this process from "
            f"a local vector file ({self.vectors_file}) that fetches only what changed since it was last brought up to date"
        )

    # ------------------------------------------------------------------ claims

    def claim(self, doc_id: str) -> bool:
        """Take `doc_id` for this builder; False when a live builder holds it (docsum.store.pgclaims)."""
        with driver_errors(self._url):
            if not pgclaims.take(self.conn, doc_id, self.owner, self.claim_seconds):
                return False
        if self._heartbeat is None:
            self._heartbeat = pgclaims.Heartbeat(self._url, self.owner, self.claim_seconds)
        return True

    def release_claim(self, doc_id: str) -> None:
        """One statement, its own transaction (a stored document's claim is
        already gone: put_document ends it)."""
        with driver_errors(self._url):
            self._forget_claim(self.conn, doc_id)

    def written_since(self, token: int | None) -> tuple[int, dict[str, StoredVersion]]:
        """Documents written by transactions from `token` on, in one
        statement's snapshot; the new token is that snapshot's xmin, so a
        transaction still running is reported again rather than missed (as in
        vector_changes). None: nothing yet, only the token to start from."""
        if token is None:
            return int(self._rows("SELECT pg_snapshot_xmin(pg_current_snapshot())::text")[0][0]), {}
        rows = self._rows(
            "SELECT s.xmin, d.doc_id, d.size, d.mtime_ns, d.split_fingerprint, d.summary_fingerprint "
            "FROM (SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin) s "
            "LEFT JOIN documents d ON d.txid >= ?::text::xid8",
            (str(token),),
        )
        return int(rows[0][0]), {r[1]: StoredVersion(*r[2:]) for r in rows if r[1] is not None}

    # ------------------------------------------------------------------ health

    def integrity_ok(self) -> bool:
        """The server guards its own pages; what can be checked here is that every table answers."""
        try:
            for table in ("documents", "nodes", "failures", "runs", "calls", "meta", "claims"):
                self._rows(f"SELECT 1 FROM {table} LIMIT 1")
        except DocsumError:
            return False
        return True
