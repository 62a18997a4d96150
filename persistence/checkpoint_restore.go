package persistence

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carryover/carryover"
)

// restoreGroup is one group of the agent's "restore" call.
type restoreGroup struct {
	ManifestGroup
	Desc       json.RawMessage `json:"desc,omitempty"`
	PickleFile string          `json:"pf,omitempty"`
	PickleData *string         `json:"pd,omitempty"`
	BufFiles   []string        `json:"bf,omitempty"`
	BufParts   []bufPart       `json:"bp,omitempty"`
	LazyBufs   []lazyRef       `json:"lb,omitempty"`
	SharedBufs []sharedRef     `json:"sb,omitempty"`
}

// bufPart is a later part of a buffer assembled as several files (splitBuffer): buffer J's bytes
// from offset Off are in file Path, which the agent maps over that place of the first file's mapping.
type bufPart struct {
	J    int    `json:"j"`
	Path string `json:"f"`
	Off  int64  `json:"o"`
}

type restoreAnswer struct {
	Restored []string                `json:"restored"`
	Failed   []carryover.VarSkip     `json:"failed"`
	Cwd      string                  `json:"cwd"`
	Groups   []carryover.GroupTiming `json:"groups"`
	Replay   struct {
		Recomputed  []carryover.Recomputed `json:"recomputed"`
		NotReplayed []carryover.VarSkip    `json:"not_replayed"`
	} `json:"replay"`
	Timings struct {
		LoadMS float64 `json:"load_ms"`
	} `json:"timings"`
}

// inlinePickle is the largest pickle stream sent inline (base64) instead of as a spool file.
const inlinePickle = 64 << 10

// Restore puts a checkpoint (checkpointID "" = the session's latest) back: its files into workspaceDir
// first when files is true (RestoreFiles with prune, so reopened file handles find their files), then
// its namespace into the kernel, replacing the kernel's user variables. Each group loads independently:
// what fails is reported by name and reason in Failed, the rest is restored.
func (c *Checkpointer) Restore(ctx context.Context, ex Executor, sessionID, checkpointID, workspaceDir string, files bool) (*carryover.RestoreResult, error) {
	return c.restore(ctx, ex, sessionID, checkpointID, workspaceDir, files, false)
}

// RestoreIntoNew restores the session's latest checkpoint into a kernel no user code has run in (a
// wake): large buffers may be restored lazily (lazy_restore.go), which lends the kernel the
// userfaultfd device for the length of one call. Restore, into a kernel that ran user code, never is.
func (c *Checkpointer) RestoreIntoNew(ctx context.Context, ex Executor, sessionID, workspaceDir string) (*carryover.RestoreResult, error) {
	return c.restore(ctx, ex, sessionID, "", workspaceDir, false, c.Lazy)
}

func (c *Checkpointer) restore(ctx context.Context, ex Executor, sessionID, checkpointID, workspaceDir string, files, lazy bool) (*carryover.RestoreResult, error) {
	start := time.Now()
	var (
		cp  carryover.Checkpoint
		err error
	)
	if checkpointID == "" {
		cp, err = c.Store.LatestCheckpoint(ctx, sessionID)
	} else {
		cp, err = c.Store.GetCheckpoint(ctx, sessionID, checkpointID)
	}
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	m, err := c.ParseManifest(cp)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	m.Cwd = relocateCwd(m.Cwd, sessionID, workspaceDir)
	res := &carryover.RestoreResult{CheckpointID: cp.ID, Turn: cp.Turn, Restored: []string{}, Failed: []carryover.VarSkip{},
		Recomputed: []carryover.Recomputed{}, NotReplayed: []carryover.VarSkip{},
		Skipped: nonNilSkips(m.Skipped)}
	if files && workspaceDir != "" {
		tf := time.Now()
		if err := c.restoreWorkspace(ctx, m, workspaceDir); err != nil {
			return nil, fmt.Errorf("restore: files: %w", damaged(err))
		}
		res.Files = len(m.Files)
		res.Timings.FilesMS = msSince(tf)
	} else if workspaceDir != "" {
		if res.FilesAhead, err = workspaceAhead(workspaceDir, m.Files, c.Files); err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
	}
	if err := c.restoreNamespace(ctx, ex, m, res, lazy, m.Forked); err != nil {
		return nil, fmt.Errorf("restore: %w", damaged(err))
	}
	res.DurationMS = msSince(start)
	return res, nil
}

