package chunk

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/carryover/carryover"
	"github.com/klauspost/compress/zstd"
)

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

// Compression policy of Encode: chunks below compressMin bytes stay raw (a frame costs more than it
// saves), a chunk is first probed on its leading compressProbe bytes, and zstd is kept only when it
// saves more than 10%. Incompressible data (random arrays, media, archives) so costs one small probe
// instead of a whole compression, and reads of it stay a plain copy.
const (
	compressMin   = 512
	compressProbe = 64 << 10
)

// Encode builds the ChunkInput of raw bytes: its hash, and zstd-compressed Data when that pays.
// When the chunk stays raw, Data aliases raw: do not modify raw until PutChunks returned.
func Encode(raw []byte, children []string) (carryover.ChunkInput, error) {
	return EncodeHashed(raw, Hash(raw), children)
}

// EncodeHashed is Encode for a caller that already hashed raw (to look it up before encoding).
func EncodeHashed(raw []byte, hash string, children []string) (carryover.ChunkInput, error) {
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
