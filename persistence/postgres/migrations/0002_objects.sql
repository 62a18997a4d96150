-- 0002_objects: objects of chunks GC took, deleted from the object store only after a grace period
-- (a restore that read the catalog just before the sweep may still be fetching the object).
CREATE TABLE object_tombstones (
    key        TEXT PRIMARY KEY,
    deleted_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
