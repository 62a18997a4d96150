-- 0004_skills: each tenant's skills (files every session of the tenant sees at /skills), a blob per file.
-- Tenant-wide, not a session's: no owner fencing applies.
CREATE TABLE skills (
    tenant     TEXT NOT NULL,
    path       TEXT NOT NULL,
    size       BIGINT NOT NULL,
    hash       TEXT NOT NULL,
    content    BYTEA NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (tenant, path)
);
