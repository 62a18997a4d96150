package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// An archive kept as a directory (export --dir): its members as files, chunks named
// carryover/chunks/<hash>-<raw length>[.zst]. Chunks are content-addressed, so exporting a session
// again into the same directory writes only the chunks it does not hold yet (a changed variable,
// an appended file), and removes those the new export no longer names. import DIR sends the
// directory as the archive it was, streamed.

const (
	dirChunks = "carryover/chunks/"
	paxRawLen = "CARRYOVER.raw_len"
)

// dirStats is what an export into a directory wrote.
type dirStats struct {
	written, kept, removed int
	bytes                  int64
}

// unpackArchive writes the archive read from r into dir, skipping chunks dir already holds. The
// other members are written last, the index after them, once every chunk is in: an export cut
// short leaves the previous export's index, whose chunks are all still there.
func unpackArchive(r io.Reader, dir string) (dirStats, error) {
	var st dirStats
	tr := tar.NewReader(r)
	keep := map[string]bool{}
	parts := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return st, fmt.Errorf("reading the archive: %w", err)
		}
		name, err := dirName(h)
		if err != nil {
			return st, err
		}
		path := filepath.Join(dir, filepath.FromSlash(name))
		if strings.HasPrefix(name, dirChunks) {
			keep[filepath.Base(path)] = true
			if _, err := os.Stat(path); err == nil {
				st.kept++
				continue
			}
			st.written++
			st.bytes += h.Size
			if err := writeAtomically(path, tr); err != nil {
				return st, err
			}
			continue
		}
		b, err := io.ReadAll(io.LimitReader(tr, 64<<20))
		if err != nil {
			return st, err
		}
		parts[name] = b
	}
	events := filepath.Join(dir, "carryover", "events.jsonl")
	if b, ok := parts["carryover/events.jsonl"]; ok { // version 2, exported with its events
		if err := writeAtomically(events, bytes.NewReader(b)); err != nil {
			return st, err
		}
	} else if err := os.Remove(events); err != nil && !errors.Is(err, os.ErrNotExist) {
		return st, err
	}
	for _, name := range []string{"carryover/manifest.json", "carryover/session.json", "carryover/digest.sha256", "carryover/index.json"} {
		b, ok := parts[name]
		if !ok {
			return st, fmt.Errorf("the archive has no %s", name)
		}
		if err := writeAtomically(filepath.Join(dir, filepath.FromSlash(name)), bytes.NewReader(b)); err != nil {
			return st, err
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(dirChunks)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return st, err
	}
	for _, e := range entries {
		if !keep[e.Name()] {
			if err := os.Remove(filepath.Join(dir, filepath.FromSlash(dirChunks), e.Name())); err != nil {
				return st, err
			}
			st.removed++
		}
	}
	return st, nil
}

// dirName is the file a member is kept as: its name, a chunk's with its raw length. A name that is
// not a clean path under carryover/ is refused (the archive came over the network).
func dirName(h *tar.Header) (string, error) {
	n := h.Name
	if h.Typeflag != tar.TypeReg || !strings.HasPrefix(n, "carryover/") || !filepath.IsLocal(filepath.FromSlash(n)) || strings.Contains(n, "\\") {
		return "", fmt.Errorf("the archive has a member %q this directory form does not hold", n)
	}
	if !strings.HasPrefix(n, dirChunks) {
		return n, nil
	}
	raw, err := strconv.ParseInt(h.PAXRecords[paxRawLen], 10, 64)
	if err != nil || strings.Contains(strings.TrimPrefix(n, dirChunks), "/") {
		return "", fmt.Errorf("the archive's chunk member %q has no raw length", n)
	}
	base, zst := strings.CutSuffix(n, ".zst")
	n = base + "-" + strconv.FormatInt(raw, 10)
	if zst {
		n += ".zst"
	}
	return n, nil
}

// writeAtomically writes r to path through a temporary file renamed into place.
func writeAtomically(path string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".part-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// packDir streams the archive kept in dir to w, members in the order of its index.
func packDir(dir string, w io.Writer) error {
	var idx struct {
		Parts []struct {
			Name string `json:"name"`
		} `json:"parts"`
		Chunks []struct {
			Hash string `json:"h"`
		} `json:"chunks"`
	}
	ib, err := os.ReadFile(filepath.Join(dir, "carryover", "index.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(ib, &idx); err != nil {
		return fmt.Errorf("%s: index: %w", dir, err)
	}
	have := map[string]string{} // hash -> file name
	entries, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(dirChunks)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		have[strings.SplitN(e.Name(), "-", 2)[0]] = e.Name()
	}
	tw := tar.NewWriter(w)
	names := []string{"carryover/index.json"}
	for _, p := range idx.Parts { // the manifest, the settings and (version 2) the events, in order
		if p.Name != "carryover/manifest.json" && p.Name != "carryover/session.json" && p.Name != "carryover/events.jsonl" {
			return fmt.Errorf("%s: index: unknown part %q", dir, p.Name)
		}
		names = append(names, p.Name)
	}
	for _, name := range names {
		if err := addFile(tw, filepath.Join(dir, filepath.FromSlash(name)), name, nil); err != nil {
			return err
		}
	}
	for _, c := range idx.Chunks {
		file, ok := have[c.Hash]
		if !ok {
			return fmt.Errorf("%s lacks chunk %s of its index", dir, c.Hash)
		}
		rest := strings.TrimSuffix(strings.SplitN(file, "-", 2)[1], ".zst")
		name := dirChunks + c.Hash
		if strings.HasSuffix(file, ".zst") {
			name += ".zst"
		}
		if err := addFile(tw, filepath.Join(dir, filepath.FromSlash(dirChunks), file), name, map[string]string{paxRawLen: rest}); err != nil {
			return err
		}
	}
	if err := addFile(tw, filepath.Join(dir, "carryover", "digest.sha256"), "carryover/digest.sha256", nil); err != nil {
		return err
	}
	return tw.Close()
}

// addFile writes file as member name.
func addFile(tw *tar.Writer, file, name string, pax map[string]string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: fi.Size(), Mode: 0o644, PAXRecords: pax, Format: tar.FormatUSTAR}
	if pax != nil {
		h.Format = tar.FormatPAX
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}
