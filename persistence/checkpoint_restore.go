package persistence

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
		WaitMS float64 `json:"wait_ms"`
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
	return c.restore(ctx, ex, sessionID, "", workspaceDir, false, true)
}

// intoNew: the kernel ran no user code (RestoreIntoNew): buffers may be lazy, and the agent loads
// while the files are assembled.
func (c *Checkpointer) restore(ctx context.Context, ex Executor, sessionID, checkpointID, workspaceDir string, files, intoNew bool) (*carryover.RestoreResult, error) {
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
	if err := c.restoreNamespace(ctx, ex, m, res, intoNew, m.Forked); err != nil {
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
// node's shared copy) and has the agent load them: after the assembly, or, into a new kernel,
// while it runs (assembleWhileLoading).
func (c *Checkpointer) restoreNamespace(ctx context.Context, ex Executor, m *Manifest, res *carryover.RestoreResult, intoNew, share bool) error {
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
	groups, jobs, err := c.planFiles(ctx, ex, m, res, hostDir, kernDir, intoNew, share)
	if err != nil {
		return err
	}
	// skipped: the agent keeps naming what was saved but restores differently ("saved, but ...").
	args := map[string]any{"clear": true, "groups": groups, "cwd": m.Cwd, "env": m.Env, "skipped": nonNilSkips(m.Skipped),
		"replay": !c.Replay.Off, "replay_budget_ms": c.Replay.budgetMS()}
	if intoNew {
		args["await"] = kernDir // each file appears when it is whole; abortMark there if it never will
	}
	ref, err := argsFile(args, hostDir, kernDir)
	if err != nil {
		return err
	}
	var ans restoreAnswer
	load := func(ctx context.Context) error { return callAgent(ctx, ex, "restore", ref, &ans) }
	if intoNew {
		end, err := assembleWhileLoading(ctx, c.Store, jobs, hostDir, load)
		if err != nil {
			return err
		}
		res.Timings.ReadMS = float64(end.Sub(tr).Microseconds()) / 1000
	} else {
		if err := runAssembly(ctx, c.Store, jobs); err != nil {
			return err
		}
		res.Timings.ReadMS = msSince(tr)
		if err := load(ctx); err != nil {
			return err
		}
	}
	ans.into(res)
	return nil
}

// planFiles plans the restore's files (planRestore), maps what it can from the node's shared
// copies and, into a new kernel, lazily; it returns the groups for the agent and the files left to
// assemble.
func (c *Checkpointer) planFiles(ctx context.Context, ex Executor, m *Manifest, res *carryover.RestoreResult, hostDir, kernDir string, intoNew, share bool) ([]restoreGroup, []assembleJob, error) {
	groups, jobs, lbufs, sbufs, err := c.planRestore(ctx, m, hostDir, kernDir, intoNew && c.Lazy, share)
	if err != nil {
		return nil, nil, err
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
	return groups, jobs, nil
}

// into puts the agent's answer into res.
func (ans *restoreAnswer) into(res *carryover.RestoreResult) {
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
	res.Timings.WaitMS = ans.Timings.WaitMS
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
			jobs = append(jobs, assembleJob{path: filepath.Join(hostDir, name), chunks: d.Pickle, size: gr.plen, rank: jobRank(g, rankPickle)})
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
				job := assembleJob{path: filepath.Join(hostDir, name), chunks: sp.chunks, size: sp.size, fileSize: b.Len, lazy: tag, rank: jobRank(g, bufferRank(b.Len))}
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

// jobRank is a data group's file's rank; another group's (definitions, settings: loaded before
// the data) is first.
func jobRank(g ManifestGroup, data int) int {
	if g.Kind == "data" {
		return data
	}
	return rankFirst
}

// smallBuffer is the size under which a buffer is taken for a pickle stream: a container in slices
// pickles each slice (~64 KiB) as a buffer, which the load unpickles; a larger buffer (an array's,
// a frame column's) is mapped, which costs the load nothing.
const smallBuffer = 1 << 20

func bufferRank(n int64) int {
	if n < smallBuffer {
		return rankPickle
	}
	return rankBuffer
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

// unfile drops buffer j's spool file and parts from the group: it is mapped another way (lazily,
// or from the node's shared copy).
func (g *restoreGroup) unfile(j int) {
	g.BufFiles[j] = ""
	parts := g.BufParts[:0]
	for _, p := range g.BufParts {
		if p.J != j {
			parts = append(parts, p)
		}
	}
	g.BufParts = parts
}

// useLazy points the groups at the lazily mapped buffers and drops the jobs that would have
// assembled them.
func useLazy(groups []restoreGroup, jobs []assembleJob, lbufs []lazyBuf) ([]restoreGroup, []assembleJob) {
	for id, b := range lbufs {
		g := &groups[b.group]
		g.unfile(b.j)
		g.LazyBufs = append(g.LazyBufs, lazyRef{J: b.j, ID: id})
	}
	kept := jobs[:0]
	for _, j := range jobs {
		if j.lazy <= 0 {
			kept = append(kept, j)
		}
	}
	return groups, kept
}
