package persistence

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/carryover/carryover"
)

// DefaultChunkSize is the chunk size of namespace buffers when Checkpointer.ChunkSize is 0: a modified
// element of a big array rewrites one chunk of this size.
const DefaultChunkSize = 4 << 20

// Checkpointer takes and restores checkpoints: the kernel's namespace (through the in-kernel agent)
// plus the workspace files, committed together as one checkpoint. Namespace state crosses from the
// kernel through a spool directory, never through the Jupyter protocol: see the spool protocol in
// checkpoint_spool.go (and the agent's docstring, which is its reference).
type Checkpointer struct {
	Store     carryover.CheckpointStore
	ChunkSize int        // namespace chunk size (default DefaultChunkSize)
	Retention int        // checkpoints kept per session (Store.Prune after commit); <= 0 keeps all
	Files     FileLimits // workspace files: SaveHidden, MaxFileBytes, MaxTotalBytes, ChunkSize
	// SpoolRoot, when set, is the dir whose direct subdirs are the kernels' spool dirs: a spool dir a
	// kernel names in its answers (it may be sandboxed and hostile) must be one of them, or the
	// server would read and write where the kernel says.
	SpoolRoot string
	// PreImport lists modules Warm imports into a kernel (into sys.modules, not the namespace): a
	// pooled kernel then has them loaded when a session claims or wakes into it. Modules not
	// installed are ignored.
	PreImport []string
	// Replay rebuilds, on restore, what the checkpoint could not save by running again the turns
	// that made it (the agent's replay.py).
	Replay ReplayOptions
	// Lazy lets RestoreIntoNew (a wake) map large buffers at once and fill them in the background
	// (lazy_restore.go); without it, or where the kernel cannot, every buffer is read first.
	Lazy bool
	// Shared, when set, restores the large buffers of a fork's children (and any buffer another
	// kernel maps already) copy-on-write from one node-wide copy (shared_bufs.go): N children of a
	// 1 GiB array cost ~1 GiB plus what each writes, not N GiB.
	Shared *SharedBuffers
	// Python runs the lazy restore's userfaultfd holder (lazy_holder.go): kernel.python;
	// DefaultHolderPython when empty.
	Python string

	heads heads // each session's newest checkpoint as this engine last saw it (checkpoint_heads.go)
}

// ReplayOptions: Off switches replay off; Budget bounds the recorded time of the turns one restore
// may replay (0: DefaultReplayBudget).
type ReplayOptions struct {
	Off    bool
	Budget time.Duration
}

// DefaultReplayBudget is the replay budget of a restore when none is set.
const DefaultReplayBudget = 10 * time.Second

func (o ReplayOptions) budgetMS() float64 {
	if o.Budget <= 0 {
		return float64(DefaultReplayBudget.Milliseconds())
	}
	return float64(o.Budget.Milliseconds())
}

// spoolHost checks the host spool dir a kernel named.
func (c *Checkpointer) spoolHost(h string) (string, error) {
	if c.SpoolRoot == "" || h == "" {
		return h, nil
	}
	clean := filepath.Clean(h)
	rel, err := filepath.Rel(filepath.Clean(c.SpoolRoot), clean)
	if err != nil || rel == "." || rel == ".." || strings.ContainsRune(rel, filepath.Separator) {
		return "", fmt.Errorf("spool dir %q is not a spool dir of %s", h, c.SpoolRoot)
	}
	if fi, err := os.Lstat(clean); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("spool dir %q is not a directory", h)
	}
	return clean, nil
}

