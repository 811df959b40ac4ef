"""The local store: one SQLite file per index (the build lock beside it is in
docsum.store.lock; the schema, its migrations and the connection settings in
docsum.store.sqlite_schema; the statements shared with PostgreSQL in
docsum.store.sqlbase).

Design notes (the why):

* Every write is one explicit `BEGIN IMMEDIATE` transaction. IMMEDIATE takes the
  write lock up front, so a waiting writer goes through busy_timeout instead of
  failing with SQLITE_BUSY when it upgrades a read lock in the middle of a
  transaction; and a document is never half written (row without its nodes).
* Files are private (0600, directory 0700): summaries of someone's documents are
  as sensitive as the documents.

The connection belongs to the thread that opened the Store (the asyncio loop
thread); sqlite3's default check_same_thread guard is kept on to catch misuse.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docsum.errors import DocsumError, StoreDamagedError
from docsum.paths import private_umask
from docsum.store import damage, sqlite_schema
from docsum.store.records import Executor, StoredVersion, decode_embedding
from docsum.store.sqlbase import SqlStore
from docsum.store.vectors import VectorChange, VectorChanges, cache_path_for

if TYPE_CHECKING:  # numpy is imported where vectors are touched: listing documents needs none
    import numpy as np

# Vectors fetched per query by vector_changes: 1,024 x 1,536 float32 is 6 MB.
_VECTOR_BATCH = 1024


class Store(SqlStore):
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
                conn = sqlite_schema.connect(path, readonly)
            except (OSError, sqlite3.OperationalError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise DocsumError(f"{path}: cannot open the store ({reason})") from exc
            try:
                if not exists:
                    # sqlite creates the file at open; umask already made it
                    # 0600, chmod also covers a file system that ignores umask.
                    os.chmod(path, 0o600)
                version = sqlite_schema.check_version(conn, path)
                if version == 0 and readonly:
                    # An empty database: no store yet, and a reader creates none.
                    raise FileNotFoundError(errno.ENOENT, "no docsum store here (empty file)", str(path))
                if not readonly:
                    sqlite_schema.configure_writer(conn)
                    sqlite_schema.migrate(conn)
                elif version < len(sqlite_schema.MIGRATIONS):
                    conn.close()
                    sqlite_schema.upgrade(path, version)
                    conn = sqlite_schema.connect(path, readonly)
                    sqlite_schema.check_version(conn, path)
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
            conn = sqlite_schema.connect(path, readonly=True)
        except (OSError, sqlite3.OperationalError) as exc:
            raise DocsumError(f"{path}: cannot open the store ({exc})") from exc
        try:
            sqlite_schema.check_version(conn, path)
        finally:
            conn.close()

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

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if not damage.is_damaged_text(exc):
                raise
        # Text that is not UTF-8 (docsum.store.damage): set aside and named;
        # a reader stops there, a writer reads again and rebuilds the document.
        damage.repair(self.conn, self.path, self.readonly)
        return self.conn.execute(sql, params).fetchall()

    def _iter_rows(self, sql: str, params: Sequence[Any] = ()) -> Iterator[tuple[Any, ...]]:
        yielded = False
        try:
            for row in self.conn.execute(sql, params):
                yielded = True
                yield row
            return
        except sqlite3.OperationalError as exc:
            if not damage.is_damaged_text(exc):
                raise
        damage.repair(self.conn, self.path, self.readonly)
        if yielded:  # rows already given cannot be taken back: the caller starts over
            raise StoreDamagedError(f"{self.path}: damaged text was set aside while it was being read; run again")
        yield from self.conn.execute(sql, params)

    def _insert_id(self, conn: Executor, sql: str, params: Sequence[Any]) -> int:
        return int(conn.execute(sql, params).lastrowid or 0)

    # ------------------------------------------------------------------ documents

    def vector_changes(self, since: int) -> VectorChanges:
        """The documents whose summary vector changed after generation `since`
        (added, re-embedded or removed), with their current vectors, fetched
        in batches as the caller iterates. See docsum.store.vectors.VectorSource."""
        conn = self.conn
        store_id = str(self.get_meta("store_id", ""))
        generation = int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM vector_log").fetchone()[0])
        if since > generation:
            since = 0
        count = int(
            conn.execute("SELECT COUNT(*) FROM vector_log WHERE seq > ? AND seq <= ?", (since, generation)).fetchone()[
                0
            ]
        )

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

    @property
    def vectors_file(self) -> Path:
        """Where questions keep the summary vectors of this store (docsum.store.vectors)."""
        return cache_path_for(self.path)

    def search_description(self) -> str:
        return f"SQLite store {self.path}: summary vectors scored in this process"

    def server_search(self) -> None:
        """SQLite searches nothing itself: questions score the vector file."""
        return None

    def nearest_summaries(self, query: np.ndarray, limit: int | None) -> tuple[list[str], np.ndarray]:
        raise DocsumError(f"{self.path}: a SQLite store does not search vectors itself; use the vector file")

    # ------------------------------------------------------------------ builders

    def claim(self, doc_id: str) -> bool:
        """Always granted: the build lock already makes this builder the only one."""
        return True

    def release_claim(self, doc_id: str) -> None:
        return None

    def written_since(self, token: int | None) -> tuple[int, dict[str, StoredVersion]]:
        """Nothing: the build lock makes a builder the only writer."""
        return 0, {}

    # ------------------------------------------------------------------ health

    def integrity_ok(self) -> bool:
        """PRAGMA quick_check (O(N), unlike integrity_check's index cross-checks)."""
        try:
            rows = self.conn.execute("PRAGMA quick_check").fetchall()
        except sqlite3.DatabaseError:
            return False
        return [tuple(r) for r in rows] == [("ok",)]
