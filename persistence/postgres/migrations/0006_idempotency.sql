-- 0006_idempotency: idempotency keys of turns (carryover.IdempotencyStore). A key is reserved
-- (pending) before its cell runs and holds the answer once the turn is recorded (done); a retry
-- with the key, through any node, gets that answer instead of a second run. Times in ns since epoch.
CREATE TABLE idempotency_keys (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    attempt     TEXT NOT NULL,
    state       TEXT NOT NULL,
    answer      TEXT,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    PRIMARY KEY (session_id, key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
