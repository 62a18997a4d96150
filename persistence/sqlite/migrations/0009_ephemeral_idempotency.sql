-- 0009_ephemeral_idempotency: idempotency keys of POST /api/execute (carryover.EphemeralKeyStore).
-- Its runs have no session to hold a key, so a key belongs to its tenant; otherwise as
-- idempotency_keys: reserved (pending) before the cell runs, the answer stored once it ran (done).
CREATE TABLE ephemeral_idempotency_keys (
    tenant      TEXT NOT NULL,
    key         TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    attempt     TEXT NOT NULL,
    state       TEXT NOT NULL,
    answer      TEXT,
    created_at  TIMESTAMP NOT NULL,
    expires_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (tenant, key)
) WITHOUT ROWID;
CREATE INDEX ephemeral_idempotency_keys_expiry ON ephemeral_idempotency_keys (expires_at);
