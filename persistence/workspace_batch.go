package persistence

import (
	"context"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
)

// chunkBatch batches small chunks of many files into one PutChunks (a descriptor may travel with its
// data chunks: PutChunks checks children at the end of the batch), bounding memory to flushBytes.
type chunkBatch struct {
	w        carryover.ChunkWriter
	batch    []carryover.ChunkInput
	batchLen int
	pending  map[string]bool // hashes in batch
	written  int64
}

const (
	flushBytes  = 8 << 20
	flushChunks = 256
	directPut   = 1 << 20
)

// add queues raw as a chunk unless it is stored or queued already, and returns its hash. raw is copied
// when kept, so the caller may reuse it.
func (b *chunkBatch) add(ctx context.Context, raw []byte, children []string) (string, error) {
	h := chunk.Hash(raw)
	if b.pending[h] {
		return h, nil
	}
	if missing, err := b.w.MissingChunks(ctx, []string{h}); err != nil {
		return "", err
	} else if len(missing) == 0 {
		return h, nil // stored already: no need to encode it
	}
	c, err := chunk.EncodeHashed(raw, h, children)
	if err != nil {
		return "", err
	}
	if c.Codec == chunk.CodecRaw && len(raw) >= directPut {
		// A big raw chunk goes in on its own, straight from the caller's buffer: no copy of it.
		if err := b.flush(ctx); err != nil {
			return "", err
		}
		n, err := b.w.PutChunks(ctx, []carryover.ChunkInput{c})
		b.written += n
		return h, err
	}
	if c.Codec == chunk.CodecRaw {
		c.Data = append([]byte(nil), raw...)
	}
	b.batch = append(b.batch, c)
	b.batchLen += len(c.Data)
	b.pending[h] = true
	if b.batchLen >= flushBytes || len(b.batch) >= flushChunks {
		return h, b.flush(ctx)
	}
	return h, nil
}

func (b *chunkBatch) flush(ctx context.Context) error {
	if len(b.batch) == 0 {
		return nil
	}
	n, err := b.w.PutChunks(ctx, b.batch)
	if err != nil {
		return err
	}
	b.written += n
	clear(b.batch)
	b.batch, b.batchLen = b.batch[:0], 0
	clear(b.pending)
	return nil
}
