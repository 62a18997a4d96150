package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"archive/tar"

	"github.com/klauspost/compress/zstd"

	"github.com/carryover/carryover"
)

// reseal recomputes the index's part digests and the trailer of ms, so a mutation is caught by the
// check it targets, not by a digest.
func reseal(t testing.TB, ms []member) []member {
	t.Helper()
	var idx Index
	if err := json.Unmarshal(ms[0].b, &idx); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		for i, p := range idx.Parts {
			if p.Name == m.h.Name {
				idx.Parts[i] = part(p.Name, m.b)
			}
		}
	}
	ib, _ := json.Marshal(idx)
	ms[0].b = ib
	sum := sha256.New()
	for i, m := range ms {
		if m.h.Name == TrailerName {
			ms[i].b = []byte(hex.EncodeToString(sum.Sum(nil)) + "\n")
			break
		}
		digestMember(sum, m.h.Name, m.b)
	}
	return ms
}

func editIndex(t testing.TB, ms []member, fn func(*Index)) []member {
	var idx Index
	if err := json.Unmarshal(ms[0].b, &idx); err != nil {
		t.Fatal(err)
	}
	fn(&idx)
	ms[0].b, _ = json.Marshal(idx)
	return ms
}

func editManifest(t testing.TB, ms []member, fn func(map[string]any)) []member {
	var m map[string]any
	if err := json.Unmarshal(ms[1].b, &m); err != nil {
		t.Fatal(err)
	}
	fn(m)
	ms[1].b, _ = json.Marshal(m)
	return ms
}

// firstChunk is the index in ms of the first chunk member whose name satisfies ok.
func firstChunk(ms []member, ok func(member) bool) int {
	for i, m := range ms {
		if strings.HasPrefix(m.h.Name, chunkDir) && ok(m) {
			return i
		}
	}
	return -1
}

func isLeaf(ms []member) func(member) bool {
	var idx Index
	_ = json.Unmarshal(ms[0].b, &idx)
	leaf := map[string]bool{}
	for _, c := range idx.Chunks {
		leaf[c.Hash] = len(c.Children) == 0
	}
	return func(m member) bool {
		return leaf[strings.TrimSuffix(strings.TrimPrefix(m.h.Name, chunkDir), zstdSuffix)]
	}
}

func bomb(t testing.TB, n int) []byte {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		t.Fatal(err)
	}
	return enc.EncodeAll(make([]byte, n), nil)
}

// hostileCase is one damaged archive and the reason it must be refused with.
type hostileCase struct {
	name   string
	reason string
	lim    Limits
	mutate func(t testing.TB, arch []byte) []byte
}

