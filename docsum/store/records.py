"""What both stores (SQLite and PostgreSQL) keep and how it travels: the
document and node records, the row layout they are written and read in, the
embedding blob's encoding, text as both can hold it, timestamps and document
ids, and the scrubbing of settings before a run is recorded."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from docsum.sanitize import scrub
from docsum.store.tables import DOCUMENTS, NODES

if TYPE_CHECKING:  # numpy is imported where vectors are touched: listing documents needs none
    import numpy as np

# Second guard against persisting credentials in runs.settings (the caller is
# the first). Counts such as "prompt_tokens" or "max_tokens" must survive, so
# "token" only matches as the last word of a key ("token", "access_token").
_SECRET_KEY = re.compile(r"api[_-]?key|secret|passw(?:or)?d|authorization|credential|(?:^|[_-])token$", re.IGNORECASE)


# One row of the calls table: run id, kind, model, prompt tokens, completion
# tokens, seconds, ok.
CallRow = tuple[int, str, str, int, int, float, bool]


def utc_now() -> str:
    """UTC timestamp, ISO 8601 with seconds: sortable as text, readable in the CLI."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def make_doc_id(root: str, relpath: str) -> str:
    """Stable id of a document: derived from where it is, not from its content,
    so an edited file keeps its id (and `docsum show ID` keeps working)."""
    return hashlib.sha256(f"{root}\0{relpath}".encode()).hexdigest()[:12]


class StoredVersion(NamedTuple):
    """What says a stored document is the file as it is now, summarized with
    the current settings (a build compares it to decide there is nothing to do)."""

    size: int
    mtime_ns: int
    split_fingerprint: str
    summary_fingerprint: str


class StoredFile(NamedTuple):
    """A stored document as a build compares it with its file (`stored_files`)."""

    doc_id: str
    root: str
    path: str
    size: int
    mtime_ns: int
    sha256: str
    split_fingerprint: str
    summary_fingerprint: str


STORED_FILE_COLUMNS = "doc_id, root, path, size, mtime_ns, sha256, split_fingerprint, summary_fingerprint"


@dataclass
class DocumentRecord:
    doc_id: str
    path: str  # relative to root, POSIX separators
    root: str  # absolute
    size: int
    mtime_ns: int
    sha256: str
    title: str
    kind: str
    token_count: int
    page_count: int | None
    split_fingerprint: str
    summary_fingerprint: str
    summary: str
    summary_model: str
    # compare=False: `==` on a numpy array is element-wise and would make the
    # generated __eq__ raise; compare embeddings with np.array_equal instead.
    embedding: np.ndarray | None = field(default=None, compare=False)
    embedding_model: str | None = None
    added_at: str = ""
    updated_at: str = ""
    # One character a page: "t" text layer, "o" OCR, "-" unreadable (docsum.ingest.ocr); "" without pages.
    page_origins: str = ""


@dataclass
class NodeRecord:
    doc_id: str
    seq: int
    text: str
    start_char: int
    end_char: int
    pages: tuple[int, ...]
    token_count: int


def encode_embedding(embedding: np.ndarray) -> bytes:
    import numpy as np

    # Explicit little-endian so a store copied between machines reads the same.
    arr = np.asarray(embedding, dtype="<f4")
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"embedding must be a non-empty 1-D vector, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        # One NaN would poison every similarity computed against the matrix.
        raise ValueError("embedding contains NaN or infinite values")
    return arr.tobytes()


def decode_embedding(blob: bytes | None) -> np.ndarray | None:
    if blob is None:
        return None
    import numpy as np

    # astype copies: frombuffer returns a read-only view of the bytes object.
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


def scrub_settings(value: Any) -> Any:
    """Copy of `value` without secret-looking keys, at any depth."""
    if isinstance(value, dict):
        return {str(k): scrub_settings(v) for k, v in value.items() if not _SECRET_KEY.search(str(k))}
    if isinstance(value, (list, tuple)):
        return [scrub_settings(v) for v in value]
    return value


def dumps_json(value: Any) -> str:
    # default=str: settings may hold Paths or enums; a readable string beats a crash.
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


# The column lists every read and write names, in table order (docsum.store.tables).
# page_origins: added by migration v4 (SQLite) / v3 (PostgreSQL).
DOC_COLUMNS = DOCUMENTS.column_names + ", page_origins"
# Same columns without loading the embedding blobs (a few KB per document).
DOC_COLUMNS_NO_EMBEDDING = DOC_COLUMNS.replace("embedding, embedding_model", "NULL, embedding_model")
NODE_COLUMNS = NODES.column_names


def upsert_assignments(columns: str, keep: tuple[str, ...]) -> str:
    """`c = excluded.c, ...` for every column of `columns` (a column list as
    above) but the key (the first) and those in `keep`: the SET of an
    INSERT ... ON CONFLICT DO UPDATE, in the syntax both dialects share."""
    names = [c.strip() for c in columns.split(",")][1:]
    return ", ".join(f"{c} = excluded.{c}" for c in names if c not in keep)


