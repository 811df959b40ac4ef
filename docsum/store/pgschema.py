"""The PostgreSQL store's schema and driver: its migrations, applied in order
under an advisory lock, the checks that keep docsum off a schema it did not
make, and connecting through psycopg with errors that never carry the password
(docsum.store.postgres opens stores through this).

psycopg is imported only when a function here runs, so only for a PostgreSQL store."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from docsum.errors import ConfigError, DocsumError, StoreVersionError
from docsum.locations import display_location, location_secrets
from docsum.sanitize import Redactor, scrub
from docsum.store.pgvector import SEARCH_PATH_SQL
from docsum.store.records import aggregate_row
from docsum.store.tables import V1_TABLES

if TYPE_CHECKING:
    import psycopg

SCHEMA = "docsum"
_MIGRATION_LOCK = 0x646F6373  # "docs": one advisory lock key for migrations

# The columns only PostgreSQL's tables have, after the shared ones.
PG_ONLY_COLUMNS: dict[str, tuple[str, ...]] = {
    # The transaction that last wrote the row (a trigger sets it): what the
    # vector file and other builders fetch changes by (docsum.store.postgres).
    "documents": ("txid XID8 NOT NULL DEFAULT pg_current_xact_id()",),
    # Who runs it: the run is alive while this backend is.
    "runs": ("backend_pid INTEGER NOT NULL DEFAULT pg_backend_pid()",),
}

# Index i brings the schema from version i to i+1; append only, like the SQLite list.
PG_MIGRATIONS: list[str] = [
    # v1: the tables both stores keep (docsum.store.tables), then PostgreSQL's own.
    "\n".join(table.create("postgres", PG_ONLY_COLUMNS.get(table.name, ())) for table in V1_TABLES)
    + """
    CREATE UNIQUE INDEX documents_root_path ON documents(root, path);
    CREATE INDEX documents_path_root ON documents(path, root);
    CREATE INDEX documents_txid ON documents(txid);
    CREATE INDEX calls_run ON calls(run_id);

    CREATE TABLE removed_documents (
        doc_id TEXT NOT NULL,
        txid   XID8 NOT NULL DEFAULT pg_current_xact_id()
    );
    CREATE INDEX removed_documents_txid ON removed_documents(txid);

    CREATE FUNCTION stamp_document() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.txid := pg_current_xact_id();
        RETURN NEW;
    END $$;
    CREATE TRIGGER documents_stamp BEFORE INSERT OR UPDATE ON documents
        FOR EACH ROW EXECUTE FUNCTION stamp_document();

    CREATE FUNCTION bury_document() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO removed_documents (doc_id) VALUES (OLD.doc_id);
        RETURN OLD;
    END $$;
    CREATE TRIGGER documents_tombstone AFTER DELETE ON documents
        FOR EACH ROW EXECUTE FUNCTION bury_document();

    INSERT INTO meta (key, value) VALUES ('store_id', to_json(gen_random_uuid()::text)::text);

    CREATE TABLE claims (
        doc_id      TEXT PRIMARY KEY,
        owner       TEXT NOT NULL,
        backend_pid INTEGER NOT NULL,
        expires_at  TIMESTAMPTZ NOT NULL
    );
    """,
    # v2: writers keep docsum.summary_vectors (pgvector, made when the
    # extension is there: docsum.store.pgvector) in step with each document's
    # embedding. A docsum that knows only v1 would leave it stale, so it must
    # refuse this store; the table itself is made on demand, not here.
    """
    INSERT INTO meta (key, value) VALUES ('vector_table', '"summary_vectors"') ON CONFLICT (key) DO NOTHING;
    """,
    # v3: each page's text origin, as in the SQLite store's v4.
    """
    ALTER TABLE documents ADD COLUMN page_origins TEXT NOT NULL DEFAULT '';
    """,
]


def schema_version(conn: psycopg.Connection[Any]) -> int | None:
    """The schema version, or None when the database holds no docsum store."""
    row = conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.schema_version",)).fetchone()
    if row is None or row[0] is None:
        return None
    found = conn.execute(f"SELECT version FROM {SCHEMA}.schema_version").fetchone()
    return int(found[0]) if found else 0


def _foreign_schema(conn: psycopg.Connection[Any]) -> bool:
    """Whether a schema named docsum exists with something in it but no
    docsum version table: another application's, which docsum must not fill.
    Read from pg_class itself, not to_regclass: another builder may have just
    made the store, and this session's catalog cache may not know yet."""
    row = conn.execute(
        "SELECT count(*) FILTER (WHERE c.relname = 'schema_version'), count(*) "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s",
        (SCHEMA,),
    ).fetchone()
    return bool(row is not None and row[0] == 0 and row[1] > 0)


def migrate(conn: psycopg.Connection[Any], where: str) -> None:
    """Bring the schema to the newest version, one transaction per migration,
    serialized between processes by an advisory lock."""
    migrations = PG_MIGRATIONS  # looked up at call time (tests substitute their own list)
    while True:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            if _foreign_schema(conn):
                raise DocsumError(
                    f"{where}: the schema {SCHEMA!r} holds tables docsum did not make; "
                    "refusing to touch it (use another database)"
                )
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
            conn.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.schema_version (version INTEGER NOT NULL)")
            current = schema_version(conn) or 0
            if aggregate_row(conn.execute(f"SELECT count(*) FROM {SCHEMA}.schema_version"))[0] == 0:
                conn.execute(f"INSERT INTO {SCHEMA}.schema_version (version) VALUES (0)")
            if current > len(migrations):
                raise StoreVersionError(f"{where}: written by a newer docsum (schema v{current}); upgrade docsum")
            if current == len(migrations):
                return
            conn.execute(migrations[current])
            conn.execute(f"UPDATE {SCHEMA}.schema_version SET version = %s", (current + 1,))


def psycopg_module() -> Any:
    """psycopg, or a clear ConfigError saying how to install it."""
    try:
        import psycopg
    except ImportError as exc:
        raise ConfigError("a postgresql:// store needs the psycopg package: pip install 'docsum[postgres]'") from exc
    return psycopg


def connect(url: str) -> psycopg.Connection[Any]:
    """An autocommit connection whose search path finds docsum's tables (and pgvector's type)."""
    psycopg = psycopg_module()
    with driver_errors(url, "cannot connect"):
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
        conn.execute(SEARCH_PATH_SQL)
    return conn


@contextlib.contextmanager
def driver_errors(url: str, what: str = "") -> Iterator[None]:
    """psycopg errors as one-line DocsumErrors that never carry the password."""
    psycopg = psycopg_module()
    try:
        yield
    except psycopg.Error as exc:
        prefix = f"{display_location(url)}: {what + ': ' if what else ''}"
        raise DocsumError(f"{prefix}{driver_message(url, exc)}") from None


def driver_message(url: str, exc: BaseException) -> str:
    """A driver's message on one line, scrubbed of any password of `url` and
    of every secret written in a recognizable form (docsum.sanitize.scrub),
    for every path that shows one: errors, warnings, `config show`."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return scrub(text, Redactor(location_secrets(url)))


def pipeline(conn: psycopg.Connection[Any]) -> contextlib.AbstractContextManager[Any]:
    """psycopg's pipeline mode where this libpq has it (14 and later), else nothing."""
    return conn.pipeline() if psycopg_module().Pipeline.is_supported() else contextlib.nullcontext()
