"""One store interface, two implementations: a local SQLite file (the default,
docsum.store.sqlite) and a shared PostgreSQL database (docsum.store.postgres).

Everything above the store (build, ask, eval, the CLI) talks to `DocumentStore`
and opens stores through `open_store`, so the pipeline exists once. A store is
named by a *location*: a file path, or a PostgreSQL connection string, as a
`postgresql://` (or `postgres://`) URL or in libpq's keyword=value form
(docsum.store.conninfo). The connection string may carry a password; `display_location`
is the only form of it that is ever printed or stored.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

from docsum.sanitize import connection_secrets, scrub
from docsum.store.conninfo import check_conninfo, is_conninfo
from docsum.store.records import CallRow, DocumentRecord, NodeRecord, StoredFile, StoredVersion
from docsum.store.vectors import VectorChanges

if TYPE_CHECKING:  # annotations only: the CLI imports this module for every command
    import numpy as np

    from docsum.store.pgvector import ServerSearch

StoreLocation = Path | str

_PG_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(location: StoreLocation) -> bool:
    """Whether `location` names a PostgreSQL store (a connection URL or a
    keyword=value connection string)."""
    if not isinstance(location, str):
        return False
    return location.strip().lower().startswith(_PG_SCHEMES) or is_conninfo(location)


def check_location(location: StoreLocation) -> None:
    """Refuse (exit 2) a keyword=value connection string libpq would not
    take, before anything is opened or created."""
    if isinstance(location, str) and is_conninfo(location):
        check_conninfo(location)


def display_location(location: StoreLocation) -> str:
    """`location` fit for output: a connection string's password (and any
    credential-like parameter, such as libpq's `sslpassword`) replaced by ***,
    by the same rule as every message docsum prints (docsum.sanitize.scrub)."""
    text = str(location)
    return scrub(text) if is_postgres(location) else text


def location_secrets(location: StoreLocation) -> list[str]:
    """The passwords inside a connection string, as typed and decoded (a
    driver's error may echo either), for the output redaction; found also in
    a string that does not parse (docsum.sanitize.connection_secrets)."""
    return connection_secrets(str(location).strip()) if is_postgres(location) else []


class ClosesOnExit:
    """`with thing:` closes the thing at the end, whatever happened inside."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


@runtime_checkable
class DocumentStore(Protocol):
    """What build, ask and the CLI need from a store. `label` is the location as
    printed (never with a password); `shared` is True when several builders may
    work on the store at once (claims then decide who summarizes what)."""

    readonly: bool

    @property
    def label(self) -> str: ...
    @property
    def shared(self) -> bool: ...
    @property
    def schema_version(self) -> int: ...
    def close(self) -> None: ...
    def __enter__(self) -> DocumentStore: ...
    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...

    # documents
    def list_documents(self, with_embeddings: bool = False, with_summaries: bool = True) -> list[DocumentRecord]: ...
    def iter_documents(
        self, with_embeddings: bool = False, with_summaries: bool = True
    ) -> Iterator[DocumentRecord]: ...
    def find_documents(self, ref: str, with_embeddings: bool = True) -> list[DocumentRecord]: ...
    def get_document(self, ref: str) -> DocumentRecord | None: ...
    def put_document(self, doc: DocumentRecord, nodes: list[NodeRecord], calls: Sequence[CallRow] = ()) -> None: ...
    def touch_document(self, doc_id: str, size: int, mtime_ns: int) -> bool: ...
    def update_embedding(self, doc_id: str, embedding: np.ndarray, model: str) -> None: ...
    def remove_document(self, doc_id: str) -> bool: ...
    def nodes_for(self, doc_ids: list[str]) -> dict[str, list[NodeRecord]]: ...
    def summary_matrix(self) -> tuple[list[str], np.ndarray | None, str | None]: ...
    def stored_files(self) -> Iterator[StoredFile]: ...
    def document_count(self) -> int: ...
    def document_versions(self) -> list[tuple[str, str]]: ...
    def get_documents(self, doc_ids: list[str]) -> list[DocumentRecord]: ...
    def embedding_dim(self, model: str) -> int | None: ...
    def vector_changes(self, since: int) -> VectorChanges: ...
    @property
    def vectors_file(self) -> Path: ...
    def search_description(self) -> str: ...
    # Search in the store itself (pgvector): what it serves, None when
    # questions score the vector file instead; then the nearest documents.
    def server_search(self) -> ServerSearch | None: ...
    def nearest_summaries(self, query: np.ndarray, limit: int | None) -> tuple[list[str], np.ndarray]: ...

    # claims: who summarizes a document when several builders share the store
    def claim(self, doc_id: str) -> bool: ...
    def release_claim(self, doc_id: str) -> None: ...
    # Documents written since `token` (any builder; None: none, a token to start
    # from): a builder skips what others stored without claiming it.
    def written_since(self, token: int | None) -> tuple[int, dict[str, StoredVersion]]: ...

    # failures, runs, meta
    def record_failure(self, root: str, path: str, error: str) -> int: ...
    def failures(self) -> list[dict[str, Any]]: ...
    def clear_failure(self, root: str, path: str) -> None: ...
    def start_run(self, kind: str, settings: dict[str, Any]) -> int: ...
    def close_abandoned_runs(self, kind: str) -> int: ...
    def record_call(
        self, run_id: int, kind: str, model: str, prompt_tokens: int, completion_tokens: int, seconds: float, ok: bool
    ) -> None: ...
    def finish_run(self, run_id: int, status: str, usage: dict[str, Any], documents: dict[str, Any]) -> None: ...
    def runs(self, limit: int = 20) -> list[dict[str, Any]]: ...
    def calls(self, run_id: int) -> list[dict[str, Any]]: ...
    def get_meta(self, key: str, default: Any = None) -> Any: ...
    def set_meta(self, key: str, value: Any) -> None: ...
    def integrity_ok(self) -> bool: ...


def open_store(location: StoreLocation, *, create: bool = True, readonly: bool = False) -> DocumentStore:
    """Open the store at `location` (a path or a postgresql:// URL); see Store.open
    for create/readonly. psycopg is imported only here, only for PostgreSQL."""
    if is_postgres(location):
        from docsum.store.postgres import PostgresStore

        check_location(location)
        return PostgresStore.open(str(location), create=create, readonly=readonly)
    from docsum.store.sqlite import Store  # not at the top: sqlite builds on this module

    return Store.open(Path(location), create=create, readonly=readonly)


def store_exists(location: StoreLocation) -> bool:
    """Whether a docsum store is at `location` (for PostgreSQL: its tables exist)."""
    if is_postgres(location):
        from docsum.store.postgres import PostgresStore

        check_location(location)
        return PostgresStore.exists(str(location))
    return Path(location).exists()
