-- The first schema of a docsum SQLite store, as docsum wrote it before the
-- tables were declared in docsum/store/tables.py (migration 1, unchanged since).
CREATE TABLE documents (
    doc_id              TEXT PRIMARY KEY,
    path                TEXT NOT NULL,      -- relative to root, POSIX separators
    root                TEXT NOT NULL,      -- absolute folder the build was given
    size                INTEGER NOT NULL,
    mtime_ns            INTEGER NOT NULL,
    sha256              TEXT NOT NULL,
    title               TEXT NOT NULL DEFAULT '',
    kind                TEXT NOT NULL,
    token_count         INTEGER NOT NULL,
    page_count          INTEGER,            -- NULL for formats without pages
    split_fingerprint   TEXT NOT NULL,
    summary_fingerprint TEXT NOT NULL,
    summary             TEXT NOT NULL,
    summary_model       TEXT NOT NULL,
    embedding           BLOB,               -- little-endian float32 vector
    embedding_model     TEXT,
    added_at            TEXT NOT NULL,
    updated_at          TEXT NOT NULL
);
CREATE UNIQUE INDEX documents_root_path ON documents(root, path);
CREATE INDEX documents_path ON documents(path);

CREATE TABLE nodes (
    doc_id      TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    text        TEXT NOT NULL,
    start_char  INTEGER NOT NULL,
    end_char    INTEGER NOT NULL,
    pages       TEXT NOT NULL DEFAULT '[]', -- JSON list of 1-based page numbers
    token_count INTEGER NOT NULL,
    PRIMARY KEY (doc_id, seq)
) WITHOUT ROWID;

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
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    kind              TEXT NOT NULL,
    started_at        TEXT NOT NULL,
    finished_at       TEXT,
    status            TEXT NOT NULL DEFAULT 'running',
    settings          TEXT NOT NULL DEFAULT '{}',
    llm_calls         INTEGER NOT NULL DEFAULT 0,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    usage             TEXT NOT NULL DEFAULT '{}',
    documents         TEXT NOT NULL DEFAULT '{}'
);

CREATE TABLE calls (
    id                INTEGER PRIMARY KEY,
    run_id            INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    kind              TEXT NOT NULL,
    model             TEXT NOT NULL,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    seconds           REAL NOT NULL DEFAULT 0,
    ok                INTEGER NOT NULL,
    at                TEXT NOT NULL
);
CREATE INDEX calls_run ON calls(run_id);

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL                     -- JSON
);
