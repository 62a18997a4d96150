-- 0006_store_meta: facts about the store as a whole. "format": the highest checkpoint format ever
-- written to it (persistence/format); a carryover that reads only older formats refuses to start.
CREATE TABLE store_meta (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