// relocateCwd maps a saved working dir that names this session's workspace under another data dir
// (an unsandboxed kernel saves a host path: the store was restored from a backup, or the data dir
// moved) onto workspaceDir. Left as it was, the kernel would chdir into the OLD data dir's workspace
// when that still exists, and read and write another server's files.
func relocateCwd(cwd, sessionID, workspaceDir string) string {
	if workspaceDir == "" || !filepath.IsAbs(cwd) || cwd == workspaceDir || strings.HasPrefix(cwd, workspaceDir+"/") {
		return cwd
	}
	marker := "/workspaces/" + sessionID
	i := strings.LastIndex(cwd, marker)
	if i < 0 {
		return cwd
	}
	rest := cwd[i+len(marker):]
	if rest != "" && rest[0] != '/' {
		return cwd // another session whose id starts with this one's
	}
	return workspaceDir + rest
}

// damaged is the error of reading back a checkpoint that exists. A chunk the store does not have is
// damage (an internal error), not a wrong id of the caller's: the store's not-found code must not
// reach the API as if it were.
func damaged(err error) error {
	if errors.Is(err, carryover.ErrNotFound) {
		return fmt.Errorf("checkpoint damaged: %v", err)
	}
	return err
}

// restoreWorkspace writes the checkpoint's files into dir and prunes the files it does not hold, but
// never ones it skipped (over a limit, unreadable): no checkpoint has them, so removing them would
// lose data silently.
func (c *Checkpointer) restoreWorkspace(ctx context.Context, m *Manifest, dir string) error {
	keep := make([]string, 0, len(m.FilesSkipped))
	for _, fs := range m.FilesSkipped {
		keep = append(keep, fs.Path)
	}
	opt := RestoreOptions{Prune: true, Keep: keep, MaxFileBytes: c.Files.MaxFileBytes}
	return RestoreFilesWith(ctx, c.Store, dir, m.Files, opt)
}

// restoreNamespace assembles the groups' spool files from the store (a wake's large buffers: mapped
// lazily instead, when the kernel can; a fork child's, or ones another kernel maps: mapped from the
// node's shared copy) and has the agent load them.
func (c *Checkpointer) restoreNamespace(ctx context.Context, ex Executor, m *Manifest, res *carryover.RestoreResult, lazy, share bool) error {
	var p agentPing
	if err := callAgent(ctx, ex, "ping", map[string]any{}, &p); err != nil {
		return err
	}
	tr := time.Now()
	dirName := "r-" + newCheckpointID()[5:]
	spoolHost, err := c.spoolHost(p.SpoolHost)
	if err != nil {
		return err
	}
	hostDir := filepath.Join(spoolHost, dirName)
	kernDir := filepath.Join(p.Spool, dirName)
	if err := os.MkdirAll(hostDir, 0o700); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	defer os.RemoveAll(hostDir)
	groups, jobs, lbufs, sbufs, err := c.planRestore(ctx, m, hostDir, kernDir, lazy, share)
	if err != nil {
		return err
	}
	groups, jobs = c.mapShared(ctx, ex, hostDir, kernDir, groups, jobs, sbufs, res)
	if len(lbufs) > 0 {
		if err := c.startLazy(ctx, ex, hostDir, kernDir, lbufs); err != nil {
			res.Timings.LazyOff = err.Error()
		} else {
			groups, jobs = useLazy(groups, jobs, lbufs)
			for _, b := range lbufs {
				res.Timings.LazyBytes += b.n
			}
		}
	}
	if err := runAssembly(ctx, c.Store, jobs); err != nil {
		return err
	}
	res.Timings.ReadMS = msSince(tr)

	var ans restoreAnswer
	// skipped: the agent keeps naming what was saved but restores differently ("saved, but ...").
	args := map[string]any{"clear": true, "groups": groups, "cwd": m.Cwd, "env": m.Env, "skipped": nonNilSkips(m.Skipped),
		"replay": !c.Replay.Off, "replay_budget_ms": c.Replay.budgetMS()}
	ref, err := argsFile(args, hostDir, kernDir)
	if err != nil {
		return err
	}
	if err := callAgent(ctx, ex, "restore", ref, &ans); err != nil {
		return err
	}
	res.Restored = nonNil(ans.Restored)
	res.Failed = nonNilSkips(ans.Failed)
	res.Recomputed = ans.Replay.Recomputed
	if res.Recomputed == nil {
		res.Recomputed = []carryover.Recomputed{}
	}
	res.NotReplayed = nonNilSkips(ans.Replay.NotReplayed)
	res.Cwd = ans.Cwd
	res.Groups = ans.Groups
	res.Timings.LoadMS = ans.Timings.LoadMS
	return nil
}

