-- 0005_api_keys: API keys issued at run time (POST /api/admin/keys). Only the SHA-256 of a secret is
-- kept; the secret itself is shown once, at creation, and stored nowhere. Tenant-wide, not a
-- session's: no owner fencing applies. Times are Unix nanoseconds, as elsewhere in this schema.
CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    tenant       TEXT NOT NULL,
    name         TEXT NOT NULL DEFAULT '',
    scope        TEXT NOT NULL,
    prefix       TEXT NOT NULL,
    hash         TEXT NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT,
    last_used_at BIGINT
);
CREATE INDEX api_keys_tenant ON api_keys (tenant, created_at);
