-- 0008_node_load: each node's load, written with every heartbeat, so a node that is full places a new
-- session (or the wake of one nobody serves) on a node with room (docs/capacity.md). load_at is the
-- heartbeat that wrote it: a node of an older build renews heartbeat_at only, and its stale or absent
-- load is not trusted (load_at <> heartbeat_at).
ALTER TABLE nodes ADD COLUMN live_kernels INT NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN max_live_kernels INT NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN queued INT NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN idle_kernels INT NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN load_at TIMESTAMPTZ;