func hostileCases() []hostileCase {
	ms := func(t testing.TB, a []byte) []member { return members(t, a) }
	return []hostileCase{
		{"empty", ReasonTruncated, Limits{}, func(t testing.TB, a []byte) []byte { return nil }},
		{"not a tar", ReasonCorrupt, Limits{}, func(t testing.TB, a []byte) []byte { return bytes.Repeat([]byte("carryover!"), 200) }},
		{"truncated in the index", ReasonTruncated, Limits{}, func(t testing.TB, a []byte) []byte { return a[:700] }},
		{"truncated in a chunk", ReasonTruncated, Limits{}, func(t testing.TB, a []byte) []byte { return a[:len(a)/2] }},
		{"truncated before the trailer", ReasonTruncated, Limits{}, func(t testing.TB, a []byte) []byte {
			m := ms(t, a)
			return pack(t, m[:len(m)-1])[:len(pack(t, m[:len(m)-1]))-1024]
		}},
		{"no trailer", ReasonTruncated, Limits{}, func(t testing.TB, a []byte) []byte { m := ms(t, a); return pack(t, m[:len(m)-1]) }},
		{"a flipped byte in a chunk", ReasonDigest, Limits{}, func(t testing.TB, a []byte) []byte {
			m := ms(t, a)
			i := firstChunk(m, func(m member) bool { return !strings.HasSuffix(m.h.Name, zstdSuffix) })
			m[i].b[len(m[i].b)/2] ^= 0x40
			return pack(t, reseal(t, m))
		}},
		{"a corrupt zstd chunk", ReasonCorrupt, Limits{}, func(t testing.TB, a []byte) []byte {
			m := ms(t, a)
			i := firstChunk(m, func(m member) bool { return strings.HasSuffix(m.h.Name, zstdSuffix) })
			m[i].b = append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xff}, bytes.Repeat([]byte{0xee}, 40)...)
			return pack(t, reseal(t, m))
		}},
		{"tampered manifest (part digest)", ReasonDigest, Limits{}, func(t testing.TB, a []byte) []byte {
			m := ms(t, a)
			m[1].b = bytes.Replace(m[1].b, []byte("/workspace/sub"), []byte("/workspace/sux"), 1)
			return pack(t, m)
		}},
		{"tampered settings (trailer digest)", ReasonDigest, Limits{}, func(t testing.TB, a []byte) []byte {
			m := ms(t, a)
			m[2].b = []byte(`{"name":"x"}`)
			m = editIndex(t, m, func(idx *Index) { idx.Parts[1] = part(SessionName, m[2].b) })
			return pack(t, m)
		}},
		{"wrong archive version", ReasonVersion, Limits{}, func(t testing.TB, a []byte) []byte {
			return pack(t, reseal(t, editIndex(t, ms(t, a), func(idx *Index) { idx.Version = Version + 1 })))
		}},
		{"wrong format name", ReasonCorrupt, Limits{}, func(t testing.TB, a []byte) []byte {
			return pack(t, reseal(t, editIndex(t, ms(t, a), func(idx *Index) { idx.Format = "zip" })))
		}},
		{"newer checkpoint format", ReasonVersion, Limits{}, func(t testing.TB, a []byte) []byte {
			return pack(t, reseal(t, editManifest(t, ms(t, a), func(m map[string]any) { m["v"] = 99 })))
		}},
		{"path traversal", ReasonPath, Limits{}, func(t testing.TB, a []byte) []byte {
			return pack(t, reseal(t, editManifest(t, ms(t, a), func(m map[string]any) {
				m["files"].([]any)[0].(map[string]any)["path"] = "../../etc/cron.d/x"
			})))
		}},
		{"absolute path", ReasonPath, Limits{}, func(t testing.TB, a []byte) []byte {
			return pack(t, reseal(t, editManifest(t, ms(t, a), func(m map[string]any) {
				m["files"].([]any)[0].(map[string]any)["path"] = "/etc/passwd"
			})))
		}},
		{"unclean path", ReasonPath, Limits{}, func(t testing.TB, a []byte) []byte {
			return pack(t, reseal(t, editManifest(t, ms(t, a), func(m map[string]any) {
				m["files"].([]any)[0].(map[string]any)["path"] = "sub/../../x"
			})))
		}},
		{"manifest names a chunk not carried", ReasonMissing, Limits{}, func(t testing.TB, a []byte) []byte {
			return pack(t, reseal(t, editManifest(t, ms(t, a), func(m map[string]any) {
				m["groups"].([]any)[1].(map[string]any)["r"] = strings.Repeat("ab", 16)
			})))
		}},
		{"a chunk left out", ReasonMissing, Limits{}, func(t testing.TB, a []byte) []byte {
			m := ms(t, a)
			i := firstChunk(m, isLeaf(m))
			gone := strings.TrimSuffix(strings.TrimPrefix(m[i].h.Name, chunkDir), zstdSuffix)
			m = append(m[:i], m[i+1:]...)
			m = editIndex(t, m, func(idx *Index) {
				var keep []ChunkEntry
				for _, c := range idx.Chunks {
					if c.Hash != gone {
						var ch []string
						for _, h := range c.Children {
							if h != gone {
								ch = append(ch, h)
							}
						}
						c.Children = ch
						keep = append(keep, c)
					}
				}
				idx.Chunks = keep
			})
			return pack(t, reseal(t, m))
		}},
		{"index lists a chunk the manifest does not reach", ReasonUnexpected, Limits{}, func(t testing.TB, a []byte) []byte {
			return pack(t, reseal(t, editIndex(t, ms(t, a), func(idx *Index) {
				idx.Chunks = append(idx.Chunks, ChunkEntry{Hash: strings.Repeat("cd", 16)})
			})))
		}},
		{"chunks out of order", ReasonUnexpected, Limits{}, func(t testing.TB, a []byte) []byte {
			m := ms(t, a)
			m[3], m[len(m)-2] = m[len(m)-2], m[3]
			return pack(t, reseal(t, m))
		}},
		{"a symlink member", ReasonUnexpected, Limits{}, func(t testing.TB, a []byte) []byte {
			m := ms(t, a)
			m[3].h.Typeflag, m[3].h.Linkname, m[3].b = '2', "/etc/passwd", nil
			return pack(t, m)
		}},
		{"a traversing member name", ReasonUnexpected, Limits{}, func(t testing.TB, a []byte) []byte {
			m := ms(t, a)
			m[3].h.Name = "../../tmp/evil"
			return pack(t, reseal(t, m))
		}},
		{"a member after the trailer", ReasonUnexpected, Limits{}, func(t testing.TB, a []byte) []byte {
			m := ms(t, a)
			return pack(t, append(m, member{h: &tar.Header{Name: "extra", Typeflag: tar.TypeReg, Mode: 0o644}, b: []byte("x")}))
		}},
		{"over the archive limit", ReasonTooLarge, Limits{MaxArchiveBytes: 4096}, func(t testing.TB, a []byte) []byte { return a }},
		{"a chunk over the chunk limit", ReasonTooLarge, Limits{MaxChunkBytes: 2048}, func(t testing.TB, a []byte) []byte { return a }},
		{"declared raw length over the limit", ReasonTooLarge, Limits{}, func(t testing.TB, a []byte) []byte {
			m := ms(t, a)
			i := firstChunk(m, isLeaf(m))
			m[i].h.PAXRecords = map[string]string{paxRawLen: strconv.Itoa(DefaultMaxChunkBytes + 1)}
			return pack(t, reseal(t, m))
		}},
		{"a zstd bomb", ReasonTooLarge, Limits{MaxChunkBytes: 1 << 20}, func(t testing.TB, a []byte) []byte {
			m := ms(t, a)
			i := firstChunk(m, isLeaf(m))
			m[i].h.Name = strings.TrimSuffix(m[i].h.Name, zstdSuffix) + zstdSuffix
			m[i].b = bomb(t, 256<<20)
			return pack(t, reseal(t, m))
		}},
		{"decodes past its declared length", ReasonDigest, Limits{}, func(t testing.TB, a []byte) []byte {
			m := ms(t, a)
			i := firstChunk(m, isLeaf(m))
			m[i].h.Name = strings.TrimSuffix(m[i].h.Name, zstdSuffix) + zstdSuffix
			m[i].b = bomb(t, 8<<20)
			return pack(t, reseal(t, m))
		}},
		{"an oversized part", ReasonTooLarge, Limits{MaxPartBytes: 100}, func(t testing.TB, a []byte) []byte { return a }},
		{"a descriptor whose children differ from the index", ReasonMissing, Limits{}, func(t testing.TB, a []byte) []byte {
			return pack(t, reseal(t, editIndex(t, ms(t, a), func(idx *Index) {
				last := idx.Chunks[len(idx.Chunks)-1].Hash
				for i := range idx.Chunks {
					if len(idx.Chunks[i].Children) > 1 && !slices.Contains(idx.Chunks[i].Children, last) {
						idx.Chunks[i].Children = append(idx.Chunks[i].Children, last)
						return
					}
				}
			})))
		}},
	}
}