// snapshotAnswer is the agent's answer to "snapshot".
type snapshotAnswer struct {
	Token     string              `json:"token"`
	SpoolHost string              `json:"spool_host"`
	Groups    []ManifestGroup     `json:"groups"`
	Saved     []string            `json:"saved"`
	Unchanged int                 `json:"unchanged"`
	Skipped   []carryover.VarSkip `json:"skipped"`
	Chunks    []spoolChunk        `json:"chunks"`
	Cwd       string              `json:"cwd"`
	Env       *EnvDiff            `json:"env"`
	Quiet     bool                `json:"quiet"` // nothing of the session can run without a message (agent's quiet.py)
	Timings   struct {
		DetectMS    float64 `json:"detect_ms"`
		SerializeMS float64 `json:"serialize_ms"`
		WriteMS     float64 `json:"write_ms"`
		DirtyMode   string  `json:"dirty_mode"`
		// DirtyFallback is why large buffers were hashed whole instead of scanned for written pages.
		DirtyFallback        string `json:"dirty_fallback"`
		RehashedBytes        int64  `json:"rehashed_bytes"`
		HashedBytes          int64  `json:"hashed_bytes"`
		SlicedBytes          int64  `json:"sliced_bytes"`
		SlicedRepickledBytes int64  `json:"sliced_repickled_bytes"`
		// Unsliced are the large containers pickled whole, and why.
		Unsliced []carryover.VarSkip `json:"unsliced"`
	} `json:"timings"`
}

// Install loads the agent into a fresh kernel. spoolHost is the spool dir as the server sees it,
// spoolKernel as the kernel sees it (equal unless sandboxed). The agent echoes spoolHost in its
// answers, so the Checkpointer keeps no per-kernel state. The then calls (the caller's set-up of a
// fresh kernel, e.g. the output guard) run after it in order, each failing the install as its own
// call would. A kernel forked from a template that preloaded the agent is installed, pinged and
// given them in one request (a round trip is ~5 ms of a forked kernel's ~150 ms start); any other
// in two.
func (c *Checkpointer) Install(ctx context.Context, ex Executor, spoolHost, spoolKernel string, then ...AgentCall) error {
	if err := os.MkdirAll(spoolHost, 0o700); err != nil {
		return fmt.Errorf("install agent: spool: %w", err)
	}
	batch, err := json.Marshal(agentBatch(then))
	if err != nil {
		return fmt.Errorf("install agent: %w", err)
	}
	// A preloaded kernel answers the batch; any other answers False, and is sent the 340 KB.
	text, err := ex.Eval(ctx, "", agentPreloadedExpr(spoolKernel, spoolHost)+" and "+agentThenExpr(string(batch)))
	if err == nil && text == "False" {
		if _, err = ex.Eval(ctx, "", agentBootExpr(spoolKernel, spoolHost)); err == nil {
			text, err = ex.Eval(ctx, "", agentThenExpr(string(batch)))
		}
	}
	if err != nil {
		return fmt.Errorf("install agent: %w", err)
	}
	return checkBatch(text, then)
}

// AgentCall is one operation of the in-kernel agent (CallAgent's op and args) that Install runs
// after the agent is in. Out, when set, receives its JSON answer.
type AgentCall struct {
	Op   string
	Args any
	Out  any
}

// agentBatch is the batch op's args: the agent's ping, then the caller's calls.
func agentBatch(then []AgentCall) map[string]any {
	calls := [][2]any{{"ping", map[string]any{}}}
	for _, c := range then {
		calls = append(calls, [2]any{c.Op, c.Args})
	}
	return map[string]any{"calls": calls}
}

// checkBatch reads the batch's answers: the ping's (the agent needs xxhash), then each call's into
// its Out.
func checkBatch(text string, then []AgentCall) error {
	var answers []json.RawMessage
	if err := json.Unmarshal([]byte(text), &answers); err != nil || len(answers) != len(then)+1 {
		return fmt.Errorf("install agent: bad answer %.200q (%d answers for %d calls, %v)", text, len(answers), len(then)+1, err)
	}
	var p agentPing
	if err := json.Unmarshal(answers[0], &p); err != nil {
		return fmt.Errorf("install agent: ping: %w", err)
	}
	if !p.XXHash {
		return errors.New("install agent: the kernel's Python lacks xxhash (python3-xxhash)")
	}
	for i, c := range then {
		if c.Out == nil {
			continue
		}
		if err := json.Unmarshal(answers[i+1], c.Out); err != nil {
			return fmt.Errorf("install agent: %s: bad answer: %w", c.Op, err)
		}
	}
	return nil
}

