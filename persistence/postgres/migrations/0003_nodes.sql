-- 0003_nodes: the nodes of a cluster and the owner of each session.
-- A node is alive while heartbeat_at + ttl is in the future (database clock). A session's owner_epoch
-- grows by one on every claim; writes of a node are conditional on (owner_node, owner_epoch) it holds.
CREATE TABLE nodes (
    id           TEXT PRIMARY KEY,
    addr         TEXT NOT NULL DEFAULT '',
    heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    ttl_ms       BIGINT NOT NULL
);

ALTER TABLE sessions ADD COLUMN owner_node TEXT;
ALTER TABLE sessions ADD COLUMN owner_epoch BIGINT NOT NULL DEFAULT 0;
