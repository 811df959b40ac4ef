"""Summary vectors searched by the PostgreSQL server itself, with the pgvector
extension, when the server has it (docsum.store.postgres uses this module).

Design notes (the why):

* The vectors stay in `documents.embedding` (bytes, as in SQLite): that column
  is the record, read by every path. A copy lives in `summary_vectors`, one
  row per document with a `vector(d)` column, the dimension fixed when the
  table is made (from the first vector written). The copy is written in the
  same transaction as the document, and a removed document takes its row with
  it (ON DELETE CASCADE), so the two cannot drift apart for a docsum that
  knows about the table; schema v2 makes an older docsum refuse the store.
* HNSW, not IVFFlat: a build adds documents one at a time to a table that
  starts empty. IVFFlat's lists are k-means centres computed from the rows
  present when the index is made, so an index made on an empty or small
  table routes later rows badly until someone rebuilds it; HNSW needs no
  training and keeps its recall as rows arrive. It costs more per insert,
  which is nothing next to the LLM call that made the summary. The index
  uses inner product (`vector_ip_ops`), the score the local path computes
  (`matrix @ query`), so both paths rank alike; for the unit-length vectors
  embedding models return it is the cosine. pgvector cannot index more than
  2,000 dimensions of `vector`: larger vectors are searched in SQL exactly,
  without an index.
* Only real embedding vectors go there: the offline lexical vectors are
  scored with IDF weights that depend on the whole store (docsum.lexical),
  which no index can hold, so such a store keeps the local vector file.
* A question uses the server only when every document has a row of one
  model; otherwise (a document without a vector, two models, a builder that
  ran before the table existed and whose rows the next builder adds) it
  falls back to the local vector file, which handles all of those.
* The extension is created by a builder (`CREATE EXTENSION IF NOT EXISTS
  vector`, in the `docsum` schema) when the server offers it and the user may;
  pgvector is not a trusted extension, so that takes a superuser, or a
  database owner after an administrator created it once. Otherwise nothing
  changes. Vectors travel as text ('[0.1,...]'): no Python helper is needed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from docsum.lexical import LEXICAL_EMBED_MODEL
from docsum.store.records import Executor, aggregate_row

if TYPE_CHECKING:
    import numpy as np
    import psycopg

log = logging.getLogger("docsum")

TABLE = "summary_vectors"
# pgvector indexes `vector` columns of at most this many dimensions.
HNSW_MAX_DIM = 2000
# HNSW returns at most `hnsw.ef_search` rows (pgvector's default is 40). A
# question keeps 50 candidates by default. Measured on 10,000 synthetic
# summaries (bench/RESULTS.md): the top 10 matched the exact ranking in 94.5%
# of places at 100, 96.5% at 200 and 100% at 400, at the same query time.
# pgvector's ceiling is 1,000: asking for more rows than that scans exactly.
MIN_EF_SEARCH = 400
MAX_EF_SEARCH = 1000
_CREATE_LOCK = 0x70677663  # "pgvc": one advisory lock key for making the table

# The search path of every connection: docsum's schema, then the one pgvector
# lives in when an administrator put it elsewhere (its type and operators must
# resolve). One statement, so connecting costs no extra round trip.
SEARCH_PATH_SQL = (
    "SELECT set_config('search_path', concat_ws(', ', 'docsum', (SELECT quote_ident(n.nspname) "
    "FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
    "WHERE e.extname = 'vector' AND n.nspname <> 'docsum')), false)"
)


@dataclass(frozen=True)
class ServerSearch:
    """The store finds nearest summaries itself: every document has a vector
    of `model`, `dim` long; `indexed` says whether an HNSW index serves it."""

    model: str
    dim: int
    indexed: bool


def searchable(model: str | None) -> bool:
    """Whether vectors of `model` can be searched on the server (not lexical)."""
    return model is not None and model != LEXICAL_EMBED_MODEL


def vector_literal(vector: np.ndarray) -> str:
    """pgvector's text form; %.9g gives back the same float32 exactly."""
    import numpy as np

    values = np.asarray(vector, dtype=np.float32).reshape(-1)
    return "[" + ",".join(np.char.mod("%.9g", values).tolist()) + "]"