// argsFile writes the restore's arguments (descriptors, inline pickles: megabytes for a namespace of
// many groups) into the spool and returns the call's arguments naming that file. Sent inline, they
// were a string literal in the code of the call, which IPython's input transformers and compiler
// went through at ~100 ms a MB: seconds of a data-science wake.
func argsFile(args map[string]any, hostDir, kernDir string) (map[string]any, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("restore args: %w", err)
	}
	if err := os.WriteFile(filepath.Join(hostDir, "args.json"), b, 0o600); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	return map[string]any{"args_file": filepath.Join(kernDir, "args.json")}, nil
}

// assembleJob writes chunks, in order, into one spool file.
type assembleJob struct {
	path     string
	chunks   []descChunk
	size     int64 // the chunks' bytes, written from offset 0
	fileSize int64 // the file's size when larger than size (the first part of a split buffer)
	lazy     int   // 1 + the index of the lazy buffer this job assembles (run when it cannot be mapped lazily), -1 - the index of the shared one; 0: none
}

// splitBufferMin is the size from which a buffer is assembled as several files, one per assembly
// worker. Writes into one tmpfs file hold its inode lock, and allocating its pages is most of their
// cost (1 GiB: `fallocate` 0.25 s, the copy 0.09 s on the 2-core VM), so one file's pages are
// allocated one at a time however many workers copy; two files are written in 0.19 s against 0.37 s.
var splitBufferMin atomic.Int64

func init() { splitBufferMin.Store(64 << 20) }

// bufSplit is one part of a buffer: its chunks and where they start.
type bufSplit struct {
	off, size int64
	chunks    []descChunk
}

// splitBuffer cuts a buffer of total bytes into up to assembleWorkers parts of about equal size, at
// chunk boundaries that are multiples of pageSize (a part is mapped at its offset, which must be
// page-aligned). A buffer under splitBufferMin, or with no such boundary, is one part; so is one
// whose chunks do not hold total bytes, which openAssembly then refuses (split, the first file's
// tail would be a hole read as zeros).
func splitBuffer(chunks []descChunk, total int64, pageSize int) []bufSplit {
	whole := []bufSplit{{size: total, chunks: chunks}}
	if total < splitBufferMin.Load() || assembleWorkers < 2 || chunksLen(chunks) != total {
		return whole
	}
	parts := []bufSplit{{}}
	var off int64
	for _, ch := range chunks {
		cur := &parts[len(parts)-1]
		due := total * int64(len(parts)) / assembleWorkers
		if off >= due && len(cur.chunks) > 0 && off%int64(pageSize) == 0 && len(parts) < assembleWorkers {
			parts = append(parts, bufSplit{off: off})
			cur = &parts[len(parts)-1]
		}
		cur.chunks = append(cur.chunks, ch)
		cur.size += ch.Len
		off += ch.Len
	}
	return parts
}

