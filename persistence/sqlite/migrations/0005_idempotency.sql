-- 0005_idempotency: idempotency keys of turns (carryover.IdempotencyStore). A key is reserved
-- (pending) before its cell runs and holds the answer once the turn is recorded (done); a retry
-- with the key gets that answer instead of a second run. Keys belong to their session.
CREATE TABLE idempotency_keys (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    attempt     TEXT NOT NULL,
    state       TEXT NOT NULL,
    answer      TEXT,
    created_at  TIMESTAMP NOT NULL,
    expires_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (session_id, key)
) WITHOUT ROWID;
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
