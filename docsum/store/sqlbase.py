"""What the SQLite and the PostgreSQL store do in the same SQL: reading
documents and nodes, failures, runs and calls, and store-level settings.

Both stores keep the same tables with the same columns (docsum.store.tables),
so most of what they do is one statement that both dialects accept. It is
written once here, with `?` placeholders; a store turns them into its
driver's style (`_sql`). What truly differs stays in each store: opening and
migrating, writing a document (SQLite checks then upserts in one IMMEDIATE
transaction; PostgreSQL pipelines an upsert with its claim), the vector change
log, claims and server-side search.

Every statement here is portable on purpose: no RETURNING (SQLite before 3.35
lacks it), no negative substr start (PostgreSQL reads it differently), no
`%` or `?` inside a literal (the placeholder rewrite would change it).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from docsum.errors import DocsumError
from docsum.store.base import ClosesOnExit
from docsum.store.records import (
    DOC_COLUMNS,
    DOC_COLUMNS_NO_EMBEDDING,
    NODE_COLUMNS,
    STORED_FILE_COLUMNS,
    CallRow,
    DocumentRecord,
    Executor,
    NodeRecord,
    StoredFile,
    call_params,
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
    upsert_assignments,
    utc_now,
)

if TYPE_CHECKING:  # numpy is imported where vectors are touched: listing documents needs none
    import numpy as np

# Ids bound per IN (...) list: SQLite limits bound parameters, and a few
# hundred keep every statement small on either server.
IN_CHUNK = 500


def in_list(count: int) -> str:
    """`(?, ?, ...)` with `count` placeholders."""
    return f"({', '.join('?' * count)})"


def chunks(values: Sequence[str]) -> Iterator[Sequence[str]]:
    """`values` in slices of at most IN_CHUNK (one IN list each)."""
    for start in range(0, len(values), IN_CHUNK):
        yield values[start : start + IN_CHUNK]


# A document's row, inserted or replacing the stored one of the same file;
# the last parameter says whether the record's added_at replaces the stored one.
_DOCUMENT_UPSERT = (
    f"INSERT INTO documents ({DOC_COLUMNS}) VALUES {in_list(len(DOC_COLUMNS.split(',')))} "
    f"ON CONFLICT (doc_id) DO UPDATE SET {upsert_assignments(DOC_COLUMNS, keep=('added_at',))}, "
    "added_at = CASE WHEN ? THEN excluded.added_at ELSE documents.added_at END "
    "WHERE documents.root = excluded.root AND documents.path = excluded.path"
)

_FAILURE_KEYS = ("root", "path", "error", "attempts", "first_seen", "last_seen")
_RUN_KEYS = ("id", "kind", "started_at", "finished_at", "status", "settings", "llm_calls", "prompt_tokens",
             "completion_tokens", "usage", "documents")  # fmt: skip
_RUN_JSON_KEYS = ("settings", "usage", "documents")
_CALL_KEYS = ("kind", "model", "prompt_tokens", "completion_tokens", "seconds", "ok", "at")


class SqlStore(ClosesOnExit):
    """The statements both stores share. A subclass provides the connection
    (`_rows`, `_write`), its placeholder style (`_sql`) and the few hooks
    where its dialect or its sharing model differ."""

    # Added to the WHERE that marks a run of a builder that is gone: PostgreSQL
    # must also check that no live backend still runs it; SQLite's build lock
    # already says no run is alive.
    ABANDONED_RUN_CONDITION = ""
    # Appended to the document upsert; _upserted then reads from its cursor
    # whether the row was written: SQLite by the row count (RETURNING needs
    # SQLite 3.35), PostgreSQL by the row RETURNING gives, read at the end of
    # its pipelined transaction.
    UPSERT_SUFFIX = ""

    # ------------------------------------------------------------------ driver hooks

    def _sql(self, sql: str) -> str:
        """`sql` with this driver's placeholders (SQLite: as written)."""
        return sql

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _iter_rows(self, sql: str, params: Sequence[Any] = ()) -> Iterator[tuple[Any, ...]]:
        """Rows one at a time where the driver can stream them (default: all at once)."""
        return iter(self._rows(sql, params))

    def _write(self) -> contextlib.AbstractContextManager[Any]:
        """One write transaction: all of it commits or none of it does."""
        raise NotImplementedError

    def _exec(self, conn: Executor, sql: str, params: Sequence[Any] = ()) -> Any:
        return conn.execute(self._sql(sql), params)

    def _insert_id(self, conn: Executor, sql: str, params: Sequence[Any]) -> int:
        """Run an INSERT into a table with a generated id; return that id."""
        raise NotImplementedError

    def _upserted(self, cursor: Any) -> bool:
        return int(cursor.rowcount) > 0

    def _document_transaction(self) -> contextlib.AbstractContextManager[Any]:
        """The transaction that writes a document (PostgreSQL pipelines it)."""
        return self._write()

    def _vector_written(self, conn: Executor, doc_id: str, vector: np.ndarray | None, model: str | None) -> None:
        """Inside the transaction that set a document's vector (PostgreSQL keeps a pgvector copy)."""

    def _ready_for_vector(self, vector: np.ndarray | None, model: str | None) -> None:
        """Before a transaction that sets a vector (PostgreSQL may make its vector table)."""

    def _forget_claim(self, conn: Executor, doc_id: str) -> None:
        """Inside the transaction that stores or removes `doc_id` (claims exist on PostgreSQL only)."""

    def _run_finished(self, conn: Executor) -> None:
        """Inside the transaction that closes a run."""

    # ------------------------------------------------------------------ documents

    def list_documents(self, with_embeddings: bool = False, with_summaries: bool = True) -> list[DocumentRecord]:
        """All documents ordered by path (then root). with_summaries=False
        leaves `summary` empty: what a build compares, at half the memory."""
        return list(self.iter_documents(with_embeddings, with_summaries))

    def iter_documents(self, with_embeddings: bool = False, with_summaries: bool = True) -> Iterator[DocumentRecord]:
        """list_documents, a row at a time where the driver streams (memory stays flat for any store)."""
        columns = DOC_COLUMNS if with_embeddings else DOC_COLUMNS_NO_EMBEDDING
        if not with_summaries:
            columns = columns.replace(" summary,", " '',")
        for row in self._iter_rows(f"SELECT {columns} FROM documents ORDER BY path, root"):
            yield document_from_row(row)

    def stored_files(self) -> Iterator[StoredFile]:
        """Every document as a build compares it with its file, by path: eight
        columns, where the full listing's eighteen were most of the reading
        of an unchanged rebuild at 100,000 documents."""
        return map(
            StoredFile._make, self._iter_rows(f"SELECT {STORED_FILE_COLUMNS} FROM documents ORDER BY path, root")
        )

    def document_count(self) -> int:
        return int(self._rows("SELECT COUNT(*) FROM documents")[0][0])

    def document_versions(self) -> list[tuple[str, str]]:
        """(doc_id, version) of every document, by doc_id: the version changes
        whenever the document's text, nodes or summary do (an index built from
        them, such as the BM25 one, compares these to know it is stale).
        Reads no summary or node text."""
        rows = self._rows(
            "SELECT doc_id, path, title, sha256, split_fingerprint, summary_fingerprint, updated_at FROM documents ORDER BY doc_id"
        )
        return [(r[0], "\x1f".join(str(v) for v in r[1:])) for r in rows]

    def get_documents(self, doc_ids: list[str]) -> list[DocumentRecord]:
        """The named documents without their embeddings, in the order named;
        unknown ids are left out. Reads only those rows, whatever the store's size."""
        unique = list(dict.fromkeys(doc_ids))
        found: dict[str, DocumentRecord] = {}
        for chunk in chunks(unique):
            for row in self._rows(
                f"SELECT {DOC_COLUMNS_NO_EMBEDDING} FROM documents WHERE doc_id IN {in_list(len(chunk))}", chunk
            ):
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
        if not ref or "\x00" in ref:  # nothing stored holds a NUL (PostgreSQL would refuse the query)
            return []
        select = f"SELECT {DOC_COLUMNS if with_embeddings else DOC_COLUMNS_NO_EMBEDDING} FROM documents WHERE"
        rows = self._rows(f"{select} doc_id = ?", (ref,))
        if rows:
            return [document_from_row(rows[0])]
        norm = ref.replace(os.sep, "/") if os.sep != "/" else ref
        if os.path.isabs(ref):
            # An absolute path names root + path exactly.
            rows = self._rows(f"{select} root || '/' || path = ? ORDER BY path, root", (norm,))
            return [document_from_row(r) for r in rows]
        while norm.startswith("./"):
            norm = norm[2:]
        rows = self._rows(f"{select} path = ? ORDER BY path, root", (norm,))
        if not rows:
            # Suffix on a path-component boundary: "b.pdf" matches "x/b.pdf" but
            # not "xb.pdf". Lengths count characters in both dialects; a path
            # shorter than the suffix yields itself, which never equals it.
            suffix = "/" + norm
            rows = self._rows(
                f"{select} substr(path, length(path) - CAST(? AS INTEGER) + 1) = ? ORDER BY path, root",
                (len(suffix), suffix),
            )
        return [document_from_row(r) for r in rows]

    def get_document(self, ref: str) -> DocumentRecord | None:
        """The document `ref` names: its doc_id, its stored path (exact), an
        absolute path (root/path), or a unique path suffix on a '/' boundary.
        None when nothing or more than one document matches."""
        found = self.find_documents(ref)
        return found[0] if len(found) == 1 else None

    def put_document(self, doc: DocumentRecord, nodes: list[NodeRecord], calls: Sequence[CallRow] = ()) -> None:
        """Insert or replace a document and all its nodes in ONE transaction,
        and clear any recorded failure for its (root, path) and its claim.
        `calls` (the LLM calls that made it) go in the same transaction, so a
        crash can never keep a document and lose what it cost.

        added_at is kept from the stored row when replacing (unless the record
        names one); updated_at is always now. A doc_id that already names
        another file is refused (the upsert's WHERE) and the whole transaction
        rolled back: 48-bit ids make this astronomically unlikely, but silently
        overwriting another document would be far worse than an error.
        """
        for node in nodes:
            if node.doc_id != doc.doc_id:
                raise ValueError(f"node {node.seq} belongs to {node.doc_id}, not {doc.doc_id}")
        now = utc_now()
        node_rows = [node_params(n) for n in nodes]  # before the transaction: a bad node fails it early
        self._ready_for_vector(doc.embedding, doc.embedding_model)
        with self._document_transaction() as conn:
            row = (*document_params(doc, doc.added_at or now, now), bool(doc.added_at))
            written = self._exec(conn, _DOCUMENT_UPSERT + self.UPSERT_SUFFIX, row)
            # Replace, not merge: a re-split document may have fewer nodes.
            self._exec(conn, "DELETE FROM nodes WHERE doc_id = ?", (doc.doc_id,))
            if node_rows:
                with contextlib.closing(conn.cursor()) as cursor:
                    cursor.executemany(self._sql(f"INSERT INTO nodes ({NODE_COLUMNS}) VALUES {in_list(7)}"), node_rows)
            self._clear_failure(conn, doc.root, doc.path)
            self._forget_claim(conn, doc.doc_id)  # the claim ends with the commit
            for call in calls:
                self._insert_call(conn, call)
            self._vector_written(conn, doc.doc_id, doc.embedding, doc.embedding_model)
            if not self._upserted(written):
                other = self._exec(conn, "SELECT root, path FROM documents WHERE doc_id = ?", (doc.doc_id,)).fetchone()
                raise DocsumError(f"doc_id {doc.doc_id} of {doc.root}/{doc.path} already names {other[0]}/{other[1]}")

    def touch_document(self, doc_id: str, size: int, mtime_ns: int) -> bool:
        """Record a new size/mtime for a document whose content is unchanged (a
        touch, a copy, a checkout), so the next build need not hash it again.
        updated_at is left alone: nothing the user sees changed."""
        with self._write() as conn:
            cur = self._exec(
                conn, "UPDATE documents SET size = ?, mtime_ns = ? WHERE doc_id = ?", (int(size), int(mtime_ns), doc_id)
            )
            return int(cur.rowcount) > 0

    def update_embedding(self, doc_id: str, embedding: np.ndarray, model: str) -> None:
        """Set a document's summary embedding. KeyError if there is no such document."""
        blob = encode_embedding(embedding)
        self._ready_for_vector(embedding, model)
        with self._write() as conn:
            cur = self._exec(
                conn, "UPDATE documents SET embedding = ?, embedding_model = ? WHERE doc_id = ?", (blob, model, doc_id)
            )
            if cur.rowcount == 0:
                raise KeyError(doc_id)
            self._vector_written(conn, doc_id, embedding, model)

    def remove_document(self, doc_id: str) -> bool:
        """Delete a document (its nodes go with it). False if it was not there."""
        with self._write() as conn:
            self._forget_claim(conn, doc_id)
            return int(self._exec(conn, "DELETE FROM documents WHERE doc_id = ?", (doc_id,)).rowcount) > 0

    def nodes_for(self, doc_ids: list[str]) -> dict[str, list[NodeRecord]]:
        """Nodes of each requested document in seq order; [] for unknown ids."""
        result: dict[str, list[NodeRecord]] = {doc_id: [] for doc_id in doc_ids}
        for chunk in chunks(list(result)):
            sql = f"SELECT {NODE_COLUMNS} FROM nodes WHERE doc_id IN {in_list(len(chunk))} ORDER BY doc_id, seq"
            for row in self._rows(sql, chunk):
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
        return stack_embeddings(
            self._rows("SELECT doc_id, embedding, embedding_model FROM documents ORDER BY path, root")
        )

    def embedding_dim(self, model: str) -> int | None:
        """Size of the `model` vectors already stored (None: none yet)."""
        rows = self._rows(
            "SELECT length(embedding) FROM documents WHERE embedding_model = ? AND embedding IS NOT NULL LIMIT 1",
            (model,),
        )
        return int(rows[0][0]) // 4 if rows and rows[0][0] else None  # little-endian float32

    # ------------------------------------------------------------------ failures

    def record_failure(self, root: str, path: str, error: str) -> int:
        """Remember that (root, path) failed; attempts counts consecutive runs.
        Returns the attempts so far (1 the first time)."""
        now = utc_now()
        root, path, error = failure_params(root, path, error)
        with self._write() as conn:
            self._exec(
                conn,
                "INSERT INTO failures (root, path, error, attempts, first_seen, last_seen) VALUES (?, ?, ?, 1, ?, ?) "
                "ON CONFLICT (root, path) DO UPDATE SET error = excluded.error, attempts = failures.attempts + 1, "
                "last_seen = excluded.last_seen",
                (root, path, error, now, now),
            )
            row = self._exec(conn, "SELECT attempts FROM failures WHERE root = ? AND path = ?", (root, path)).fetchone()
        return int(row[0]) if row else 1

    def failures(self) -> list[dict[str, Any]]:
        rows = self._rows(f"SELECT {', '.join(_FAILURE_KEYS)} FROM failures ORDER BY root, path")
        return [dict(zip(_FAILURE_KEYS, r)) for r in rows]

    def clear_failure(self, root: str, path: str) -> None:
        with self._write() as conn:
            self._clear_failure(conn, root, path)

    def _clear_failure(self, conn: Executor, root: str, path: str) -> None:
        self._exec(conn, "DELETE FROM failures WHERE root = ? AND path = ?", (storable(root), storable(path)))

    # ------------------------------------------------------------------ runs and usage

    def start_run(self, kind: str, settings: dict[str, Any]) -> int:
        """Record the start of a build/ask run; returns its id. Secret-looking
        settings keys are dropped (second guard, see records.scrub_settings)."""
        with self._write() as conn:
            return self._insert_id(
                conn,
                "INSERT INTO runs (kind, started_at, status, settings) VALUES (?, ?, 'running', ?)",
                (kind, utc_now(), dumps_json(scrub_settings(settings))),
            )

    def close_abandoned_runs(self, kind: str) -> int:
        """Mark runs of `kind` left 'running' by a builder that is gone as
        'killed' (a SIGKILL or power loss left them so). Returns how many were closed."""
        with self._write() as conn:
            cur = self._exec(
                conn,
                "UPDATE runs SET status = 'killed', finished_at = COALESCE(finished_at, ?) "
                f"WHERE kind = ? AND status = 'running'{self.ABANDONED_RUN_CONDITION}",
                (utc_now(), kind),
            )
            return int(cur.rowcount)

    def record_call(
        self, run_id: int, kind: str, model: str, prompt_tokens: int, completion_tokens: int, seconds: float, ok: bool
    ) -> None:
        """One LLM/embedding call. Committed at once, so usage survives a crash."""
        with self._write() as conn:
            self._insert_call(conn, (run_id, kind, model, prompt_tokens, completion_tokens, seconds, ok))

    def _insert_call(self, conn: Executor, call: CallRow) -> None:
        self._exec(
            conn,
            "INSERT INTO calls (run_id, kind, model, prompt_tokens, completion_tokens, seconds, ok, at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (*call_params(call), utc_now()),
        )

    def finish_run(self, run_id: int, status: str, usage: dict[str, Any], documents: dict[str, Any]) -> None:
        """Close a run. llm_calls / prompt_tokens / completion_tokens come from
        `usage` when present, else are summed from the run's recorded calls."""
        with self._write() as conn:
            n, p, c = self._exec(
                conn,
                "SELECT COUNT(*), COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0) FROM calls WHERE run_id = ?",
                (run_id,),
            ).fetchone()
            cur = self._exec(
                conn,
                "UPDATE runs SET finished_at = ?, status = ?, llm_calls = ?, prompt_tokens = ?, "
                "completion_tokens = ?, usage = ?, documents = ? WHERE id = ?",
                (
                    utc_now(), status, int(usage.get("llm_calls", n)), int(usage.get("prompt_tokens", p)),
                    int(usage.get("completion_tokens", c)), dumps_json(scrub_settings(usage)), dumps_json(documents),
                    run_id,
                ),
            )  # fmt: skip
            if cur.rowcount == 0:
                raise KeyError(run_id)
            self._run_finished(conn)

    def runs(self, limit: int = 20) -> list[dict[str, Any]]:
        """Most recent runs first, JSON columns decoded."""
        rows = self._rows(f"SELECT {', '.join(_RUN_KEYS)} FROM runs ORDER BY id DESC LIMIT ?", (int(limit),))
        out: list[dict[str, Any]] = []
        for r in rows:
            run = dict(zip(_RUN_KEYS, r))
            for key in _RUN_JSON_KEYS:
                run[key] = json.loads(run[key])
            out.append(run)
        return out

    def calls(self, run_id: int) -> list[dict[str, Any]]:
        """The recorded calls of one run, in order."""
        rows = self._rows(f"SELECT {', '.join(_CALL_KEYS)} FROM calls WHERE run_id = ? ORDER BY id", (run_id,))
        return [dict(zip(_CALL_KEYS, (*r[:5], bool(r[5]), r[6]))) for r in rows]

    def set_aside_documents(self) -> dict[str, str]:
        """doc_id -> path of the documents a reader found damaged and set
        aside (docsum.store.damage), not rebuilt since: questions leave them
        out until the next build. One meta row read on a healthy store."""
        from docsum.store.damage import DAMAGED_MARK, SET_ASIDE_KEY

        listed = self.get_meta(SET_ASIDE_KEY, [])
        if not isinstance(listed, list) or not listed:
            return {}
        ids = [str(d) for d in listed][:1000]
        marks = ", ".join("?" for _ in ids)
        rows = self._rows(
            f"SELECT doc_id, path FROM documents WHERE summary_fingerprint = ? AND doc_id IN ({marks})",
            (DAMAGED_MARK, *ids),
        )
        return {r[0]: r[1] for r in rows}

    # ------------------------------------------------------------------ meta

    def get_meta(self, key: str, default: Any = None) -> Any:
        """A store-level setting (any JSON value), or `default` if unset."""
        rows = self._rows("SELECT value FROM meta WHERE key = ?", (key,))
        return default if not rows else json.loads(rows[0][0])

    def set_meta(self, key: str, value: Any) -> None:
        """Set a store-level setting; `value` must be JSON-serialisable."""
        encoded = json.dumps(value, sort_keys=True)  # no default=str: fail loudly, it must round-trip
        with self._write() as conn:
            self._exec(
                conn,
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, encoded),
            )
