-- 0009_ephemeral_idempotency: idempotency keys of POST /api/execute (carryover.EphemeralKeyStore).
-- Its runs have no session to hold a key, so a key belongs to its tenant; otherwise as
-- idempotency_keys. Times in ns since epoch.
CREATE TABLE ephemeral_idempotency_keys (
    tenant      TEXT NOT NULL,
    key         TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    attempt     TEXT NOT NULL,
    state       TEXT NOT NULL,
    answer      TEXT,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant, key)
);
CREATE INDEX ephemeral_idempotency_keys_expiry ON ephemeral_idempotency_keys (expires_at);
