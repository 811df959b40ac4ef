"""The shared store: the same documents, nodes, failures, runs and calls as the
SQLite store (docsum.store.sqlite), in a PostgreSQL database, for a team.

Design notes (the why):

* Same records, same guarantees: each write is one transaction (a document with
  its nodes and the calls that made it, or nothing), migrations run in order
  under an advisory lock, and a schema from a newer docsum is refused before
  anything is written (docsum.store.pgschema). The tables live in their own
  schema, `docsum`, so they never collide with a team's other tables.
* Several builders at once: a builder claims a document in the `claims` table
  before summarizing it. A claim is a lease: the holder's heartbeat extends it,
  and it can be taken over once it has expired or once the backend of the
  connection that took it is gone (a builder killed with SIGKILL closes its
  socket, so its claims free up at once; a machine that vanished frees them
  after the timeout). Takeover selects the claim row FOR UPDATE SKIP LOCKED,
  so two builders never take over the same document.
* Search without pgvector: every document row carries the id of the
  transaction that last wrote it (`txid`, a trigger sets it) and every deletion
  leaves a tombstone. A reader remembers the oldest transaction still running
  when it last read (the xmin of its snapshot); next time it fetches only rows
  and tombstones written by transactions from that one on. Rows of
  transactions that were still running are fetched again: harmless, whereas a
  plain sequence would skip a row whose transaction committed late. The copy
  is docsum.store.vectors' vector file, kept in the local data directory.
* The connection string may hold a password: every message goes through
  display_location / _redact, never the raw string.

psycopg is imported here only, and this module only when a PostgreSQL store is used.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np

from docsum.errors import ConfigError, DocsumError, StoreVersionError
from docsum.paths import data_dir
from docsum.store import pgschema, pgvector
from docsum.store.base import display_location, location_secrets
from docsum.store.records import (
    DOC_COLUMNS,
    DOC_COLUMNS_NO_EMBEDDING,
    STORED_FILE_COLUMNS,
    CallRow,
    DocumentRecord,
    NodeRecord,
    StoredFile,
    StoredVersion,
    call_params,
    decode_embedding,
    document_from_row,
    document_params,
    dumps_json,
    encode_embedding,
    failure_params,
    node_from_row,
    node_params,
    scrub_settings,
    stack_embeddings,
    storable,
    utc_now,
)
from docsum.store.vectors import VectorChange, VectorChanges

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger("docsum")

# Seconds a claim lives without a heartbeat. A builder that died without its
# connection closing (a machine gone) blocks its documents this long.
DEFAULT_CLAIM_SECONDS = 60.0


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise ConfigError(
            "a postgresql:// store needs the psycopg package: pip install 'docsum[postgres]'"
        ) from exc
    return psycopg


def claim_seconds_from_env() -> float:
    raw = os.environ.get("DOCSUM_CLAIM_TIMEOUT", "")
    try:
        value = float(raw) if raw else DEFAULT_CLAIM_SECONDS
    except ValueError:
        raise ConfigError(f"DOCSUM_CLAIM_TIMEOUT must be a number of seconds, got {raw!r}") from None
    if value <= 0:
        raise ConfigError(f"DOCSUM_CLAIM_TIMEOUT must be positive, got {raw!r}")
    return value


# put_document's upsert: every column but the key and added_at (kept unless given).
_DOC_UPDATES = ", ".join(f"{c} = EXCLUDED.{c}" for c in DOC_COLUMNS.replace(" ", "").split(",")[1:] if c != "added_at")


class PostgresStore:
    """One connection to a docsum schema in PostgreSQL. Open with PostgresStore.open()."""

    def __init__(self, url: str, conn: psycopg.Connection[Any], readonly: bool, claim_seconds: float) -> None:
        self._url = url
        self._conn: psycopg.Connection[Any] | None = conn
        self.readonly = readonly
        self.claim_seconds = claim_seconds
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._heartbeat: _Heartbeat | None = None
        # pgvector (docsum.store.pgvector): whether this connection may keep
        # the vector table, its dimension once there is one, and why not.
        self._pgvector = False
        self._vector_dim: int | None = None
        self._pgvector_note = ""

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, url: str, *, create: bool = True, readonly: bool = False) -> PostgresStore:
        """Connect and, if needed, create or migrate the schema (see Store.open)."""
        claim_seconds = claim_seconds_from_env()
        conn = cls._connect(url)
        try:
            with _errors(url):
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
        conn = cls._connect(url)
        try:
            with _errors(url):
                return pgschema.schema_version(conn) is not None
        finally:
            conn.close()

    @staticmethod
    def _connect(url: str) -> psycopg.Connection[Any]:
        psycopg = _psycopg()
        with _errors(url, "cannot connect"):
            conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
            conn.execute(pgvector.SEARCH_PATH_SQL)  # docsum's schema, then pgvector's
        return conn

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

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        with _errors(self._url):
            return pgschema.schema_version(self.conn) or 0

    @contextlib.contextmanager
    def _write(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction: all of it commits or none (psycopg rolls back on any exception)."""
        with _errors(self._url):
            conn = self.conn
            with conn.transaction():
                yield conn

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with _errors(self._url):
            return self.conn.execute(sql, params).fetchall()

    # ------------------------------------------------------------------ documents

    def list_documents(self, with_embeddings: bool = False, with_summaries: bool = True) -> list[DocumentRecord]:
        """All documents ordered by path, then root. with_summaries=False
        leaves `summary` empty: what a build compares, at half the memory."""
        columns = DOC_COLUMNS if with_embeddings else DOC_COLUMNS_NO_EMBEDDING
        if not with_summaries:
            columns = columns.replace(" summary,", " '',")
        return [document_from_row(r) for r in self._rows(f"SELECT {columns} FROM documents ORDER BY path, root")]

    def iter_documents(self, with_embeddings: bool = False, with_summaries: bool = True) -> Iterator[DocumentRecord]:
        """list_documents as an iterator (the rows are fetched at once here)."""
        return iter(self.list_documents(with_embeddings, with_summaries))

    def stored_files(self) -> Iterator[StoredFile]:
        """Every document as a build compares it with its file; see Store.stored_files."""
        return map(StoredFile._make, self._rows(f"SELECT {STORED_FILE_COLUMNS} FROM documents ORDER BY path, root"))

    def document_count(self) -> int:
        return int(self._rows("SELECT count(*) FROM documents")[0][0])

    def document_versions(self) -> list[tuple[str, str]]:
        """(doc_id, version) of every document, by doc_id; see Store.document_versions."""
        rows = self._rows(
            "SELECT doc_id, path, title, sha256, split_fingerprint, summary_fingerprint, updated_at FROM documents ORDER BY doc_id"
        )
        return [(r[0], "\x1f".join(str(v) for v in r[1:])) for r in rows]

    def get_documents(self, doc_ids: list[str]) -> list[DocumentRecord]:
        """The named documents without their embeddings, in the order named; unknown ids left out."""
        unique = list(dict.fromkeys(doc_ids))
        rows = self._rows(f"SELECT {DOC_COLUMNS_NO_EMBEDDING} FROM documents WHERE doc_id = ANY(%s)", (unique,))
        found = {d.doc_id: d for d in (document_from_row(r) for r in rows)}
        return [found[d] for d in unique if d in found]

    def find_documents(self, ref: str, with_embeddings: bool = True) -> list[DocumentRecord]:
        ref = ref.strip()
        if not ref or "\x00" in ref:  # nothing stored holds a NUL (PostgreSQL would refuse the query)
            return []
        columns = DOC_COLUMNS if with_embeddings else DOC_COLUMNS_NO_EMBEDDING
        rows = self._rows(f"SELECT {columns} FROM documents WHERE doc_id = %s", (ref,))
        if rows:
            return [document_from_row(rows[0])]
        norm = ref.replace(os.sep, "/") if os.sep != "/" else ref
        order = " ORDER BY path, root"
        if os.path.isabs(ref):
            rows = self._rows(f"SELECT {columns} FROM documents WHERE root || '/' || path = %s{order}", (norm,))
            return [document_from_row(r) for r in rows]
        while norm.startswith("./"):
            norm = norm[2:]
        rows = self._rows(f"SELECT {columns} FROM documents WHERE path = %s{order}", (norm,))
        if not rows:
            suffix = "/" + norm  # on a path-component boundary, as in the SQLite store
            rows = self._rows(f"SELECT {columns} FROM documents WHERE right(path, %s) = %s{order}", (len(suffix), suffix))
        return [document_from_row(r) for r in rows]

    def get_document(self, ref: str) -> DocumentRecord | None:
        found = self.find_documents(ref)
        return found[0] if len(found) == 1 else None

    def put_document(self, doc: DocumentRecord, nodes: list[NodeRecord], calls: Sequence[CallRow] = ()) -> None:
        """A document, its nodes and the calls that made it, in one transaction.

        The statements go out as one pipeline (psycopg's pipeline mode): a
        builder writes every document it summarizes, and one round trip per
        statement was a large part of its time on a busy server. A doc_id
        that already names another file is refused (the upsert's WHERE) and
        the whole transaction rolled back."""
        for node in nodes:
            if node.doc_id != doc.doc_id:
                raise ValueError(f"node {node.seq} belongs to {node.doc_id}, not {doc.doc_id}")
        now = utc_now()
        self._ensure_vector_table(doc.embedding, doc.embedding_model)
        with self._write() as conn, _pipeline(conn):
            # A stored document keeps its added_at unless the record names one.
            written = conn.execute(
                f"INSERT INTO documents ({DOC_COLUMNS}) VALUES ({', '.join(['%s'] * 18)}) "
                f"ON CONFLICT (doc_id) DO UPDATE SET {_DOC_UPDATES}, "
                "added_at = CASE WHEN %s THEN EXCLUDED.added_at ELSE documents.added_at END "
                "WHERE documents.root = EXCLUDED.root AND documents.path = EXCLUDED.path RETURNING doc_id",
                (*document_params(doc, doc.added_at or now, now), bool(doc.added_at)),
            )
            conn.execute("DELETE FROM nodes WHERE doc_id = %s", (doc.doc_id,))
            if nodes:
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO nodes (doc_id, seq, text, start_char, end_char, pages, token_count) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                        [node_params(n) for n in nodes],
                    )
            conn.execute("DELETE FROM failures WHERE root = %s AND path = %s", (storable(doc.root), storable(doc.path)))
            # The claim ends with the commit: released afterwards, a builder
            # killed in between would leave the row behind for good.
            conn.execute("DELETE FROM claims WHERE doc_id = %s AND owner = %s", (doc.doc_id, self.owner))
            for call in calls:
                _insert_call(conn, call)
            self._write_vector_row(conn, doc.doc_id, doc.embedding, doc.embedding_model)
            if written.fetchone() is None:
                other = conn.execute("SELECT root, path FROM documents WHERE doc_id = %s", (doc.doc_id,)).fetchone()
                raise DocsumError(f"doc_id {doc.doc_id} of {doc.root}/{doc.path} already names {other[0]}/{other[1]}")

    def touch_document(self, doc_id: str, size: int, mtime_ns: int) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE documents SET size = %s, mtime_ns = %s WHERE doc_id = %s", (int(size), int(mtime_ns), doc_id)
            )
            return cur.rowcount > 0

    def update_embedding(self, doc_id: str, embedding: np.ndarray, model: str) -> None:
        blob = encode_embedding(embedding)
        self._ensure_vector_table(embedding, model)
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE documents SET embedding = %s, embedding_model = %s WHERE doc_id = %s", (blob, model, doc_id)
            )
            if cur.rowcount == 0:
                raise KeyError(doc_id)
            self._write_vector_row(conn, doc_id, embedding, model)

    def remove_document(self, doc_id: str) -> bool:
        with self._write() as conn:
            conn.execute("DELETE FROM claims WHERE doc_id = %s AND owner = %s", (doc_id, self.owner))
            return conn.execute("DELETE FROM documents WHERE doc_id = %s", (doc_id,)).rowcount > 0

    def nodes_for(self, doc_ids: list[str]) -> dict[str, list[NodeRecord]]:
        result: dict[str, list[NodeRecord]] = {doc_id: [] for doc_id in doc_ids}
        rows = self._rows(
            "SELECT doc_id, seq, text, start_char, end_char, pages, token_count FROM nodes "
            "WHERE doc_id = ANY(%s) ORDER BY doc_id, seq",
            (list(result),),
        )
        for row in rows:
            result[row[0]].append(node_from_row(row))
        return result

    def summary_matrix(self) -> tuple[list[str], np.ndarray | None, str | None]:
        return stack_embeddings(self._rows("SELECT doc_id, embedding, embedding_model FROM documents ORDER BY path, root"))

    def embedding_dim(self, model: str) -> int | None:
        rows = self._rows(
            "SELECT length(embedding) FROM documents WHERE embedding_model = %s AND embedding IS NOT NULL LIMIT 1",
            (model,),
        )
        return int(rows[0][0]) // 4 if rows and rows[0][0] else None

    def vector_changes(self, since: int) -> VectorChanges:
        """Documents written or removed by transactions from `since` on (0:
        every document), read in one snapshot; the generation is that
        snapshot's xmin, so a transaction still running now is reported again
        next time rather than missed. Only ids and vectors travel."""
        with _errors(self._url):
            conn = self.conn
            # REPEATABLE READ: the xmin, the rows and the tombstones all come from one snapshot.
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                generation = int(conn.execute("SELECT pg_snapshot_xmin(pg_current_snapshot())::text").fetchone()[0])
                store_id = str(self.get_meta("store_id", ""))
                if since > generation:
                    since = 0
                if since == 0:
                    rows = conn.execute("SELECT doc_id, embedding, embedding_model FROM documents ORDER BY path, root").fetchall()
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
        with _errors(self._url):
            conn = self.conn
            self._pgvector_note = pgvector.try_create_extension(conn, lambda exc: one_line(self._url, exc))
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

    def _ensure_vector_table(self, vector: np.ndarray | None, model: str | None) -> None:
        """Before the first searchable vector is written: the table, sized by it."""
        if self._pgvector and self._vector_dim is None and vector is not None and pgvector.searchable(model):
            with _errors(self._url):
                self._vector_dim = pgvector.create_table(self.conn, int(vector.shape[-1]))

    def _write_vector_row(self, conn: psycopg.Connection[Any], doc_id: str, vector: np.ndarray | None, model: str | None) -> None:
        if self._pgvector and self._vector_dim is not None:
            pgvector.write_row(conn, self._vector_dim, doc_id, vector, model)

    def server_search(self) -> pgvector.ServerSearch | None:
        """Whether questions find nearest summaries in SQL now (None: the
        local vector file). A writer first adds rows other builders left
        out (they started before the table existed)."""
        with _errors(self._url):
            if not self.readonly and self._pgvector:
                self._vector_dim = self._vector_dim or pgvector.table_dim(self.conn)
                if self._vector_dim is not None:
                    pgvector.add_missing_rows(self.conn, self._vector_dim)
            found, self._pgvector_note = pgvector.server_search(self.conn)
        return found

    def nearest_summaries(self, query: np.ndarray, limit: int | None) -> tuple[list[str], np.ndarray]:
        """The `limit` documents whose summary vectors are nearest `query`, found
        by the server (every document when None); see pgvector.nearest."""
        with _errors(self._url):
            return pgvector.nearest(self.conn, query, limit)

    def search_description(self) -> str:
        found = self.server_search()
        if found is not None:
            how = "an HNSW index" if found.indexed else f"an exact scan (pgvector indexes at most {pgvector.HNSW_MAX_DIM} dimensions)"
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
        """Take `doc_id` for this builder; False when a live builder holds it.

        A fresh claim is one INSERT in its own transaction (one round trip:
        every builder makes one per document it reaches, so this is the
        hot path); an existing one is taken over only when it expired or its
        holder's connection is gone, and only by one builder (FOR UPDATE SKIP
        LOCKED: the others skip the row another is taking)."""
        interval = f"{self.claim_seconds} seconds"
        with _errors(self._url):
            conn = self.conn
            pid = conn.info.backend_pid
            fresh = conn.execute(
                "INSERT INTO claims (doc_id, owner, backend_pid, expires_at) "
                "VALUES (%s, %s, %s, now() + %s::interval) ON CONFLICT (doc_id) DO NOTHING RETURNING doc_id",
                (doc_id, self.owner, pid, interval),
            ).fetchone()
        if fresh is None:
            with self._write() as conn:
                stale = conn.execute(
                    "SELECT doc_id FROM claims c WHERE doc_id = %s AND (owner = %s OR expires_at < now() "
                    "OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = c.backend_pid)) "
                    "FOR UPDATE SKIP LOCKED",
                    (doc_id, self.owner),
                ).fetchone()
                if stale is None:
                    return False
                conn.execute(
                    "UPDATE claims SET owner = %s, backend_pid = %s, expires_at = now() + %s::interval WHERE doc_id = %s",
                    (self.owner, pid, interval, doc_id),
                )
        if self._heartbeat is None:
            self._heartbeat = _Heartbeat(self._url, self.owner, self.claim_seconds)
        return True

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
            "LEFT JOIN documents d ON d.txid >= %s::text::xid8",
            (str(token),),
        )
        return int(rows[0][0]), {r[1]: StoredVersion(*r[2:]) for r in rows if r[1] is not None}

    def release_claim(self, doc_id: str) -> None:
        """One statement, its own transaction (a stored document's claim is
        already gone: put_document ends it)."""
        with _errors(self._url):
            self.conn.execute("DELETE FROM claims WHERE doc_id = %s AND owner = %s", (doc_id, self.owner))

    # ------------------------------------------------------------------ failures

    def record_failure(self, root: str, path: str, error: str) -> int:
        now = utc_now()
        root, path, error = failure_params(root, path, error)
        with self._write() as conn:
            row = conn.execute(
                "INSERT INTO failures (root, path, error, attempts, first_seen, last_seen) VALUES (%s, %s, %s, 1, %s, %s) "
                "ON CONFLICT (root, path) DO UPDATE SET error = EXCLUDED.error, attempts = failures.attempts + 1, "
                "last_seen = EXCLUDED.last_seen RETURNING attempts",
                (root, path, error, now, now),
            ).fetchone()
        return int(row[0]) if row else 1

    def failures(self) -> list[dict[str, Any]]:
        rows = self._rows("SELECT root, path, error, attempts, first_seen, last_seen FROM failures ORDER BY root, path")
        keys = ("root", "path", "error", "attempts", "first_seen", "last_seen")
        return [dict(zip(keys, r)) for r in rows]

    def clear_failure(self, root: str, path: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM failures WHERE root = %s AND path = %s", (storable(root), storable(path)))

    # ------------------------------------------------------------------ runs and usage

    def start_run(self, kind: str, settings: dict[str, Any]) -> int:
        with self._write() as conn:
            row = conn.execute(
                "INSERT INTO runs (kind, started_at, status, settings) VALUES (%s, %s, 'running', %s) RETURNING id",
                (kind, utc_now(), dumps_json(scrub_settings(settings))),
            ).fetchone()
        return int(row[0])

    def close_abandoned_runs(self, kind: str) -> int:
        """Mark runs of `kind` left 'running' by a builder that is gone (its
        backend no longer exists) as 'killed'; other builders' live runs stay."""
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE runs SET status = 'killed', finished_at = COALESCE(finished_at, %s) "
                "WHERE kind = %s AND status = 'running' "
                "AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = runs.backend_pid)",
                (utc_now(), kind),
            )
            return int(cur.rowcount)

    def record_call(
        self, run_id: int, kind: str, model: str, prompt_tokens: int, completion_tokens: int, seconds: float, ok: bool
    ) -> None:
        with self._write() as conn:
            _insert_call(conn, (run_id, kind, model, prompt_tokens, completion_tokens, seconds, ok))

    def finish_run(self, run_id: int, status: str, usage: dict[str, Any], documents: dict[str, Any]) -> None:
        with self._write() as conn:
            n, p, c = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0) "
                "FROM calls WHERE run_id = %s",
                (run_id,),
            ).fetchone()
            cur = conn.execute(
                "UPDATE runs SET finished_at = %s, status = %s, llm_calls = %s, prompt_tokens = %s, "
                "completion_tokens = %s, usage = %s, documents = %s WHERE id = %s",
                (
                    utc_now(), status, int(usage.get("llm_calls", n)), int(usage.get("prompt_tokens", p)),
                    int(usage.get("completion_tokens", c)), dumps_json(scrub_settings(usage)), dumps_json(documents),
                    run_id,
                ),
            )  # fmt: skip
            if cur.rowcount == 0:
                raise KeyError(run_id)
            # Claims nobody holds any more (a builder killed after recording a
            # failure, before releasing): swept, so the table shows only live work.
            conn.execute(
                "DELETE FROM claims c WHERE c.expires_at < now() "
                "OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = c.backend_pid)"
            )

    def runs(self, limit: int = 20) -> list[dict[str, Any]]:
        rows = self._rows(
            "SELECT id, kind, started_at, finished_at, status, settings, llm_calls, prompt_tokens, "
            "completion_tokens, usage, documents FROM runs ORDER BY id DESC LIMIT %s",
            (int(limit),),
        )
        keys = ("id", "kind", "started_at", "finished_at", "status", "settings", "llm_calls", "prompt_tokens",
                "completion_tokens", "usage", "documents")  # fmt: skip
        out = []
        for r in rows:
            run = dict(zip(keys, r))
            for key in ("settings", "usage", "documents"):
                run[key] = json.loads(run[key])
            out.append(run)
        return out

    def calls(self, run_id: int) -> list[dict[str, Any]]:
        rows = self._rows(
            "SELECT kind, model, prompt_tokens, completion_tokens, seconds, ok, at FROM calls WHERE run_id = %s ORDER BY id",
            (run_id,),
        )
        keys = ("kind", "model", "prompt_tokens", "completion_tokens", "seconds", "ok", "at")
        return [dict(zip(keys, (*r[:5], bool(r[5]), r[6]))) for r in rows]

    # ------------------------------------------------------------------ meta and health

    def get_meta(self, key: str, default: Any = None) -> Any:
        rows = self._rows("SELECT value FROM meta WHERE key = %s", (key,))
        return default if not rows else json.loads(rows[0][0])

    def set_meta(self, key: str, value: Any) -> None:
        encoded = json.dumps(value, sort_keys=True)
        with self._write() as conn:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (key, encoded),
            )

    def integrity_ok(self) -> bool:
        """The server guards its own pages; what can be checked here is that every table answers."""
        try:
            for table in ("documents", "nodes", "failures", "runs", "calls", "meta", "claims"):
                self._rows(f"SELECT 1 FROM {table} LIMIT 1")
        except DocsumError:
            return False
        return True


