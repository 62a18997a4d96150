package archive

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/persistence/chunk"
	"github.com/carryover/carryover/persistence/format"
)

// strictJSON decodes b into v refusing unknown fields and trailing data.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errTrailing
	}
	return nil
}

var errTrailing = jsonErr("data after the JSON value")

type jsonErr string

func (e jsonErr) Error() string { return string(e) }

// checkParts checks the index's parts: the manifest and the session settings, in that order, and
// from version 2 on the events after them, when the archive carries them.
func checkParts(version int, parts []Part) error {
	if len(parts) >= 2 && parts[0].Name == ManifestName && parts[1].Name == SessionName &&
		(len(parts) == 2 || len(parts) == 3 && version >= EventVersion && parts[2].Name == EventsName) {
		return nil
	}
	return refuse(ReasonCorrupt, IndexName, "the index must list the parts %s and %s (and, from version %d, %s), in that order",
		ManifestName, SessionName, EventVersion, EventsName)
}

// parseIndex decodes and checks the index: its format and version, its parts, its chunk list
// (valid, distinct addresses; children among the listed chunks) against lim.
func parseIndex(b []byte, lim Limits) (*Index, error) {
	var probe struct {
		Format  string `json:"format"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal(b, &probe); err != nil || probe.Format != Format {
		return nil, refuse(ReasonCorrupt, IndexName, "not a carryover session archive (no index of format %q)", Format)
	}
	if probe.Version < 1 || probe.Version > Version {
		return nil, refuse(ReasonVersion, IndexName, "archive format version %d; this carryover reads versions 1 to %d", probe.Version, Version)
	}
	var idx Index
	if err := strictJSON(b, &idx); err != nil {
		return nil, refuse(ReasonCorrupt, IndexName, "index: %v", err)
	}
	if err := checkParts(idx.Version, idx.Parts); err != nil {
		return nil, err
	}
	for _, p := range idx.Parts {
		if p.Size < 0 || p.Size > lim.MaxPartBytes {
			return nil, refuse(ReasonTooLarge, p.Name, "%s declares %d bytes, over the limit of %d", p.Name, p.Size, lim.MaxPartBytes)
		}
		if len(p.SHA256) != 64 {
			return nil, refuse(ReasonCorrupt, IndexName, "%s has no SHA-256", p.Name)
		}
	}
	if len(idx.Chunks) > lim.MaxChunks {
		return nil, refuse(ReasonTooLarge, IndexName, "%d chunks, over the limit of %d", len(idx.Chunks), lim.MaxChunks)
	}
	set := make(map[string]bool, len(idx.Chunks))
	for _, c := range idx.Chunks {
		if !chunk.ValidHash(c.Hash) || set[c.Hash] {
			return nil, refuse(ReasonCorrupt, IndexName, "chunk %q is not a chunk address, or listed twice", c.Hash)
		}
		set[c.Hash] = true
	}
	for _, c := range idx.Chunks {
		for _, h := range c.Children {
			if !set[h] {
				return nil, refuse(ReasonMissing, IndexName, "chunk %s lists chunk %q, which the archive does not carry", c.Hash, h)
			}
		}
	}
	return &idx, nil
}

// parseManifest decodes and checks the checkpoint manifest: a format this server reads, group
// kinds and references, workspace file entries with clean relative paths.
func parseManifest(b []byte, lim Limits) (*persistence.Manifest, error) {
	var m persistence.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, refuse(ReasonCorrupt, ManifestName, "manifest: %v", err)
	}
	newest := lim.ReadFormat
	if newest <= 0 {
		newest = format.Newest
	}
	if err := format.Check("the archive's checkpoint", m.V, newest); err != nil || m.V < 0 {
		return nil, refuse(ReasonVersion, ManifestName, "the archive's checkpoint is format %d; this server reads formats %d to %d", m.V, format.Oldest, newest)
	}
	for _, g := range m.Groups {
		switch g.Kind {
		case "imp", "def", "data", persistence.GroupState:
		default:
			return nil, refuse(ReasonCorrupt, ManifestName, "group %v of unknown kind %q", g.Names, g.Kind)
		}
		if g.Ref != "" && !chunk.ValidHash(g.Ref) {
			return nil, refuse(ReasonCorrupt, ManifestName, "group %v names %q, not a chunk address", g.Names, g.Ref)
		}
	}
	seen := map[string]bool{}
	for _, f := range m.Files {
		if err := checkPath(f.Path); err != nil {
			return nil, err
		}
		if seen[f.Path] || !chunk.ValidHash(f.Ref) || f.Size < 0 {
			return nil, refuse(ReasonCorrupt, ManifestName, "workspace file %q: listed twice, or a bad reference or size", f.Path)
		}
		seen[f.Path] = true
	}
	for _, f := range m.FilesSkipped {
		if err := checkPath(f.Path); err != nil {
			return nil, err
		}
	}
	return &m, nil
}

// checkPath refuses a workspace file name that could land outside the workspace or is not the one
// form a snapshot writes: slash-separated, relative, clean, without NUL or backslash.
func checkPath(p string) error {
	if p == "" || strings.ContainsAny(p, "\x00\\") || path.IsAbs(p) || path.Clean(p) != p || p == "." ||
		!filepath.IsLocal(filepath.FromSlash(p)) || strings.HasPrefix(p, "../") || p == ".." {
		return refuse(ReasonPath, ManifestName, "workspace file name %q is not a clean path inside the workspace", p)
	}
	return nil
}

// checkGraph checks that the manifest's roots are listed and that every listed chunk is reached
// from them through the listed children: an archive carries exactly the chunks its checkpoint
// needs.
func checkGraph(idx *Index, m *persistence.Manifest) error {
	kids := make(map[string][]string, len(idx.Chunks))
	for _, c := range idx.Chunks {
		kids[c.Hash] = c.Children
	}
	reached := make(map[string]bool, len(idx.Chunks))
	var stack []string
	for _, c := range roots(m) {
		if _, ok := kids[c.hash]; !ok {
			return refuse(ReasonMissing, ManifestName, "the manifest names chunk %s, which the archive does not carry", c.hash)
		}
		stack = append(stack, c.hash)
	}
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if reached[h] {
			continue
		}
		reached[h] = true
		stack = append(stack, kids[h]...)
	}
	if len(reached) != len(idx.Chunks) {
		return refuse(ReasonUnexpected, IndexName, "the index lists %d chunks the manifest does not reach", len(idx.Chunks)-len(reached))
	}
	return nil
}

// manifestFor is the manifest to commit: the archive's, its working dir relocated by cwd.
func manifestFor(m *persistence.Manifest, raw []byte, cwd func(string) string) ([]byte, error) {
	if cwd == nil || cwd(m.Cwd) == m.Cwd {
		return raw, nil
	}
	c := *m
	c.Cwd = cwd(c.Cwd)
	return json.Marshal(&c)
}

// NewCheckpointID is a fresh checkpoint id, of the form the checkpoint engine gives.
func NewCheckpointID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "ckpt_" + hex.EncodeToString(b[:])
}

func nowUTC() time.Time { return time.Now().UTC() }
