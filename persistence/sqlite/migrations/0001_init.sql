-- 0001_init: the whole schema of the first release.
-- Times are TEXT in a fixed-width UTC form ("2006-01-02T15:04:05.000000000Z") so that they sort as text
-- and go-sqlite3 hands them back as time.Time (it parses TIMESTAMP-declared columns).
-- JSON documents are TEXT so that SQLite's json_* functions work on them from the sqlite3 shell.

CREATE TABLE sessions (
    id         TEXT PRIMARY KEY,
    client_id  TEXT NOT NULL DEFAULT '',
    state      TEXT NOT NULL,
    doc        TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX sessions_created_at ON sessions (created_at);
CREATE INDEX sessions_client_id ON sessions (client_id, updated_at) WHERE client_id <> '';

-- events: append-only; seq is gapless per session (assigned as MAX(seq)+1 inside the insert's transaction).
CREATE TABLE events (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    event_type TEXT NOT NULL,
    payload    TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;

CREATE TABLE executions (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id      TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    execution_count INTEGER NOT NULL,
    kind            TEXT NOT NULL,
    code            TEXT NOT NULL,
    status          TEXT NOT NULL,
    result          TEXT NOT NULL,
    started_at      TIMESTAMP NOT NULL,
    duration_ms     REAL NOT NULL
);
CREATE INDEX executions_session ON executions (session_id, id);

CREATE TABLE tools (
    session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    tool_type    TEXT NOT NULL,
    description  TEXT NOT NULL,
    input_schema TEXT NOT NULL,
    created_at   TIMESTAMP NOT NULL,
    PRIMARY KEY (session_id, name)
) WITHOUT ROWID;

-- chunks: content-addressed (hash = xxh3-128 of the raw bytes). data is last in the row so that reading
-- codec/raw_len/stored_len never walks the blob's overflow pages; stored_len spares GC from reading blobs.
CREATE TABLE chunks (
    hash       TEXT PRIMARY KEY,
    codec      TEXT NOT NULL CHECK (codec IN ('raw', 'zstd')),
    raw_len    INTEGER NOT NULL,
    stored_len INTEGER NOT NULL,
    created_at TIMESTAMP NOT NULL,
    data       BLOB NOT NULL
);

-- chunk_refs: the edges of the Merkle DAG (descriptor -> the chunks it lists). A parent's edges go with it;
-- a child must exist when the inserting transaction commits (deferred) and cannot be deleted while referenced.
CREATE TABLE chunk_refs (
    parent TEXT NOT NULL REFERENCES chunks (hash) ON DELETE CASCADE,
    child  TEXT NOT NULL REFERENCES chunks (hash) DEFERRABLE INITIALLY DEFERRED,
    PRIMARY KEY (parent, child)
) WITHOUT ROWID;
CREATE INDEX chunk_refs_child ON chunk_refs (child);

-- checkpoints: a row exists only once its single commit transaction finished; ordering is by rowid
-- (commit order), which SQLite keeps increasing because it picks max(rowid)+1.
CREATE TABLE checkpoints (
    id         TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn       INTEGER NOT NULL,
    parent_id  TEXT NOT NULL DEFAULT '',
    manifest   TEXT NOT NULL,
    bytes      INTEGER NOT NULL DEFAULT 0,
    created_at TIMESTAMP NOT NULL
);
CREATE INDEX checkpoints_session ON checkpoints (session_id);

-- checkpoint_roots: GC marks from here. A root chunk cannot be deleted while a checkpoint names it.
CREATE TABLE checkpoint_roots (
    checkpoint_id TEXT NOT NULL REFERENCES checkpoints (id) ON DELETE CASCADE,
    pos           INTEGER NOT NULL,
    hash          TEXT NOT NULL REFERENCES chunks (hash),
    PRIMARY KEY (checkpoint_id, pos)
) WITHOUT ROWID;
CREATE INDEX checkpoint_roots_hash ON checkpoint_roots (hash);
