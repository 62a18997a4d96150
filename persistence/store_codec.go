package persistence

import (
	"encoding/hex"
	"fmt"
	"runtime"
	"sync"

	"github.com/carryover/carryover"
	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/xxh3"
)

// Codecs of a stored chunk.
const (
	CodecRaw  = "raw"
	CodecZstd = "zstd"
)

// HashChunk returns the address of a chunk: lowercase hex of xxh3-128 of its raw bytes, the 16 bytes
// big-endian (high half first), which is also what Python's xxhash.xxh3_128_hexdigest prints.
func HashChunk(raw []byte) string {
	b := xxh3.Hash128(raw).Bytes()
	return hex.EncodeToString(b[:])
}

// zstd state is shared: EncodeAll and DecodeAll are safe for concurrent use, and building an encoder
// or decoder costs far more than one chunk.
var (
	zstdOnce sync.Once
	zstdEnc  *zstd.Encoder
	zstdDec  *zstd.Decoder
	zstdErr  error
)

func zstdCodec() (*zstd.Encoder, *zstd.Decoder, error) {
	zstdOnce.Do(func() {
		n := runtime.GOMAXPROCS(0)
		zstdEnc, zstdErr = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(n))
		if zstdErr != nil {
			return
		}
		zstdDec, zstdErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(n), zstd.WithDecoderMaxMemory(1<<30))
	})
	return zstdEnc, zstdDec, zstdErr
}

// Compression policy of EncodeChunk: chunks below compressMin bytes stay raw (a frame costs more than it
// saves), a chunk is first probed on its leading compressProbe bytes, and zstd is kept only when it
// saves more than 10%. Incompressible data (random arrays, media, archives) so costs one small probe
// instead of a whole compression, and reads of it stay a plain copy.
const (
	compressMin   = 512
	compressProbe = 64 << 10
)

// EncodeChunk builds the ChunkInput of raw bytes: its hash, and zstd-compressed Data when that pays.
// When the chunk stays raw, Data aliases raw: do not modify raw until PutChunks returned.
func EncodeChunk(raw []byte, children []string) (carryover.ChunkInput, error) {
	return encodeHashed(raw, HashChunk(raw), children)
}

// encodeHashed is EncodeChunk for a caller that already hashed raw.
func encodeHashed(raw []byte, hash string, children []string) (carryover.ChunkInput, error) {
	c := carryover.ChunkInput{Hash: hash, Codec: CodecRaw, RawLen: int64(len(raw)), Data: raw, Children: children}
	if len(raw) < compressMin {
		return c, nil
	}
	enc, _, err := zstdCodec()
	if err != nil {
		return c, fmt.Errorf("zstd: %w", err)
	}
	if len(raw) > compressProbe {
		probe := enc.EncodeAll(raw[:compressProbe], make([]byte, 0, compressProbe))
		if !pays(len(probe), compressProbe) {
			return c, nil
		}
	}
	z := enc.EncodeAll(raw, make([]byte, 0, len(raw)/2))
	if pays(len(z), len(raw)) {
		c.Codec, c.Data = CodecZstd, z
	}
	return c, nil
}

func pays(compressed, raw int) bool { return compressed < raw-raw/10 }

// decodeChunk appends the raw bytes of stored data to dst.
func decodeChunk(codec string, data, dst []byte) ([]byte, error) {
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