// TestHostileArchives: every damaged archive is refused with its reason, in the API's error shape,
// and leaves the importing store with no checkpoint and, after a GC, no chunk.
func TestHostileArchives(t *testing.T) {
	t.Parallel()
	src := openSQLite(t, "s1")
	good := export(t, src, "s1", mkCheckpoint(t, src, "s1", 1))
	var idx Index
	if err := json.Unmarshal(members(t, good)[0].b, &idx); err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, c := range idx.Chunks {
		all = append(all, c.Hash)
	}
	for _, c := range hostileCases() {
		t.Run(c.name, func(t *testing.T) {
			dst := openSQLite(t, "victim")
			s, err := Read(context.Background(), bytes.NewReader(c.mutate(t, bytes.Clone(good))), dst, c.lim)
			if err == nil {
				s.Close()
				t.Fatal("accepted")
			}
			var ce *carryover.Error
			if !errors.As(err, &ce) {
				t.Fatalf("not an API error: %v", err)
			}
			if got := ce.Details["reason"]; got != c.reason {
				t.Fatalf("reason %v, want %s: %v", got, c.reason, err)
			}
			want := carryover.CodeInvalid
			if c.reason == ReasonTooLarge {
				want = carryover.CodePayloadTooLarge
			}
			if ce.Code != want {
				t.Fatalf("code %s, want %s", ce.Code, want)
			}
			if cps, _ := dst.ListCheckpoints(context.Background(), "victim"); len(cps) != 0 {
				t.Fatalf("%d checkpoints", len(cps))
			}
			// Chunks staged before the refusal are garbage: one GC takes them all.
			if _, _, err := dst.GC(context.Background()); err != nil {
				t.Fatal(err)
			}
			if miss, _ := dst.MissingChunks(context.Background(), all); len(miss) != len(all) {
				t.Fatalf("%d chunks of the archive left in the store", len(all)-len(miss))
			}
		})
	}
}
