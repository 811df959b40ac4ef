"""The local store: one SQLite file per index (the build lock beside it is in docsum.store.lock).

Design notes (the why):

* WAL journal mode, so `docsum ask` in one process can read while `docsum build`
  writes in another; readers see the last committed state and never block.
* synchronous=NORMAL: in WAL mode a committed transaction survives a process
  crash (only a power loss may drop the last commits, never corrupt the file),
  and it avoids one fsync per commit, which matters because a build commits once
  per document and once per LLM call.
* Every write is one explicit `BEGIN IMMEDIATE` transaction. IMMEDIATE takes the
  write lock up front, so a waiting writer goes through busy_timeout instead of
  failing with SQLITE_BUSY when it upgrades a read lock in the middle of a
  transaction; and a document is never half written (row without its nodes).
* The schema evolves only through MIGRATIONS (docsum.store.sqlite_schema), ordered and append-only; the
  schema version is PRAGMA user_version. A store written by a newer docsum is
  refused before anything is written to it.
* Files are private (0600, directory 0700): summaries of someone's documents are
  as sensitive as the documents.

The connection belongs to the thread that opened the Store (the asyncio loop
thread); sqlite3's default check_same_thread guard is kept on to catch misuse.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from docsum.errors import DocsumError, StoreVersionError
from docsum.paths import private_umask
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
from docsum.store.sqlite_schema import MIGRATIONS, created_tables, split_statements
from docsum.store.vectors import VectorChange, VectorChanges, cache_path_for

if TYPE_CHECKING:  # numpy is imported where vectors are touched: listing documents needs none
    import numpy as np

BUSY_TIMEOUT_MS = 30_000

# SQLite limits the number of bound parameters; stay far below every default.
_IN_CHUNK = 500
# Vectors fetched per query by vector_changes: 1,024 x 1,536 float32 is 6 MB.
_VECTOR_BATCH = 1024


class Store:
    """One open store file. Create with Store.open(); use as a context manager."""

    def __init__(self, path: Path, conn: sqlite3.Connection, readonly: bool) -> None:
        self.path = path
        self.readonly = readonly
        self._conn: sqlite3.Connection | None = conn

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, path: Path | str, *, create: bool = True, readonly: bool = False) -> Store:
        """Open (and, if needed, create and migrate) the store at `path`.

        create=False or readonly=True and no file: FileNotFoundError (also for
        readonly=True on an empty file: nothing has been stored there).
        A store from a newer docsum: StoreVersionError, file left untouched.
        Any other file, SQLite databases of other applications included:
        DocsumError, file left untouched (docsum converts only its own files).
        readonly=True on a store from an older docsum: it is migrated first
        (through a short-lived writable connection: `docsum ask` must keep
        working after an upgrade, without a build first), then opened
        read-only; StoreVersionError if it cannot be written to. A store in a
        folder the reader cannot write to is still readable.
        """
        path = Path(path).expanduser()
        exists = path.exists()
        if not exists and (not create or readonly):
            raise FileNotFoundError(errno.ENOENT, "no docsum store here", str(path))

        if path.is_dir():
            raise DocsumError(f"{path}: is a directory, not a docsum store file")
        with private_umask():
            try:
                if not exists:
                    # Under umask 077 every directory created here is 0700.
                    path.parent.mkdir(parents=True, exist_ok=True)
                conn = cls._connect(path, readonly)
            except (OSError, sqlite3.OperationalError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise DocsumError(f"{path}: cannot open the store ({reason})") from exc
            try:
                if not exists:
                    # sqlite creates the file at open; umask already made it
                    # 0600, chmod also covers a file system that ignores umask.
                    os.chmod(path, 0o600)
                version = cls._check_version(conn, path)
                if version == 0 and readonly:
                    # An empty database: no store yet, and a reader creates none.
                    raise FileNotFoundError(errno.ENOENT, "no docsum store here (empty file)", str(path))
                if not readonly:
                    cls._configure_writer(conn)
                    cls._migrate(conn)
                elif version < len(MIGRATIONS):
                    conn.close()
                    cls._upgrade(path, version)
                    conn = cls._connect(path, readonly)
                    cls._check_version(conn, path)
            except BaseException:
                conn.close()
                raise
        return cls(path, conn, readonly)

    @classmethod
    def verify(cls, path: Path | str) -> None:
        """Refuse, before anything is created next to it (the build lock), a
        file at `path` that docsum must not write to: a folder, a file that is
        not a docsum store, a store from a newer docsum. Writes nothing; a
        missing file passes (the build will create it)."""
        path = Path(path).expanduser()
        if not path.exists():
            return
        if path.is_dir():
            raise DocsumError(f"{path}: is a directory, not a docsum store file")
        try:
            conn = cls._connect(path, readonly=True)
        except (OSError, sqlite3.OperationalError) as exc:
            raise DocsumError(f"{path}: cannot open the store ({exc})") from exc
        try:
            cls._check_version(conn, path)
        finally:
            conn.close()

    @classmethod
    def _upgrade(cls, path: Path, version: int) -> None:
        """Migrate an older store for a caller that only reads it."""
        try:
            conn = cls._connect(path, readonly=False)
        except (OSError, sqlite3.OperationalError) as exc:
            reason = str(exc)
        else:
            try:
                cls._check_version(conn, path)  # another docsum may have moved it on meanwhile
                cls._configure_writer(conn)
                cls._migrate(conn)
                return
            except sqlite3.OperationalError as exc:  # e.g. "attempt to write a readonly database"
                reason = str(exc)
            finally:
                conn.close()
        raise StoreVersionError(
            f"{path}: schema v{version} is older than v{len(MIGRATIONS)} and cannot be upgraded here ({reason}); "
            "run `docsum build` once with write access to upgrade it"
        )

    @staticmethod
    def _connect(path: Path, readonly: bool) -> sqlite3.Connection:
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

    @staticmethod
    def _check_version(conn: sqlite3.Connection, path: Path) -> int:
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
            raise DocsumError(
                f"{path}: not a docsum store (an SQLite database without docsum's tables); left untouched"
            )
        if version > len(MIGRATIONS):
            raise StoreVersionError(
                f"{path}: written by a newer docsum (schema v{version}, this one knows up to "
                f"v{len(MIGRATIONS)}); upgrade docsum"
            )
        return version

    @staticmethod
    def _configure_writer(conn: sqlite3.Connection) -> None:
        # journal_mode is persistent in the file; only switch when needed so an
        # open next to a running build does not ask for an exclusive lock.
        if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
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

    # ------------------------------------------------------------------ lifetime

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise DocsumError(f"{self.path}: store is closed")
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def label(self) -> str:
        """The store as printed in reports and messages."""
        return str(self.path)

    @property
    def shared(self) -> bool:
        """One builder at a time (the build lock), so no claims are needed."""
        return False

    @property
    def schema_version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: all of it commits or none of it does.

        BaseException, not Exception: a KeyboardInterrupt or asyncio
        cancellation in the middle must roll back too.
        """
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            # SQLite may already have rolled back by itself (e.g. disk full).
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")

    # ------------------------------------------------------------------ documents

    def list_documents(self, with_embeddings: bool = False, with_summaries: bool = True) -> list[DocumentRecord]:
        """All documents ordered by path (then root). with_summaries=False
        leaves `summary` empty: what a build compares, at half the memory."""
        return list(self.iter_documents(with_embeddings, with_summaries))

    def iter_documents(self, with_embeddings: bool = False, with_summaries: bool = True) -> Iterator[DocumentRecord]:
        """list_documents, a row at a time (memory stays flat for any store)."""
        columns = DOC_COLUMNS if with_embeddings else DOC_COLUMNS_NO_EMBEDDING
        if not with_summaries:
            columns = columns.replace(" summary,", " '',")
        for row in self.conn.execute(f"SELECT {columns} FROM documents ORDER BY path, root"):
            yield document_from_row(row)

    def stored_files(self) -> Iterator[StoredFile]:
        """Every document as a build compares it with its file, by path: eight
        columns, where the full listing's eighteen were most of the reading
        of an unchanged rebuild at 100,000 documents."""
        return map(StoredFile._make, self.conn.execute(f"SELECT {STORED_FILE_COLUMNS} FROM documents ORDER BY path, root"))

    def document_count(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])

    def document_versions(self) -> list[tuple[str, str]]:
        """(doc_id, version) of every document, by doc_id: the version changes
        whenever the document's text, nodes or summary do (an index built from
        them, such as the BM25 one, compares these to know it is stale).
        Reads no summary or node text."""
        rows = self.conn.execute(
            "SELECT doc_id, path, title, sha256, split_fingerprint, summary_fingerprint, updated_at FROM documents ORDER BY doc_id"
        ).fetchall()
        return [(r[0], "\x1f".join(str(v) for v in r[1:])) for r in rows]

    def get_documents(self, doc_ids: list[str]) -> list[DocumentRecord]:
        """The named documents without their embeddings, in the order named;
        unknown ids are left out. Reads only those rows, whatever the store's size."""
        found: dict[str, DocumentRecord] = {}
        unique = list(dict.fromkeys(doc_ids))
        for start in range(0, len(unique), _IN_CHUNK):
            chunk = unique[start : start + _IN_CHUNK]
            rows = self.conn.execute(
                f"SELECT {DOC_COLUMNS_NO_EMBEDDING} FROM documents WHERE doc_id IN ({', '.join('?' * len(chunk))})", chunk
            ).fetchall()
            for row in rows:
                doc = document_from_row(row)
                found[doc.doc_id] = doc
        return [found[d] for d in unique if d in found]

    def find_documents(self, ref: str, with_embeddings: bool = True) -> list[DocumentRecord]:
        """Candidates for `ref`, most specific rule first; see get_document.

        Lets the CLI explain an ambiguous reference instead of just "not found".
        with_embeddings=False leaves the vectors out (`docsum show` prints
        none, and decoding one would load numpy).
        """
        ref = ref.strip()
        if not ref:
            return []
        conn = self.conn
        columns = DOC_COLUMNS if with_embeddings else DOC_COLUMNS_NO_EMBEDDING
        row = conn.execute(f"SELECT {columns} FROM documents WHERE doc_id = ?", (ref,)).fetchone()
        if row is not None:
            return [document_from_row(row)]

        norm = ref.replace(os.sep, "/") if os.sep != "/" else ref
        if os.path.isabs(ref):
            # An absolute path names root + path exactly.
            rows = conn.execute(
                f"SELECT {columns} FROM documents WHERE root || '/' || path = ? ORDER BY path, root",
                (norm,),
            ).fetchall()
            return [document_from_row(r) for r in rows]
        while norm.startswith("./"):
            norm = norm[2:]
        rows = conn.execute(
            f"SELECT {columns} FROM documents WHERE path = ? ORDER BY path, root", (norm,)
        ).fetchall()
        if rows:
            return [document_from_row(r) for r in rows]
        # Suffix on a path-component boundary: "b.pdf" matches "x/b.pdf" but
        # not "xb.pdf". substr with a negative start counts characters, like len().
        suffix = "/" + norm
        rows = conn.execute(
            f"SELECT {columns} FROM documents WHERE substr(path, ?) = ? ORDER BY path, root",
            (-len(suffix), suffix),
        ).fetchall()
        return [document_from_row(r) for r in rows]

    def get_document(self, ref: str) -> DocumentRecord | None:
        """The document `ref` names: its doc_id, its stored path (exact), an
        absolute path (root/path), or a unique path suffix on a '/' boundary.
        None when nothing or more than one document matches."""
        found = self.find_documents(ref)
        return found[0] if len(found) == 1 else None

    def put_document(self, doc: DocumentRecord, nodes: list[NodeRecord], calls: Sequence[CallRow] = ()) -> None:
        """Insert or replace a document and all its nodes in ONE transaction,
        and clear any recorded failure for its (root, path). `calls` (the LLM
        calls that made it) go in the same transaction, so a crash can never
        keep a document and lose what it cost.

        added_at is kept from the stored row when replacing (unless given);
        updated_at is always now.
        """
        for node in nodes:
            if node.doc_id != doc.doc_id:
                raise ValueError(f"node {node.seq} belongs to {node.doc_id}, not {doc.doc_id}")
        now = utc_now()
        with self._write() as conn:
            existing = conn.execute(
                "SELECT root, path, added_at FROM documents WHERE doc_id = ?", (doc.doc_id,)
            ).fetchone()
            if existing is not None and (existing[0], existing[1]) != (doc.root, doc.path):
                # 48-bit ids make this astronomically unlikely, but silently
                # overwriting another document would be far worse than an error.
                raise DocsumError(
                    f"doc_id {doc.doc_id} of {doc.root}/{doc.path} already names {existing[0]}/{existing[1]}"
                )
            added_at = doc.added_at or (existing[2] if existing is not None else now)
            conn.execute(
                f"""
                INSERT INTO documents ({DOC_COLUMNS}) VALUES ({", ".join("?" * 18)})
                ON CONFLICT(doc_id) DO UPDATE SET
                    path = excluded.path, root = excluded.root, size = excluded.size,
                    mtime_ns = excluded.mtime_ns, sha256 = excluded.sha256, title = excluded.title,
                    kind = excluded.kind, token_count = excluded.token_count,
                    page_count = excluded.page_count, split_fingerprint = excluded.split_fingerprint,
                    summary_fingerprint = excluded.summary_fingerprint, summary = excluded.summary,
                    summary_model = excluded.summary_model, embedding = excluded.embedding,
                    embedding_model = excluded.embedding_model, added_at = excluded.added_at,
                    updated_at = excluded.updated_at
                """,
                document_params(doc, added_at, now),
            )
            # Replace, not merge: a re-split document may have fewer nodes.
            conn.execute("DELETE FROM nodes WHERE doc_id = ?", (doc.doc_id,))
            for node in nodes:
                # Row by row (not executemany over a generator) so an error in
                # any node surfaces here, inside the transaction, and rolls back.
                conn.execute(
                    "INSERT INTO nodes (doc_id, seq, text, start_char, end_char, pages, token_count) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    node_params(node),
                )
            conn.execute("DELETE FROM failures WHERE root = ? AND path = ?", (storable(doc.root), storable(doc.path)))
            for call in calls:
                self._insert_call(conn, call)

    def touch_document(self, doc_id: str, size: int, mtime_ns: int) -> bool:
        """Record a new size/mtime for a document whose content is unchanged (a
        touch, a copy, a checkout), so the next build need not hash it again.
        updated_at is left alone: nothing the user sees changed."""
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE documents SET size = ?, mtime_ns = ? WHERE doc_id = ?", (int(size), int(mtime_ns), doc_id)
            )
            return cur.rowcount > 0

    def update_embedding(self, doc_id: str, embedding: np.ndarray, model: str) -> None:
        """Set a document's summary embedding. KeyError if there is no such document."""
        blob = encode_embedding(embedding)
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE documents SET embedding = ?, embedding_model = ? WHERE doc_id = ?",
                (blob, model, doc_id),
            )
            if cur.rowcount == 0:
                raise KeyError(doc_id)

    def remove_document(self, doc_id: str) -> bool:
        """Delete a document (its nodes go with it). False if it was not there."""
        with self._write() as conn:
            cur = conn.execute("DELETE FROM documents WHERE doc_id = ?", (doc_id,))
            return cur.rowcount > 0

    def nodes_for(self, doc_ids: list[str]) -> dict[str, list[NodeRecord]]:
        """Nodes of each requested document in seq order; [] for unknown ids."""
        result: dict[str, list[NodeRecord]] = {doc_id: [] for doc_id in doc_ids}
        unique = list(result)
        for start in range(0, len(unique), _IN_CHUNK):
            chunk = unique[start : start + _IN_CHUNK]
            rows = self.conn.execute(
                "SELECT doc_id, seq, text, start_char, end_char, pages, token_count FROM nodes "
                f"WHERE doc_id IN ({', '.join('?' * len(chunk))}) ORDER BY doc_id, seq",
                chunk,
            ).fetchall()
            for row in rows:
                result[row[0]].append(node_from_row(row))
        return result

    def summary_matrix(self) -> tuple[list[str], np.ndarray | None, str | None]:
        """doc_ids (ordered by path) and their summary embeddings stacked as a
        float32 matrix, with the embedding model.

        The matrix is None when any document lacks an embedding, when the
        dimensions differ, or when the embeddings come from different models
        (mixing vector spaces would rank nonsense). The model is the one model
        all stored embeddings share, else None; callers use it to tell whether
        the query must be embedded with the same model.
        """
        rows = self.conn.execute(
            "SELECT doc_id, embedding, embedding_model FROM documents ORDER BY path, root"
        ).fetchall()
        return stack_embeddings(rows)

    def vector_changes(self, since: int) -> VectorChanges:
        """The documents whose summary vector changed after generation `since`
        (added, re-embedded or removed), with their current vectors, fetched
        in batches as the caller iterates. See docsum.store.vectors.VectorSource."""
        conn = self.conn
        store_id = str(self.get_meta("store_id", ""))
        generation = int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM vector_log").fetchone()[0])
        if since > generation:
            since = 0
        count = int(conn.execute("SELECT COUNT(*) FROM vector_log WHERE seq > ? AND seq <= ?", (since, generation)).fetchone()[0])

        def batches() -> Iterator[list[VectorChange]]:
            last = since
            while True:
                rows = conn.execute(
                    "SELECT l.seq, l.doc_id, d.doc_id IS NULL, d.embedding, d.embedding_model "
                    "FROM vector_log AS l LEFT JOIN documents AS d ON d.doc_id = l.doc_id "
                    "WHERE l.seq > ? AND l.seq <= ? ORDER BY l.seq LIMIT ?",
                    (last, generation, _VECTOR_BATCH),
                ).fetchall()
                if not rows:
                    return
                last = rows[-1][0]
                yield [
                    VectorChange(doc_id, decode_embedding(blob), model if blob is not None else None, bool(gone))
                    for _seq, doc_id, gone, blob, model in rows
                ]

        return VectorChanges(store_id, generation, count, batches())

    def embedding_dim(self, model: str) -> int | None:
        """Size of the `model` vectors already stored (None: none yet)."""
        row = self.conn.execute(
            "SELECT length(embedding) FROM documents WHERE embedding_model = ? AND embedding IS NOT NULL LIMIT 1",
            (model,),
        ).fetchone()
        return int(row[0]) // 4 if row and row[0] else None  # little-endian float32

    @property
    def vectors_file(self) -> Path:
        """Where questions keep the summary vectors of this store (docsum.store.vectors)."""
        return cache_path_for(self.path)

    def search_description(self) -> str:
        return f"SQLite store {self.path}: summary vectors scored in this process"

    def written_since(self, token: int | None) -> tuple[int, dict[str, StoredVersion]]:
        """Nothing: the build lock makes a builder the only writer."""
        return 0, {}

    def server_search(self) -> None:
        """SQLite searches nothing itself: questions score the vector file."""
        return None

    def nearest_summaries(self, query: np.ndarray, limit: int | None) -> tuple[list[str], np.ndarray]:
        raise DocsumError(f"{self.path}: a SQLite store does not search vectors itself; use the vector file")

    def claim(self, doc_id: str) -> bool:
        """Always granted: the build lock already makes this builder the only one."""
        return True

    def release_claim(self, doc_id: str) -> None:
        return None


    # ------------------------------------------------------------------ failures

    def record_failure(self, root: str, path: str, error: str) -> int:
        """Remember that (root, path) failed; attempts counts consecutive runs.
        Returns the attempts so far (1 the first time)."""
        now = utc_now()
        root, path, error = failure_params(root, path, error)
        with self._write() as conn:
            conn.execute(
                """
                INSERT INTO failures (root, path, error, attempts, first_seen, last_seen)
                VALUES (?, ?, ?, 1, ?, ?)
                ON CONFLICT(root, path) DO UPDATE SET
                    error = excluded.error, attempts = attempts + 1, last_seen = excluded.last_seen
                """,
                (root, path, error, now, now),
            )
            row = conn.execute("SELECT attempts FROM failures WHERE root = ? AND path = ?", (root, path)).fetchone()
        return int(row[0]) if row else 1

    def failures(self) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT root, path, error, attempts, first_seen, last_seen FROM failures ORDER BY root, path"
        ).fetchall()
        keys = ("root", "path", "error", "attempts", "first_seen", "last_seen")
        return [dict(zip(keys, r)) for r in rows]

    def clear_failure(self, root: str, path: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM failures WHERE root = ? AND path = ?", (storable(root), storable(path)))

    # ------------------------------------------------------------------ runs and usage

    def start_run(self, kind: str, settings: dict[str, Any]) -> int:
        """Record the start of a build/ask run; returns its id. Secret-looking
        settings keys are dropped (second guard, see _SECRET_KEY)."""
        with self._write() as conn:
            cur = conn.execute(
                "INSERT INTO runs (kind, started_at, status, settings) VALUES (?, ?, 'running', ?)",
                (kind, utc_now(), dumps_json(scrub_settings(settings))),
            )
            return int(cur.lastrowid or 0)

    def close_abandoned_runs(self, kind: str) -> int:
        """Mark runs of `kind` still 'running' as 'killed'. Only for a caller
        that holds the build lock: then no such run can be alive (a SIGKILL or
        power loss left them so). Returns how many were closed."""
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE runs SET status = 'killed', finished_at = COALESCE(finished_at, ?) "
                "WHERE kind = ? AND status = 'running'",
                (utc_now(), kind),
            )
            return int(cur.rowcount)

    def record_call(
        self,
        run_id: int,
        kind: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        seconds: float,
        ok: bool,
    ) -> None:
        """One LLM/embedding call. Committed at once, so usage survives a crash."""
        with self._write() as conn:
            self._insert_call(conn, (run_id, kind, model, prompt_tokens, completion_tokens, seconds, ok))

    @staticmethod
    def _insert_call(conn: sqlite3.Connection, call: CallRow) -> None:
        run_id, kind, model, prompt_tokens, completion_tokens, seconds, ok = call_params(call)
        conn.execute(
            "INSERT INTO calls (run_id, kind, model, prompt_tokens, completion_tokens, seconds, ok, at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, kind, model, prompt_tokens, completion_tokens, seconds, int(ok), utc_now()),
        )

    def finish_run(self, run_id: int, status: str, usage: dict[str, Any], documents: dict[str, Any]) -> None:
        """Close a run. llm_calls / prompt_tokens / completion_tokens come from
        `usage` when present, else are summed from the run's recorded calls."""
        with self._write() as conn:
            n, p, c = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0) "
                "FROM calls WHERE run_id = ?",
                (run_id,),
            ).fetchone()
            cur = conn.execute(
                "UPDATE runs SET finished_at = ?, status = ?, llm_calls = ?, prompt_tokens = ?, "
                "completion_tokens = ?, usage = ?, documents = ? WHERE id = ?",
                (
                    utc_now(),
                    status,
                    int(usage.get("llm_calls", n)),
                    int(usage.get("prompt_tokens", p)),
                    int(usage.get("completion_tokens", c)),
                    dumps_json(scrub_settings(usage)),
                    dumps_json(documents),
                    run_id,
                ),
            )
            if cur.rowcount == 0:
                raise KeyError(run_id)

    def runs(self, limit: int = 20) -> list[dict[str, Any]]:
        """Most recent runs first, JSON columns decoded."""
        rows = self.conn.execute(
            "SELECT id, kind, started_at, finished_at, status, settings, llm_calls, prompt_tokens, "
            "completion_tokens, usage, documents FROM runs ORDER BY id DESC LIMIT ?",
            (int(limit),),
        ).fetchall()
        out: list[dict[str, Any]] = []
        for r in rows:
            out.append(
                {
                    "id": r[0],
                    "kind": r[1],
                    "started_at": r[2],
                    "finished_at": r[3],
                    "status": r[4],
                    "settings": json.loads(r[5]),
                    "llm_calls": r[6],
                    "prompt_tokens": r[7],
                    "completion_tokens": r[8],
                    "usage": json.loads(r[9]),
                    "documents": json.loads(r[10]),
                }
            )
        return out

    def calls(self, run_id: int) -> list[dict[str, Any]]:
        """The recorded calls of one run, in order."""
        rows = self.conn.execute(
            "SELECT kind, model, prompt_tokens, completion_tokens, seconds, ok, at FROM calls "
            "WHERE run_id = ? ORDER BY id",
            (run_id,),
        ).fetchall()
        keys = ("kind", "model", "prompt_tokens", "completion_tokens", "seconds", "ok", "at")
        return [dict(zip(keys, (*r[:5], bool(r[5]), r[6]))) for r in rows]

    # ------------------------------------------------------------------ meta and health

    def get_meta(self, key: str, default: Any = None) -> Any:
        """A store-level setting (any JSON value), or `default` if unset."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def set_meta(self, key: str, value: Any) -> None:
        """Set a store-level setting; `value` must be JSON-serialisable."""
        encoded = json.dumps(value, sort_keys=True)  # no default=str: fail loudly, it must round-trip
        with self._write() as conn:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, encoded),
            )

    def integrity_ok(self) -> bool:
        """PRAGMA quick_check (O(N), unlike integrity_check's index cross-checks)."""
        try:
            rows = self.conn.execute("PRAGMA quick_check").fetchall()
        except sqlite3.DatabaseError:
            return False
        return [tuple(r) for r in rows] == [("ok",)]


def _needs_immutable(path: Path) -> bool:
    """Whether a reader can only open `path` without a -shm file: its folder
    is not writable to us and no writer has left a -shm file there."""
    folder = path.resolve().parent
    shm = folder / (path.name + "-shm")
    return not os.access(folder, os.W_OK) and not shm.exists()
