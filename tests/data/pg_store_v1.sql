-- The first schema of a docsum PostgreSQL store, as docsum wrote it before the
-- tables were declared in docsum/store/tables.py (migration 1, unchanged since).
CREATE TABLE documents (
    doc_id              TEXT PRIMARY KEY,
    path                TEXT NOT NULL,
    root                TEXT NOT NULL,
    size                BIGINT NOT NULL,
    mtime_ns            BIGINT NOT NULL,
    sha256              TEXT NOT NULL,
    title               TEXT NOT NULL DEFAULT '',
    kind                TEXT NOT NULL,
    token_count         BIGINT NOT NULL,
    page_count          INTEGER,
    split_fingerprint   TEXT NOT NULL,
    summary_fingerprint TEXT NOT NULL,
    summary             TEXT NOT NULL,
    summary_model       TEXT NOT NULL,
    embedding           BYTEA,
    embedding_model     TEXT,
    added_at            TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    txid                XID8 NOT NULL DEFAULT pg_current_xact_id()
);
CREATE UNIQUE INDEX documents_root_path ON documents(root, path);
CREATE INDEX documents_path_root ON documents(path, root);
CREATE INDEX documents_txid ON documents(txid);

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

CREATE TABLE nodes (
    doc_id      TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    text        TEXT NOT NULL,
    start_char  BIGINT NOT NULL,
    end_char    BIGINT NOT NULL,
    pages       TEXT NOT NULL DEFAULT '[]',
    token_count BIGINT NOT NULL,
    PRIMARY KEY (doc_id, seq)
);

CREATE TABLE failures (
    root       TEXT NOT NULL,
    path       TEXT NOT NULL,
    error      TEXT NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 1,
    first_seen TEXT NOT NULL,
    last_seen  TEXT NOT NULL,
    PRIMARY KEY (root, path)
);

CREATE TABLE runs (
    id                BIGSERIAL PRIMARY KEY,
    kind              TEXT NOT NULL,
    started_at        TEXT NOT NULL,
    finished_at       TEXT,
    status            TEXT NOT NULL DEFAULT 'running',
    settings          TEXT NOT NULL DEFAULT '{}',
    llm_calls         BIGINT NOT NULL DEFAULT 0,
    prompt_tokens     BIGINT NOT NULL DEFAULT 0,
    completion_tokens BIGINT NOT NULL DEFAULT 0,
    usage             TEXT NOT NULL DEFAULT '{}',
    documents         TEXT NOT NULL DEFAULT '{}',
    backend_pid       INTEGER NOT NULL DEFAULT pg_backend_pid()  -- who runs it: alive while this backend is
);

CREATE TABLE calls (
    id                BIGSERIAL PRIMARY KEY,
    run_id            BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    kind              TEXT NOT NULL,
    model             TEXT NOT NULL,
    prompt_tokens     BIGINT NOT NULL DEFAULT 0,
    completion_tokens BIGINT NOT NULL DEFAULT 0,
    seconds           DOUBLE PRECISION NOT NULL DEFAULT 0,
    ok                BOOLEAN NOT NULL,
    at                TEXT NOT NULL
);
CREATE INDEX calls_run ON calls(run_id);

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO meta (key, value) VALUES ('store_id', to_json(gen_random_uuid()::text)::text);

CREATE TABLE claims (
    doc_id      TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    backend_pid INTEGER NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL
);