def storable(text: str) -> str:
    """`text` as both stores hold it: without NUL characters. PostgreSQL's text
    type cannot hold U+0000 (SQLite's can), and a document must be stored the
    same on either; a NUL carries nothing a reader or an LLM could use. The
    loaders already drop it from document text (so node offsets stay true);
    this catches what comes from elsewhere (an LLM server's summary, a PDF's
    title, an error message quoting either)."""
    return text.replace("\x00", "") if "\x00" in text else text


def document_params(doc: DocumentRecord, added_at: str, updated_at: str) -> tuple[Any, ...]:
    """The values of DOC_COLUMNS for `doc`, in order (both stores bind these)."""
    embedding = None if doc.embedding is None else encode_embedding(doc.embedding)
    model = doc.embedding_model if embedding is not None and doc.embedding_model is not None else None
    return (
        doc.doc_id, storable(doc.path), storable(doc.root), doc.size, doc.mtime_ns, doc.sha256, storable(doc.title),
        storable(doc.kind), doc.token_count, doc.page_count, doc.split_fingerprint,
        doc.summary_fingerprint, storable(doc.summary), storable(doc.summary_model), embedding,
        None if model is None else storable(model), added_at, updated_at, storable(doc.page_origins),
    )  # fmt: skip


def node_params(node: NodeRecord) -> tuple[Any, ...]:
    """The values of a nodes row for `node`, in column order."""
    pages = json.dumps([int(p) for p in node.pages])
    return (node.doc_id, node.seq, storable(node.text), node.start_char, node.end_char, pages, node.token_count)


def failure_params(root: str, path: str, error: str) -> tuple[str, str, str]:
    """A failures row's key and message as both stores hold them (see
    storable). The message is often a library's (an HTTP client's, a
    parser's): scrubbed of secrets before it is kept (docsum.sanitize.scrub)."""
    return storable(root), storable(path), storable(scrub(error))


def call_params(call: CallRow) -> tuple[Any, ...]:
    """A calls row's values, without the time (each store stamps it)."""
    run_id, kind, model, prompt_tokens, completion_tokens, seconds, ok = call
    return (
        run_id,
        storable(kind),
        storable(model),
        int(prompt_tokens),
        int(completion_tokens),
        float(seconds),
        bool(ok),
    )


def stack_embeddings(rows: Sequence[Sequence[Any]]) -> tuple[list[str], np.ndarray | None, str | None]:
    """(doc_id, embedding blob, model) rows as a store's summary_matrix returns them."""
    doc_ids = [r[0] for r in rows]
    if not rows:
        return doc_ids, None, None
    models = {r[2] for r in rows if r[1] is not None}
    model = next(iter(models)) if len(models) == 1 else None
    if any(r[1] is None for r in rows) or len(models) != 1:
        return doc_ids, None, model
    import numpy as np

    vectors = [np.frombuffer(r[1], dtype="<f4") for r in rows]
    if len({v.shape for v in vectors}) != 1:
        return doc_ids, None, model
    return doc_ids, np.stack(vectors).astype(np.float32, copy=False), model


def document_from_row(row: Sequence[Any]) -> DocumentRecord:
    (
        doc_id, path, root, size, mtime_ns, sha256, title, kind, token_count, page_count,
        split_fp, summary_fp, summary, summary_model, embedding, embedding_model, added_at, updated_at, page_origins,
    ) = tuple(row)  # fmt: skip
    return DocumentRecord(
        doc_id=doc_id,
        path=path,
        root=root,
        size=size,
        mtime_ns=mtime_ns,
        sha256=sha256,
        title=title,
        kind=kind,
        token_count=token_count,
        page_count=page_count,
        split_fingerprint=split_fp,
        summary_fingerprint=summary_fp,
        summary=summary,
        summary_model=summary_model,
        embedding=decode_embedding(embedding),
        embedding_model=embedding_model,
        added_at=added_at,
        updated_at=updated_at,
        page_origins=page_origins or "",
    )


def node_from_row(row: Sequence[Any]) -> NodeRecord:
    doc_id, seq, text, start_char, end_char, pages, token_count = row
    return NodeRecord(
        doc_id=doc_id,
        seq=seq,
        text=text,
        start_char=start_char,
        end_char=end_char,
        pages=tuple(int(p) for p in json.loads(pages)),
        token_count=token_count,
    )


def summary_index_text(path: str, title: str, summary: str) -> str:
    """What represents a document at retrieval time: its file name and title
    travel with the summary (file names such as `2023_Q3_ACME.txt` carry facts
    a summary may leave out). Used both to embed at build time and to show the
    LLM its choices, so both retrievers see the same thing."""
    head = f"File: {path}"
    if title and title.strip() and title.strip() != Path(path).stem:
        head += f"\nTitle: {title.strip()}"
    return f"{head}\n{summary.strip()}"


class Executor(Protocol):
    """A connection inside a write transaction (sqlite3 or psycopg)."""

    def execute(self, sql: Any, params: Any = ...) -> Any: ...


def aggregate_row(cursor: Any) -> Any:
    """The row of an aggregate query without GROUP BY (`SELECT count(*) ...`),
    which a database always returns; a driver types fetchone() as optional."""
    row = cursor.fetchone()
    if row is None:
        raise RuntimeError("an aggregate query returned no row")
    return row
