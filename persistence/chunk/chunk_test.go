package chunk

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/carryover/carryover"
)

func TestHashFormat(t *testing.T) {
	// xxh3-128 of "" is 99aa06d3014798d86001c324468d497f (hi then lo, as xxhash's hexdigest prints).
	if h := Hash(nil); h != "99aa06d3014798d86001c324468d497f" {
		t.Fatalf("Hash(empty) = %s", h)
	}
	if h := Hash([]byte("abc")); h != "06b05ab6733a618578af5f94892f3950" {
		t.Fatalf("Hash(abc) = %s, want python's xxhash.xxh3_128_hexdigest", h)
	}
	if !ValidHash(Hash([]byte("x"))) || ValidHash("XYZ") || ValidHash(strings.Repeat("A", 32)) {
		t.Fatal("ValidHash")
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	text := bytes.Repeat([]byte("carryover keeps your kernel's state. "), 100000) // 3.7 MB, compressible
	c, err := Encode(text, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Codec != CodecZstd || len(c.Data) >= len(text)/10 || c.RawLen != int64(len(text)) {
		t.Fatalf("codec %s, %d stored bytes for %d", c.Codec, len(c.Data), len(text))
	}
	got, err := Decode(c.Codec, c.Data, []byte("prefix"))
	if err != nil || !bytes.Equal(got, append([]byte("prefix"), text...)) {
		t.Fatalf("Decode appends: err %v, len %d", err, len(got))
	}
	if err := Verify(c.Hash, c.RawLen, got[len("prefix"):]); err != nil {
		t.Fatal(err)
	}

	random := make([]byte, 1<<20)
	rand.Read(random)
	rc, _ := Encode(random, nil)
	if rc.Codec != CodecRaw || &rc.Data[0] != &random[0] {
		t.Fatalf("random data stored as %s (or copied)", rc.Codec)
	}
	small, _ := Encode(bytes.Repeat([]byte("a"), 100), nil)
	if small.Codec != CodecRaw {
		t.Fatalf("a small chunk is compressed")
	}
	if _, err := Decode("lz4", nil, nil); err == nil {
		t.Fatal("unknown codec decoded")
	}
}

func TestVerifyDetectsCorruption(t *testing.T) {
	h := Hash([]byte("precious bytes"))
	if err := Verify(h, 14, []byte("precious bytez")); err == nil || !strings.Contains(err.Error(), "corrupted") {
		t.Fatalf("corrupted bytes: %v", err)
	}
	if err := Verify(h, 15, []byte("precious bytes")); err == nil {
		t.Fatal("wrong length accepted")
	}
}

func TestCheckRefusesBadInput(t *testing.T) {
	data := []byte("hello")
	for name, c := range map[string]carryover.ChunkInput{
		"wrong hash": {Hash: Hash([]byte("other")), Codec: CodecRaw, RawLen: 5, Data: data},
		"bad hash":   {Hash: "XYZ", Codec: CodecRaw, RawLen: 5, Data: data},
		"wrong len":  {Hash: Hash(data), Codec: CodecRaw, RawLen: 6, Data: data},
		"bad codec":  {Hash: Hash(data), Codec: "lz4", RawLen: 5, Data: data},
		"bad child":  {Hash: Hash(data), Codec: CodecRaw, RawLen: 5, Data: data, Children: []string{"nope"}},
		"neg zstd":   {Hash: Hash(data), Codec: CodecZstd, RawLen: -1, Data: data},
	} {
		if err := Check(&c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	ok := carryover.ChunkInput{Hash: Hash(data), Codec: CodecRaw, RawLen: 5, Data: data, Children: []string{Hash(nil)}}
	if err := Check(&ok); err != nil {
		t.Fatal(err)
	}
}
