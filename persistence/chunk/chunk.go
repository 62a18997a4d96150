// Package chunk is the codec of carryover's content-addressed chunks: how a chunk is addressed (xxh3-128
// of its raw bytes), how it is stored (raw, or zstd when that pays), and how stored bytes are decoded
// and checked against their address. The checkpoint engine encodes with it and every store backend
// checks and decodes with it, so both sides agree on one format.
package chunk

import (
	"encoding/hex"

	"github.com/zeebo/xxh3"
)

// Codecs of a stored chunk.
const (
	CodecRaw  = "raw"
	CodecZstd = "zstd"
)

// Hash returns the address of a chunk: lowercase hex of xxh3-128 of its raw bytes, the 16 bytes
// big-endian (high half first), which is also what Python's xxhash.xxh3_128_hexdigest prints, so the
// in-kernel agent and the server compute the same addresses.
func Hash(raw []byte) string {
	b := xxh3.Hash128(raw).Bytes()
	return hex.EncodeToString(b[:])
}

// ValidHash reports whether h has the form of an address: 32 lowercase hex digits.
func ValidHash(h string) bool {
	if len(h) != 32 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