def extension_installed(conn: psycopg.Connection[Any]) -> bool:
    return conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is not None


def extension_available(conn: psycopg.Connection[Any]) -> bool:
    return conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone() is not None


def table_dim(conn: psycopg.Connection[Any]) -> int | None:
    """The dimension of the vector table, None when there is no table."""
    row = conn.execute(
        "SELECT a.atttypmod FROM pg_attribute a WHERE a.attrelid = to_regclass(%s) AND a.attname = 'embedding'",
        (f"docsum.{TABLE}",),
    ).fetchone()
    return int(row[0]) if row is not None and row[0] is not None and int(row[0]) > 0 else None


def try_create_extension(conn: psycopg.Connection[Any], describe: Callable[[BaseException], str]) -> str:
    """Create the extension if the server offers it; '' when it is there now,
    else why not (shown by `config show`; `describe` renders a driver error
    without secrets)."""
    import psycopg

    if extension_installed(conn):
        return ""
    if not extension_available(conn):
        return "pgvector is not available on the server"
    try:
        with conn.transaction():
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA docsum")
    except psycopg.Error as exc:
        reason = describe(exc)[:200]
        log.debug("pgvector: CREATE EXTENSION vector failed (%s); summary vectors stay local", reason)
        return f"pgvector is available on the server but not created in this database ({reason})"
    return ""


def create_table(conn: psycopg.Connection[Any], dim: int) -> int:
    """Make the vector table for `dim`-long vectors unless a builder made it
    first (then its dimension stands); returns the table's dimension."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATE_LOCK,))
        existing = table_dim(conn)
        if existing is not None:
            return existing
        conn.execute(
            f"CREATE TABLE {TABLE} (doc_id TEXT PRIMARY KEY REFERENCES documents(doc_id) ON DELETE CASCADE, "
            f"model TEXT NOT NULL, embedding vector({int(dim)}) NOT NULL)"
        )
        if dim <= HNSW_MAX_DIM:
            conn.execute(f"CREATE INDEX {TABLE}_hnsw ON {TABLE} USING hnsw (embedding vector_ip_ops)")
    return dim


def write_row(conn: Executor, dim: int, doc_id: str, vector: np.ndarray | None, model: str | None) -> None:
    """Bring `doc_id`'s row in line with its stored vector (inside the
    caller's transaction): written when it can be searched here, else gone."""
    if vector is not None and searchable(model) and int(vector.shape[-1]) == dim:
        conn.execute(
            f"INSERT INTO {TABLE} (doc_id, model, embedding) VALUES (%s, %s, %s::vector) "
            "ON CONFLICT (doc_id) DO UPDATE SET model = EXCLUDED.model, embedding = EXCLUDED.embedding",
            (doc_id, model, vector_literal(vector)),
        )
    else:
        conn.execute(f"DELETE FROM {TABLE} WHERE doc_id = %s", (doc_id,))


def common_shape(conn: psycopg.Connection[Any]) -> tuple[str, int] | None:
    """The (model, dimension) most stored real vectors have, to size a new table."""
    row = conn.execute(
        "SELECT embedding_model, length(embedding) / 4 AS dim FROM documents "
        "WHERE embedding IS NOT NULL AND embedding_model IS NOT NULL AND embedding_model <> %s "
        "GROUP BY 1, 2 ORDER BY count(*) DESC, 1, 2 LIMIT 1",
        (LEXICAL_EMBED_MODEL,),
    ).fetchone()
    return (str(row[0]), int(row[1])) if row is not None else None


