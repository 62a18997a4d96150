-- 0001_init: the schema of carryover on PostgreSQL (the same tables as persistence/sqlite, plus what a
-- cluster of nodes needs to share one database).
-- Times are BIGINT nanoseconds since the Unix epoch: timestamptz keeps microseconds, and the store
-- contract gives back the instant it was handed. JSON documents are TEXT, not jsonb: jsonb reorders
-- keys and drops duplicates, and a document must come back byte for byte.

CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    pos         BIGSERIAL NOT NULL,           -- creation order among equal created_at
    client_id   TEXT NOT NULL DEFAULT '',
    state       TEXT NOT NULL,
    doc         TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    -- event_seq is the last event sequence number handed out: AppendEvent increments it and inserts the
    -- event in one statement, so the row lock makes appends of one session take turns and numbers are
    -- gapless (a sequence would leave holes on rollback; MAX()+1 races between transactions).
    event_seq   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX sessions_created_at ON sessions (created_at, pos);
CREATE INDEX sessions_client_id ON sessions (client_id, updated_at) WHERE client_id <> '';

CREATE TABLE events (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        BIGINT NOT NULL,
    event_type TEXT NOT NULL,
    payload    TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE executions (
    id              BIGSERIAL PRIMARY KEY,
    session_id      TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    execution_count INTEGER NOT NULL,
    kind            TEXT NOT NULL,
    code            TEXT NOT NULL,
    status          TEXT NOT NULL,
    result          TEXT NOT NULL,
    started_at      BIGINT NOT NULL,
    duration_ms     DOUBLE PRECISION NOT NULL
);
CREATE INDEX executions_session ON executions (session_id, id);

CREATE TABLE tools (
    session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    tool_type    TEXT NOT NULL,
    description  TEXT NOT NULL,
    input_schema TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (session_id, name)
);

-- chunks: the catalog of content-addressed chunks (hash = xxh3-128 of the raw bytes). A small chunk's
-- bytes are inline (data); a large one lives in the object store under object_key, a key unique to
-- this upload (never reused, so a GC deleting an old object cannot delete a new upload of the same hash).
CREATE TABLE chunks (
    hash       TEXT PRIMARY KEY,
    codec      TEXT NOT NULL CHECK (codec IN ('raw', 'zstd')),
    raw_len    BIGINT NOT NULL,
    stored_len BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    data       BYTEA,
    object_key TEXT,
    CHECK ((data IS NULL) <> (object_key IS NULL))
);

-- chunk_refs: the edges of the Merkle DAG; a child must exist when the inserting transaction commits.
CREATE TABLE chunk_refs (
    parent TEXT NOT NULL REFERENCES chunks (hash) ON DELETE CASCADE,
    child  TEXT NOT NULL REFERENCES chunks (hash) DEFERRABLE INITIALLY DEFERRED,
    PRIMARY KEY (parent, child)
);
CREATE INDEX chunk_refs_child ON chunk_refs (child);

-- checkpoints: pos is the commit order within a session (a commit locks the session row first, so two
-- commits of one session take their pos in the order they commit).
CREATE TABLE checkpoints (
    id         TEXT PRIMARY KEY,
    pos        BIGSERIAL NOT NULL,
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn       INTEGER NOT NULL,
    parent_id  TEXT NOT NULL DEFAULT '',
    manifest   TEXT NOT NULL,
    bytes      BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL
);
CREATE INDEX checkpoints_session ON checkpoints (session_id, pos);

CREATE TABLE checkpoint_roots (
    checkpoint_id TEXT NOT NULL REFERENCES checkpoints (id) ON DELETE CASCADE,
    pos           INTEGER NOT NULL,
    hash          TEXT NOT NULL REFERENCES chunks (hash),
    PRIMARY KEY (checkpoint_id, pos)
);
CREATE INDEX checkpoint_roots_hash ON checkpoint_roots (hash);

-- writers and chunk_pins: a checkpoint in progress (on any node) pins every chunk it puts, new or
-- already stored, until it closes; GC marks from pins as from roots. A writer of a node that died is
-- dropped by GC after a long age (its pins go with it).
CREATE TABLE writers (
    id         TEXT PRIMARY KEY,
    started_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE chunk_pins (
    writer_id TEXT NOT NULL REFERENCES writers (id) ON DELETE CASCADE,
    hash      TEXT NOT NULL,
    PRIMARY KEY (writer_id, hash)
);
CREATE INDEX chunk_pins_hash ON chunk_pins (hash);

-- gc_lock: one row. GC holds it FOR UPDATE for its mark and sweep; puts and commits hold it FOR SHARE,
-- so a pin or a root is either seen by a GC or made after it (and then finds a swept chunk gone).
-- A row lock, not an advisory lock: it survives poolers and dies with its transaction.
CREATE TABLE gc_lock (id INTEGER PRIMARY KEY CHECK (id = 1));
INSERT INTO gc_lock VALUES (1);