def _insert_call(conn: psycopg.Connection[Any], call: CallRow) -> None:
    conn.execute(
        "INSERT INTO calls (run_id, kind, model, prompt_tokens, completion_tokens, seconds, ok, at) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        (*call_params(call), utc_now()),
    )


def _pipeline(conn: psycopg.Connection[Any]) -> contextlib.AbstractContextManager[Any]:
    """psycopg's pipeline mode where this libpq has it (14 and later), else nothing."""
    return conn.pipeline() if _psycopg().Pipeline.is_supported() else contextlib.nullcontext()


@contextlib.contextmanager
def _errors(url: str, what: str = "") -> Iterator[None]:
    """psycopg errors as one-line DocsumErrors that never carry the password."""
    psycopg = _psycopg()
    try:
        yield
    except psycopg.Error as exc:
        prefix = f"{display_location(url)}: {what + ': ' if what else ''}"
        raise DocsumError(f"{prefix}{one_line(url, exc)}") from None


def one_line(url: str, exc: BaseException) -> str:
    """A driver's message on one line, any password of `url` replaced by ***
    (for every path that shows one: errors, warnings, `config show`)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    for secret in location_secrets(url):
        if secret:
            text = text.replace(secret, "***")
    return text


class _Heartbeat:
    """Keeps this builder's claims alive, on its own connection and thread, so a
    long LLM call never lets a live builder's claim expire."""

    def __init__(self, url: str, owner: str, claim_seconds: float) -> None:
        self._url = url
        self._owner = owner
        self._claim_seconds = claim_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="docsum-claims", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            conn = PostgresStore._connect(self._url)
        except DocsumError as exc:
            log.warning("claims heartbeat cannot connect (%s); claims expire after %.0f s", exc, self._claim_seconds)
            return
        try:
            while not self._stop.wait(self._claim_seconds / 3):
                conn.execute(
                    "UPDATE claims SET expires_at = now() + %s::interval WHERE owner = %s",
                    (f"{self._claim_seconds} seconds", self._owner),
                )
        except Exception as exc:  # noqa: BLE001 - a lost heartbeat must not kill the build
            log.warning("claims heartbeat stopped (%s)", one_line(self._url, exc)[:160])
        finally:
            conn.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
