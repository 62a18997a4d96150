package chunk

import (
	"fmt"

	"github.com/carryover/carryover"
)

// Decode appends the raw bytes of a chunk stored as data with codec to dst.
func Decode(codec string, data, dst []byte) ([]byte, error) {
	switch codec {
	case CodecRaw:
		return append(dst, data...), nil
	case CodecZstd:
		_, dec, err := zstdCodec()
		if err != nil {
			return dst, fmt.Errorf("zstd: %w", err)
		}
		return dec.DecodeAll(data, dst)
	default:
		return dst, fmt.Errorf("unknown codec %q", codec)
	}
}

// Verify checks raw bytes against the chunk's length and address: a damaged store fails loudly on
// restore instead of handing a kernel corrupted state.
func Verify(hash string, rawLen int64, raw []byte) error {
	if int64(len(raw)) != rawLen {
		return fmt.Errorf("raw length %d, want %d", len(raw), rawLen)
	}
	if h := Hash(raw); h != hash {
		return fmt.Errorf("content hashes to %s: corrupted", h)
	}
	return nil
}

// Check validates a chunk before it is stored: a well-formed address and codec, and for a raw chunk
// its length and hash (xxh3 runs at ~18 GiB/s, so a wrong address costs nothing to catch here and
// much to find later). Zstd data is checked when it is read back.
func Check(c *carryover.ChunkInput) error {
	if !ValidHash(c.Hash) {
		return fmt.Errorf("put chunk %q: hash is not 32 lowercase hex digits", c.Hash)
	}
	switch c.Codec {
	case CodecRaw:
		if int64(len(c.Data)) != c.RawLen {
			return fmt.Errorf("put chunk %s: raw_len %d but %d raw bytes", c.Hash, c.RawLen, len(c.Data))
		}
		if h := Hash(c.Data); h != c.Hash {
			return fmt.Errorf("put chunk %s: data hashes to %s", c.Hash, h)
		}
	case CodecZstd:
		if c.RawLen < 0 {
			return fmt.Errorf("put chunk %s: negative raw_len", c.Hash)
		}
	default:
		return fmt.Errorf("put chunk %s: unknown codec %q", c.Hash, c.Codec)
	}
	for _, child := range c.Children {
		if !ValidHash(child) {
			return fmt.Errorf("put chunk %s: child %q is not a hash", c.Hash, child)
		}
	}
	return nil
}
