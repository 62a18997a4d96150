-- 0003_chunk_refs_child: chunk_refs loses its index on child and the child's foreign key.
-- Each new group descriptor inserts one edge per chunk it lists (~1,000 for a 1 GiB array in 1 MiB
-- chunks). Child hashes are random, so the index took one random insert per edge, and with 64 KiB pages
-- a commit could rewrite one page per edge: the store's part of a turn that changes one element of such
-- an array took 9 ms with 20k edges stored and 56 ms with 600k (BenchmarkPutTurnS3). Neither was
-- needed: GC is mark and sweep (a chunk is deleted only when unreachable, together with every parent
-- that lists it, whose edges cascade), and a put checks that a descriptor's children exist
-- (checkChildren) before it commits.
CREATE TABLE chunk_refs_v2 (
    parent TEXT NOT NULL REFERENCES chunks (hash) ON DELETE CASCADE,
    child  TEXT NOT NULL,
    PRIMARY KEY (parent, child)
) WITHOUT ROWID;
INSERT INTO chunk_refs_v2 (parent, child) SELECT parent, child FROM chunk_refs;
DROP TABLE chunk_refs;
ALTER TABLE chunk_refs_v2 RENAME TO chunk_refs;