// Warm imports PreImport into a kernel with the agent installed, before any session has it: the pool
// calls it on the kernels it keeps waiting, so a session that claims one, or wakes into one, finds
// numpy & co. loaded (a wake then costs the data, not the imports). A kernel started on demand is
// not warmed: its first turn would wait for imports it may never use.
func (c *Checkpointer) Warm(ctx context.Context, ex Executor) error {
	if len(c.PreImport) == 0 {
		return nil
	}
	var ok map[string]any
	if err := callAgent(ctx, ex, "preimport", map[string]any{"modules": c.PreImport}, &ok); err != nil {
		return fmt.Errorf("warm kernel: %w", err)
	}
	return nil
}

func (c *Checkpointer) chunkSize() int {
	if c.ChunkSize > 0 {
		return c.ChunkSize
	}
	return DefaultChunkSize
}

// newCheckpointID returns "ckpt_" and 16 random hex digits.
func newCheckpointID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "ckpt_" + hex.EncodeToString(b[:])
}

// Checkpoint snapshots the namespace (agent) and the workspace files under workspaceDir ("" for none)
// and commits ONE checkpoint: chunks first, then the manifest and its roots in one transaction, all
// through one CheckpointWriter so GC cannot collect chunks put but not yet referenced. A crash at any
// point leaves the previous checkpoint complete. Older checkpoints beyond Retention are pruned afterwards.
func (c *Checkpointer) Checkpoint(ctx context.Context, ex Executor, sessionID string, turn int, workspaceDir string) (*carryover.CheckpointResult, error) {
	p, err := c.Prepare(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return c.Finish(ctx, ex, p, turn, workspaceDir, "")
}

// Prepared is a checkpoint whose snapshot request can ride on the turn's own execute_request as a
// user expression (ipykernel evaluates user_expressions right after the cell, in the same reply):
// one round trip to the kernel per turn instead of two. Finish commits it.
type Prepared struct {
	SessionID string
	Expr      string // the user expression that takes the snapshot and answers with its JSON
	id        string
	parentID  string
	prevFiles []FileEntry
	prevRoots []string // the parent's roots: stored, they vouch for prevFiles' refs (markUnchanged)
	prepareMS float64  // Prepare's own time (the read of the latest checkpoint), counted in DurationMS
	pruned    bool     // the commit pruned the older checkpoints in its own transaction (PruningWriter)
}

// Prepare reads the session's latest checkpoint and builds the snapshot request for the next one.
func (c *Checkpointer) Prepare(ctx context.Context, sessionID string) (*Prepared, error) {
	start := time.Now()
	p := &Prepared{SessionID: sessionID}
	if h, ok := c.knownHead(ctx, sessionID); ok {
		p.parentID, p.prevFiles, p.prevRoots = h.id, h.files, h.roots
	} else {
		prev, err := c.Store.LatestCheckpoint(ctx, sessionID)
		if err != nil && !errors.Is(err, carryover.ErrNotFound) {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
		p.parentID = prev.ID
		if prev.ID != "" {
			if m, err := c.ParseManifest(prev); err == nil {
				p.prevFiles, p.prevRoots = m.Files, prev.Roots
				c.heads.put(sessionID, head{id: prev.ID, files: m.Files, roots: prev.Roots})
			}
		}
	}
	p.renew(c.chunkSize())
	p.prepareMS = msSince(start)
	return p, nil
}

// renew gives the request a new checkpoint id (and spool token).
func (p *Prepared) renew(chunkSize int) {
	p.id = newCheckpointID()
	a, _ := json.Marshal(map[string]any{"token": p.id, "committed": p.parentID, "chunk_size": chunkSize})
	p.Expr = "(__carryover__.call(\"snapshot\", " + pyString(string(a)) + "), __carryover__.take())[1]"
}

// Finish commits the prepared checkpoint. answer is the text/plain of p.Expr when it rode on the
// turn's execute_request; "" when it did not run (the cell raised, so ipykernel skipped user
// expressions) or failed (e.g. interrupted): then the agent is asked in a call of its own, under a new
// token, so no half-written spool file is ever read.
func (c *Checkpointer) Finish(ctx context.Context, ex Executor, p *Prepared, turn int, workspaceDir, answer string) (*carryover.CheckpointResult, error) {
	start := time.Now()
	var ans *snapshotAnswer
	rodeMS := 0.0 // the agent's time inside the turn's execute_request, when the snapshot rode on it
	if answer != "" {
		ans = &snapshotAnswer{}
		if err := json.Unmarshal([]byte(answer), ans); err != nil {
			ans = nil
		} else {
			rodeMS = ans.Timings.DetectMS + ans.Timings.SerializeMS + ans.Timings.WriteMS
		}
	}
	if ans == nil && answer != "" {
		p.renew(c.chunkSize())
	}
	res, err := c.checkpointOnce(ctx, ex, p, turn, workspaceDir, ans)
	if errors.Is(err, carryover.ErrMissingChunk) {
		// The agent trusted a chunk the store no longer has (an older checkpoint it was restored from was
		// pruned and collected): make it forget what it knows and save everything once more.
		var ok map[string]any
		if ferr := callAgent(ctx, ex, "forget", map[string]any{}, &ok); ferr != nil {
			return nil, fmt.Errorf("checkpoint: %w (forget: %w)", err, ferr)
		}
		p.renew(c.chunkSize())
		p.prevRoots = nil // the files too: each reused ref asked, not vouched for by the roots
		res, err = c.checkpointOnce(ctx, ex, p, turn, workspaceDir, nil)
	}
	if err != nil {
		return nil, err
	}
	// The checkpoint is committed: a failed prune after it is no failed checkpoint (a cluster node
	// fenced between the two was told not_owner, and its turn, saved, was answered as lost).
	if c.Retention > 0 && !p.pruned {
		if _, err := c.Store.Prune(ctx, p.SessionID, c.Retention); err != nil {
			res.PruneError = fmt.Errorf("checkpoint %s committed, prune: %w", res.ID, err)
		}
	}
	// The checkpoint's own time on every path: Prepare's read, the agent's part inside the turn's
	// execute_request when the snapshot rode on it, and Finish (a snapshot call of its own, the
	// commit). Never the time between Prepare and Finish: the cell ran there (a cell that slept 1 s
	// and raised reported 1.2 s of checkpoint).
	res.DurationMS = p.prepareMS + rodeMS + msSince(start)
	return res, nil
}

// checkpointOnce commits one checkpoint from the agent's snapshot answer (asking for it when ans is nil).
func (c *Checkpointer) checkpointOnce(ctx context.Context, ex Executor, p *Prepared, turn int, workspaceDir string, ans *snapshotAnswer) (*carryover.CheckpointResult, error) {
	if ans == nil {
		ans = &snapshotAnswer{}
		args := map[string]any{"token": p.id, "committed": p.parentID, "chunk_size": c.chunkSize()}
		err := callAgent(ctx, ex, "snapshot", args, ans)
		if errors.Is(err, ErrInterrupted) {
			// An interrupt meant for the cell that just ended: taken once more. Sound, because a
			// snapshot not committed is taken back by the next one (its cells, its history entry;
			// test_replay's interrupted snapshot); a second interrupt means stop, so it stands.
			*ans = snapshotAnswer{}
			err = callAgent(ctx, ex, "snapshot", args, ans)
		}
		if err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
	}
	spoolDir := ""
	if ans.SpoolHost != "" {
		host, err := c.spoolHost(ans.SpoolHost)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
		spoolDir = filepath.Join(host, filepath.Base(p.id))
		defer os.RemoveAll(spoolDir)
	}
	res := &carryover.CheckpointResult{
		ID: p.id, Turn: turn, Saved: nonNil(ans.Saved), Unchanged: ans.Unchanged, Skipped: nonNilSkips(ans.Skipped),
		FilesSkipped: []carryover.FileSkip{},
		Timings: carryover.CheckpointTimings{DetectMS: ans.Timings.DetectMS, SerializeMS: ans.Timings.SerializeMS,
			WriteMS: ans.Timings.WriteMS, DirtyMode: ans.Timings.DirtyMode, DirtyFallback: ans.Timings.DirtyFallback,
			SlicedBytes: ans.Timings.SlicedBytes, SlicedRepickledBytes: ans.Timings.SlicedRepickledBytes,
			Unsliced: ans.Timings.Unsliced},
		Quiet: ans.Quiet,
	}
	m := &Manifest{V: c.WriteFormat(), Groups: ans.Groups, Skipped: ans.Skipped, Cwd: ans.Cwd}
	if !ans.Env.empty() {
		m.Env = ans.Env
	}
	w, err := c.Store.BeginCheckpoint(ctx)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer w.Close()
	if err := c.write(ctx, w, p, turn, workspaceDir, spoolDir, ans.Chunks, m, res); err != nil {
		return nil, err
	}
	res.CreatedAt = time.Now().UTC()
	return res, nil
}

// write puts the snapshot's chunks (spooled by the agent) and the workspace files through w, then
// commits the checkpoint whose manifest is m, filling in res's timings and counts.
func (c *Checkpointer) write(ctx context.Context, w carryover.CheckpointWriter, p *Prepared, turn int, workspaceDir, spoolDir string,
	chunks []spoolChunk, m *Manifest, res *carryover.CheckpointResult) error {
	tw := time.Now()
	written, err := ingestSpool(ctx, w, spoolDir, chunks)
	if err != nil {
		return fmt.Errorf("checkpoint: store chunks: %w", err)
	}
	res.Timings.WriteMS += msSince(tw)
	roots := make([]string, 0, len(m.Groups))
	for _, g := range m.Groups {
		if g.Ref != "" {
			roots = append(roots, g.Ref)
		}
	}
	if workspaceDir != "" {
		tf := time.Now()
		fr, err := snapshotFiles(ctx, w, workspaceDir, p.prevFiles, p.prevRoots, c.Files)
		if err != nil {
			return fmt.Errorf("checkpoint: files: %w", err)
		}
		res.Timings.FilesMS = msSince(tf)
		m.Files, m.FilesSkipped = fr.Files, fr.Skipped
		res.FilesSaved = fr.Saved
		res.FilesSkipped = nonNilFileSkips(fr.Skipped)
		written += fr.BytesWritten
		roots = append(roots, fr.Roots...)
	}
	tc := time.Now()
	doc, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("checkpoint: manifest: %w", err)
	}
	written += int64(len(doc))
	cp := carryover.Checkpoint{ID: p.id, SessionID: p.SessionID, Turn: turn, ParentID: p.parentID, Manifest: doc,
		Bytes: written, Roots: roots}
	if pw, ok := w.(carryover.PruningWriter); ok && c.Retention > 0 {
		if _, err := pw.CommitPruning(ctx, cp, c.Retention); err != nil {
			return fmt.Errorf("checkpoint: commit: %w", err)
		}
		p.pruned = true
	} else if err := w.Commit(ctx, cp); err != nil {
		return fmt.Errorf("checkpoint: commit: %w", err)
	}
	c.heads.put(p.SessionID, head{id: p.id, files: m.Files, roots: roots})
	res.Timings.WriteMS += msSince(tc)
	res.BytesWritten = written
	return nil
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilSkips(s []carryover.VarSkip) []carryover.VarSkip {
	if s == nil {
		return []carryover.VarSkip{}
	}
	return s
}

func nonNilFileSkips(s []carryover.FileSkip) []carryover.FileSkip {
	if s == nil {
		return []carryover.FileSkip{}
	}
	return s
}
