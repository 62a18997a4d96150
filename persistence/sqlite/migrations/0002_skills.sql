-- 0002_skills: each tenant's skills (files every session of the tenant sees at /skills), a blob per file.
CREATE TABLE skills (
    tenant     TEXT NOT NULL,
    path       TEXT NOT NULL,
    size       INTEGER NOT NULL,
    hash       TEXT NOT NULL,
    content    BLOB NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    PRIMARY KEY (tenant, path)
) WITHOUT ROWID;
