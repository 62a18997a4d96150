-- 0010_packs: the large chunks of one put share objects (packs) of up to a few MiB: an object store
-- spends as much on a request as on a MiB of its body, so a 1 GiB import of 1 MiB chunks paid for
-- 1,024 requests. A packed chunk's stored bytes are object_key's [object_offset, object_offset +
-- stored_len); a NULL offset is the whole object (a chunk of its own, as every chunk before 0010).
-- The index serves GC, which deletes a pack's object only when no chunk row names it any more.
ALTER TABLE chunks ADD COLUMN object_offset BIGINT CHECK (object_offset IS NULL OR object_key IS NOT NULL);
CREATE INDEX chunks_object_key ON chunks (object_key) WHERE object_key IS NOT NULL;