func chunksLen(chunks []descChunk) (n int64) {
	for _, ch := range chunks {
		n += ch.Len
	}
	return n
}

// planRestore reads every group's descriptor and decides which spool files to assemble.
// Buffers eligible for a lazy restore (when lazy is set) are returned as lazyBufs, ones to map from
// the node's shared copies (share, or a copy is held already) as the second list; both are planned
// as files too, in case the kernel cannot map them so (useLazy and useShared drop those jobs when it
// can).
func (c *Checkpointer) planRestore(ctx context.Context, m *Manifest, hostDir, kernDir string, lazy, share bool) ([]restoreGroup, []assembleJob, []lazyBuf, []lazyBuf, error) {
	var (
		groups []restoreGroup
		jobs   []assembleJob
		lbufs  []lazyBuf
		sbufs  []lazyBuf
	)
	reads, err := readGroups(ctx, c.Store, m.Groups)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	for i, g := range m.Groups {
		rg := restoreGroup{ManifestGroup: g}
		if g.Kind == "imp" || g.Ref == "" {
			groups = append(groups, rg)
			continue
		}
		gr := reads[i]
		d := gr.desc
		rg.Desc = append(json.RawMessage(nil), gr.flat...)
		if gr.inline != nil {
			s := base64.StdEncoding.EncodeToString(*gr.inline)
			rg.PickleData = &s
		} else {
			name := fmt.Sprintf("g%d.p", i)
			jobs = append(jobs, assembleJob{path: filepath.Join(hostDir, name), chunks: d.Pickle, size: gr.plen})
			rg.PickleFile = filepath.Join(kernDir, name)
		}
		rg.BufFiles = []string{}
		for j, b := range d.Buffers {
			name := fmt.Sprintf("g%d.b%d", i, j)
			tag := 0
			switch lb := (lazyBuf{group: len(groups), j: j, n: b.Len, chunks: b.Chunks}); {
			case c.shares(b, share):
				sbufs = append(sbufs, lb)
				tag = -len(sbufs)
			case lazy && lazyEligible(b, os.Getpagesize()):
				lbufs = append(lbufs, lb)
				tag = len(lbufs)
			}
			for p, sp := range splitBuffer(b.Chunks, b.Len, os.Getpagesize()) {
				job := assembleJob{path: filepath.Join(hostDir, name), chunks: sp.chunks, size: sp.size, fileSize: b.Len, lazy: tag}
				if p > 0 {
					pn := fmt.Sprintf("%s.p%d", name, p)
					job.path, job.fileSize = filepath.Join(hostDir, pn), 0
					rg.BufParts = append(rg.BufParts, bufPart{J: j, Path: filepath.Join(kernDir, pn), Off: sp.off})
				}
				jobs = append(jobs, job)
			}
			rg.BufFiles = append(rg.BufFiles, filepath.Join(kernDir, name))
		}
		groups = append(groups, rg)
	}
	return groups, jobs, lbufs, sbufs, nil
}

// groupRead is what a restore reads of one group before assembling its files: its descriptor (in
// flat form) and, when it is small enough to go inline, its pickle.
type groupRead struct {
	desc   *groupDescriptor
	flat   []byte
	plen   int64
	inline *[]byte // the pickle, when plen <= inlinePickle
}

// planReaders is how many groups readGroups reads at once. Each read is a round trip or more on a
// remote store (the descriptor, its index chunks, a small pickle's chunks: PostgreSQL + S3), and a
// namespace of many groups paid them one after another before any chunk was assembled.
const planReaders = 8

