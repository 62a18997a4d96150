-- 0007_formats: what each node can read, and what the store holds (persistence/format).
-- nodes.max_format: the newest checkpoint format the node reads, announced with every heartbeat; the
-- cluster writes the lowest max_format of its live nodes. store_meta "format": the highest format
-- ever in force; a node that reads less refuses to start.
ALTER TABLE nodes ADD COLUMN max_format INT NOT NULL DEFAULT 1;
CREATE TABLE store_meta (
    name  TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);