def add_missing_rows(conn: psycopg.Connection[Any], dim: int, batch: int = 500) -> int:
    """Rows for documents whose vector is not in the table yet (stored before
    the table existed, or by a builder that started before it did). Returns
    how many were added; 0 costs one anti-join."""
    import numpy as np

    added = 0
    while True:
        rows = conn.execute(
            f"SELECT d.doc_id, d.embedding, d.embedding_model FROM documents d "
            f"WHERE d.embedding IS NOT NULL AND d.embedding_model IS NOT NULL AND d.embedding_model <> %s "
            f"AND length(d.embedding) = %s AND NOT EXISTS (SELECT 1 FROM {TABLE} v WHERE v.doc_id = d.doc_id) "
            f"LIMIT %s",
            (LEXICAL_EMBED_MODEL, dim * 4, batch),
        ).fetchall()
        if not rows:
            return added
        with conn.transaction():
            with conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {TABLE} (doc_id, model, embedding) "
                    f"SELECT %s, %s, %s::vector WHERE EXISTS (SELECT 1 FROM documents WHERE doc_id = %s) "
                    "ON CONFLICT (doc_id) DO NOTHING",
                    [(r[0], r[2], vector_literal(np.frombuffer(r[1], dtype="<f4")), r[0]) for r in rows],
                )
        added += len(rows)


def server_search(conn: psycopg.Connection[Any]) -> tuple[ServerSearch | None, str]:
    """The server search a question can use now, or None and why not."""
    if not extension_installed(conn):
        reason = "pgvector is available on the server but not created in this database" if extension_available(conn) \
            else "pgvector is not available on the server"  # fmt: skip
        return None, reason
    dim = table_dim(conn)
    if dim is None:
        return (
            None,
            "pgvector is installed, but no summary has a vector it can search (offline lexical vectors stay local)",
        )
    documents, rows, low, high = aggregate_row(
        conn.execute(f"SELECT (SELECT count(*) FROM documents), count(*), min(model), max(model) FROM {TABLE}")
    )
    if rows == 0 or rows != documents or low != high:
        why = "two embedding models" if low != high else "not every summary has a vector there yet"
        return None, f"pgvector is installed, but {why}"
    return ServerSearch(str(low), dim, dim <= HNSW_MAX_DIM), ""


def nearest(conn: psycopg.Connection[Any], query: np.ndarray, limit: int | None) -> tuple[list[str], np.ndarray]:
    """(doc_ids, inner products) of the `limit` nearest summaries, best first
    (HNSW, approximate: see MIN_EF_SEARCH), or of every summary when `limit`
    is None (scored in SQL, no order).

    Documents that tie with the last one kept are all returned, in path order:
    the local path ranks ties by path, and an index scan returns them in no
    particular order (vectors with no word in common with the question all
    score 0, for instance)."""
    import numpy as np

    literal = vector_literal(query)
    with conn.transaction():
        if limit is None:
            rows = conn.execute(f"SELECT doc_id, -(embedding <#> %s::vector) FROM {TABLE}", (literal,)).fetchall()
        else:
            if limit > MAX_EF_SEARCH:
                conn.execute("SET LOCAL enable_indexscan = off")  # more rows than HNSW returns: exact scan
            else:
                conn.execute(f"SET LOCAL hnsw.ef_search = {min(MAX_EF_SEARCH, max(MIN_EF_SEARCH, 2 * int(limit)))}")
            rows = conn.execute(
                f"SELECT doc_id, embedding <#> %s::vector AS distance FROM {TABLE} ORDER BY distance LIMIT %s",
                (literal, int(limit) + 1),
            ).fetchall()
            if len(rows) > limit and rows[limit][1] == rows[limit - 1][1]:
                boundary = rows[limit][1]
                tied = conn.execute(
                    f"SELECT v.doc_id, v.embedding <#> %s::vector FROM {TABLE} v JOIN documents d USING (doc_id) "
                    "WHERE (v.embedding <#> %s::vector) = %s ORDER BY d.path, d.root",
                    (literal, literal, boundary),
                ).fetchall()
                rows = [r for r in rows if r[1] < boundary] + tied
            else:
                rows = rows[:limit]
            rows = [(doc_id, -distance) for doc_id, distance in rows]
    return [r[0] for r in rows], np.asarray([float(r[1]) for r in rows], dtype=np.float32)