// readGroups reads the groups' descriptors and inline pickles (imports and groups without a
// descriptor are left zero), planReaders at once; the first error is returned, naming its group.
func readGroups(ctx context.Context, r carryover.ChunkReader, gs []ManifestGroup) ([]groupRead, error) {
	out := make([]groupRead, len(gs))
	var todo []int
	for i, g := range gs {
		if g.Kind != "imp" && g.Ref != "" {
			todo = append(todo, i)
		}
	}
	err := inParallel(ctx, planReaders, todo, func() func(context.Context, int) error {
		return func(ctx context.Context, i int) (err error) {
			out[i], err = readGroup(ctx, r, gs[i])
			return err
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readGroup reads one group's descriptor and, when small, its pickle.
func readGroup(ctx context.Context, r carryover.ChunkReader, g ManifestGroup) (groupRead, error) {
	buf, err := r.ReadChunk(ctx, g.Ref, nil)
	if err != nil {
		return groupRead{}, fmt.Errorf("group %v: %w", g.Names, err)
	}
	d, flat, err := expandDescriptor(ctx, r, buf)
	if err != nil {
		return groupRead{}, fmt.Errorf("group %v: descriptor: %w", g.Names, err)
	}
	gr := groupRead{desc: d, flat: flat}
	for _, ch := range d.Pickle {
		gr.plen += ch.Len
	}
	if gr.plen > inlinePickle {
		return gr, nil
	}
	data := []byte{}
	for _, ch := range d.Pickle {
		if data, err = r.ReadChunk(ctx, ch.Hash, data); err != nil {
			return groupRead{}, fmt.Errorf("group %v: %w", g.Names, err)
		}
	}
	gr.inline = &data
	return gr, nil
}

// useLazy points the groups at the lazily mapped buffers and drops the jobs that would have
// assembled them.
func useLazy(groups []restoreGroup, jobs []assembleJob, lbufs []lazyBuf) ([]restoreGroup, []assembleJob) {
	for id, b := range lbufs {
		g := &groups[b.group]
		g.BufFiles[b.j] = ""
		g.LazyBufs = append(g.LazyBufs, lazyRef{J: b.j, ID: id})
		parts := g.BufParts[:0]
		for _, p := range g.BufParts {
			if p.J != b.j {
				parts = append(parts, p)
			}
		}
		g.BufParts = parts
	}
	kept := jobs[:0]
	for _, j := range jobs {
		if j.lazy <= 0 {
			kept = append(kept, j)
		}
	}
	return groups, kept
}

// assembleWorkers read chunks from the store and write them into spool files concurrently: on two cores
// the blob read and the page-cache write overlap, keeping a restore near the cost of the read alone.
const assembleWorkers = 2

// runAssembly creates every file at its final size, then copies chunks straight from the store into
// them at their offsets (ReadChunkTo: no intermediate buffer for raw chunks).
func runAssembly(ctx context.Context, r carryover.ChunkReader, jobs []assembleJob) error {
	pieces, files, err := openAssembly(jobs)
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if err != nil {
		return err
	}
	return copyPieces(ctx, readerFor(ctx, r, pieces), pieces)
}

// readerFor is r, or, when r can look chunks up ahead (carryover.ChunkCataloger: PostgreSQL, a
// round trip a look-up), a reader that looked pieces' chunks up in one. A failed look-up leaves r:
// each read looks its chunk up again, and fails as it would have.
func readerFor(ctx context.Context, r carryover.ChunkReader, pieces []piece) carryover.ChunkReader {
	cat, ok := r.(carryover.ChunkCataloger)
	if !ok || len(pieces) < 2 {
		return r
	}
	hashes := make([]string, len(pieces))
	for i, p := range pieces {
		hashes[i] = p.hash
	}
	if ahead, err := cat.ReaderFor(ctx, hashes); err == nil {
		return ahead
	}
	return r
}

// piece is one chunk's place in an assembled file.
type piece struct {
	f    *os.File
	hash string
	off  int64
	n    int64
}

// openAssembly creates the jobs' files at their final sizes and lists where each chunk goes. The files
// it returns are the caller's to close, also on error.
func openAssembly(jobs []assembleJob) ([]piece, []*os.File, error) {
	var (
		files []*os.File
		each  [][]piece
	)
	for _, j := range jobs {
		f, err := os.OpenFile(j.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, files, fmt.Errorf("spool: %w", err)
		}
		files = append(files, f)
		if err := f.Truncate(max(j.size, j.fileSize)); err != nil {
			return nil, files, fmt.Errorf("spool: %w", err)
		}
		var (
			off int64
			ps  []piece
		)
		for _, ch := range j.chunks {
			ps = append(ps, piece{f: f, hash: ch.Hash, off: off, n: ch.Len})
			off += ch.Len
		}
		if off != j.size {
			return nil, files, fmt.Errorf("spool: %s: chunks hold %d bytes, descriptor says %d", j.path, off, j.size)
		}
		each = append(each, ps)
	}
	return interleave(each), files, nil
}

// interleave lists the files' pieces in turns (the first of each file, then the second of each, ...),
// so the workers, taking pieces in order, write different files at once: one file's writes hold its
// inode lock.
func interleave(each [][]piece) []piece {
	var out []piece
	for k := 0; ; k++ {
		n := len(out)
		for _, ps := range each {
			if k < len(ps) {
				out = append(out, ps[k])
			}
		}
		if len(out) == n {
			return out
		}
	}
}

// samePieces are the places of one chunk in the assembled files: a chunk that recurs (zeros, a
// repeated block, np.ones) is read, decoded and verified once, then written to each place.
type samePieces []piece

// byChunk groups pieces by chunk, in their first order.
func byChunk(pieces []piece) []samePieces {
	at := make(map[string]int, len(pieces))
	var out []samePieces
	for _, p := range pieces {
		if i, ok := at[p.hash]; ok {
			out[i] = append(out[i], p)
			continue
		}
		at[p.hash] = len(out)
		out = append(out, samePieces{p})
	}
	return out
}

// copyChunk writes one chunk to its places: straight from the store to a single place (ReadChunkTo:
// no intermediate buffer for raw chunks), through buf to several.
func copyChunk(ctx context.Context, r carryover.ChunkReader, ps samePieces, buf []byte) ([]byte, error) {
	if len(ps) == 1 {
		p := ps[0]
		n, err := r.ReadChunkTo(ctx, p.hash, io.NewOffsetWriter(p.f, p.off))
		if err == nil && n != p.n {
			err = fmt.Errorf("chunk %s: %d bytes, want %d", p.hash, n, p.n)
		}
		return buf, err
	}
	buf, err := r.ReadChunk(ctx, ps[0].hash, buf[:0])
	if err != nil {
		return buf, err
	}
	for _, p := range ps {
		if int64(len(buf)) != p.n {
			return buf, fmt.Errorf("chunk %s: %d bytes, want %d", p.hash, len(buf), p.n)
		}
		if _, err := p.f.WriteAt(buf, p.off); err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// copyPieces copies the pieces with assembleWorkers workers; the first error stops them all.
func copyPieces(ctx context.Context, r carryover.ChunkReader, pieces []piece) error {
	err := inParallel(ctx, assembleWorkers, byChunk(pieces), func() func(context.Context, samePieces) error {
		var buf []byte // the worker's own, reused from one chunk to the next
		return func(ctx context.Context, ps samePieces) (err error) {
			buf, err = copyChunk(ctx, r, ps, buf)
			return err
		}
	})
	if err != nil {
		return fmt.Errorf("assemble: %w", err)
	}
	return nil
}

// inParallel runs a worker's func (newWorker makes one per worker: its own buffers) on each item,
// workers at once, and returns the first error, which cancels the rest (their errors, caused by it,
// are dropped), or the parent's once it is done.
func inParallel[T any](parent context.Context, workers int, items []T, newWorker func() func(context.Context, T) error) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	next := make(chan T)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for w := 0; w < min(workers, len(items)); w++ {
		wg.Add(1)
		do := newWorker()
		go func() {
			defer wg.Done()
			for it := range next {
				if err := do(ctx, it); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
				}
			}
		}()
	}
	for _, it := range items {
		select {
		case next <- it:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return parent.Err()
}
