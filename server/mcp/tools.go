package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/session"
)

// maxReadBytes bounds read_file: larger files are for GET /api/sessions/{id}/files/{path}.
const maxReadBytes = 1 << 20

type tools struct {
	svc    Sessions
	log    *slog.Logger
	router Router // nil on one node
}

// fail is what a failed service call becomes: a tool result with isError and the API's code first
// in its text ("not_found: session \"x\" not found"), never a protocol error. Internal errors are
// logged with their cause and shown without it, as on /api/.
func (t *tools) fail(req *sdk.CallToolRequest, err error) error {
	e := carryover.ErrorOf(err)
	if e.Code == carryover.CodeInternal {
		t.log.Error("mcp tool failed", "tool", req.Params.Name, "err", err)
	}
	return fmt.Errorf("%s: %s", e.Code, e.Message)
}

// add registers a tool whose handler's panics become internal tool errors: the SDK does not
// recover them, and a panic must not take the server down.
func add[In, Out any](t *tools, s *sdk.Server, tool *sdk.Tool, h sdk.ToolHandlerFor[In, Out]) {
	sdk.AddTool(s, tool, func(ctx context.Context, req *sdk.CallToolRequest, in In) (res *sdk.CallToolResult, out Out, err error) {
		defer func() {
			if v := recover(); v != nil {
				t.log.Error("panic in mcp tool", "tool", tool.Name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				var zero Out
				res, out, err = nil, zero, t.fail(req, carryover.Errorf(carryover.CodeInternal, "internal error"))
			}
		}()
		return h(ctx, req, in)
	})
}

// scope puts the caller's tenant in ctx and checks that it may see session id (when id != ""):
// another tenant's session is not_found, as on /api/.
func (t *tools) scope(ctx context.Context, req *sdk.CallToolRequest, id string) (context.Context, error) {
	if req.Extra == nil || req.Extra.TokenInfo == nil || req.Extra.TokenInfo.UserID == "" {
		return ctx, carryover.Errorf(carryover.CodeUnauthorized, "missing or wrong token")
	}
	tenant := req.Extra.TokenInfo.UserID
	if id != "" && !t.svc.Visible(id, tenant) {
		return ctx, carryover.Errorf(carryover.CodeNotFound, "session %q not found", id)
	}
	return carryover.NewContextWithTenant(ctx, tenant), nil
}

// ---- inputs and outputs (the tools' JSON schemas are inferred from these) ----

type sessionIn struct {
	SessionID string `json:"session_id" jsonschema:"the session's id"`
}

type runPythonIn struct {
	Code      string `json:"code" jsonschema:"Python code, run as one IPython cell"`
	SessionID string `json:"session_id,omitempty" jsonschema:"the session to run in; omitted: a new session is created and its id returned"`
	// IdempotencyKey makes a retried call answer the first call's result instead of running the
	// code again (as the API's Idempotency-Key); it needs session_id.
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"a key chosen by the caller, the same for every retry of one call: a retry returns the first call's result and never runs the code twice; needs session_id"`
	// Stdin answers the code's input() calls (the API's run "stdin").
	Stdin *string `json:"stdin,omitempty" jsonschema:"text the code's input() reads, a line per call; past its end input() raises EOFError. Without it input() raises StdinNotImplementedError"`
}

type pyError struct {
	EName     string   `json:"ename"`
	EValue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

type checkpointOut struct {
	ID           string              `json:"id"`
	Turn         int                 `json:"turn"`
	Saved        []string            `json:"saved"`
	Unchanged    int                 `json:"unchanged"`
	Skipped      []carryover.VarSkip `json:"skipped"`
	FilesSaved   int                 `json:"files_saved"`
	BytesWritten int64               `json:"bytes_written"`
}

type runPythonOut struct {
	SessionID       string         `json:"session_id"`
	ExecutionCount  int            `json:"execution_count"`
	Status          string         `json:"status" jsonschema:"ok or error"`
	Stdout          string         `json:"stdout"`
	Stderr          string         `json:"stderr"`
	Result          string         `json:"result,omitempty" jsonschema:"the text/plain of the cell's value, if any"`
	Error           *pyError       `json:"error,omitempty"`
	Images          int            `json:"images" jsonschema:"how many image contents the result carries"`
	Checkpoint      *checkpointOut `json:"checkpoint,omitempty"`
	CheckpointError string         `json:"checkpoint_error,omitempty"`
	// Restore: what the restore since the last answer (the kernel died or was restarted, the
	// session woke) put back, recomputed, and could not (the API's run answer's restore).
	Restore *carryover.RestoreReport `json:"restore,omitempty"`
	// ProcessesEnded: background processes that ended with the session's previous kernel.
	ProcessesEnded []kernel.BackgroundProcess `json:"processes_ended,omitempty"`
}

type runShellIn struct {
	SessionID  string `json:"session_id"`
	Command    string `json:"command" jsonschema:"run by /bin/sh -c in the session's workspace"`
	WorkingDir string `json:"working_dir,omitempty" jsonschema:"relative to the workspace (default: the session's working dir)"`
}

type runShellOut struct {
	SessionID string `json:"session_id"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	ExitCode  int    `json:"exit_code"`
	TimedOut  bool   `json:"timed_out"`
	// Interrupted: the session was interrupted (its interrupt, or its delete) and the command killed.
	Interrupted bool `json:"interrupted,omitempty" jsonschema:"the command was killed by an interrupt of the session"`
	// StdoutBase64 and StderrBase64 carry an output's exact bytes when they are not UTF-8 (stdout
	// and stderr then hold U+FFFD for each byte JSON cannot), as POST /exec's answer does.
	StdoutBase64 string `json:"stdout_base64,omitempty" jsonschema:"stdout's exact bytes, base64, only when they are not UTF-8"`
	StderrBase64 string `json:"stderr_base64,omitempty" jsonschema:"stderr's exact bytes, base64, only when they are not UTF-8"`
}

type pathIn struct {
	SessionID string `json:"session_id"`
	Path      string `json:"path" jsonschema:"relative to the workspace"`
}

type readFileOut struct {
	SessionID string `json:"session_id"`
	Path      string `json:"path"`
	Size      int64  `json:"size"`
	Encoding  string `json:"encoding" jsonschema:"utf-8, or base64 for binary files"`
	Content   string `json:"content"`
}

type writeFileIn struct {
	SessionID string `json:"session_id"`
	Path      string `json:"path" jsonschema:"relative to the workspace; parent directories are created"`
	Content   string `json:"content" jsonschema:"the file's text"`
}

type fileOut struct {
	Path       string `json:"path"`
	Size       int64  `json:"size"`
	ModifiedAt string `json:"modified_at"`
}

type writeFileOut struct {
	SessionID string `json:"session_id"`
	fileOut
}

type listFilesOut struct {
	SessionID string    `json:"session_id"`
	Files     []fileOut `json:"files"`
}

type variablesOut struct {
	SessionID    string   `json:"session_id"`
	CheckpointID string   `json:"checkpoint_id,omitempty" jsonschema:"the latest checkpoint; absent before the first turn"`
	Turn         int      `json:"turn"`
	Variables    []string `json:"variables"`
}

type checkpointsOut struct {
	SessionID   string                        `json:"session_id"`
	Checkpoints []carryover.CheckpointSummary `json:"checkpoints" jsonschema:"newest first"`
}

type restoreIn struct {
	SessionID    string `json:"session_id"`
	CheckpointID string `json:"checkpoint_id"`
}

type restoreOut struct {
	SessionID    string              `json:"session_id"`
	CheckpointID string              `json:"checkpoint_id"`
	Turn         int                 `json:"turn"`
	Restored     []string            `json:"restored"`
	Failed       []carryover.VarSkip `json:"failed"`
	Files        int                 `json:"files"`
}

type forkIn struct {
	SessionID    string `json:"session_id" jsonschema:"the source session"`
	NewSessionID string `json:"new_session_id,omitempty" jsonschema:"the fork's id (generated when omitted)"`
	CheckpointID string `json:"checkpoint_id,omitempty" jsonschema:"the source checkpoint (default: the source's current state)"`
	Count        *int   `json:"count,omitempty" jsonschema:"how many children of that one checkpoint (1..100, default 1), all or none; with new_session_id they are new_session_id-1 .. -N"`
}

type forkOut struct {
	SessionID       string   `json:"session_id" jsonschema:"the new session (the first child)"`
	SessionIDs      []string `json:"session_ids" jsonschema:"every child, in order"`
	SourceSessionID string   `json:"source_session_id"`
	CheckpointID    string   `json:"checkpoint_id,omitempty"`
}

// ---- registration ----

func (t *tools) register(s *sdk.Server) {
	ro := &sdk.ToolAnnotations{ReadOnlyHint: true}
	add(t, s, &sdk.Tool{Name: "run_python", Description: "Run Python code in a persistent IPython session. " +
		"Without session_id a new session is created; its id is in the result's session_id. Variables, imports and " +
		"workspace files persist between calls. Returns stdout, stderr, the cell's value, images (PNG) and the turn's checkpoint."}, t.runPython)
	add(t, s, &sdk.Tool{Name: "run_shell", Description: "Run a shell command (/bin/sh -c) in the session's workspace. " +
		"A non-zero exit code is an error result."}, t.runShell)
	add(t, s, &sdk.Tool{Name: "read_file", Description: "Read a workspace file (up to 1 MiB): text, or base64 for binary files.", Annotations: ro}, t.readFile)
	add(t, s, &sdk.Tool{Name: "write_file", Description: "Write a text file into the session's workspace (parents created)."}, t.writeFile)
	add(t, s, &sdk.Tool{Name: "list_files", Description: "List the session's workspace files.", Annotations: ro}, t.listFiles)
	add(t, s, &sdk.Tool{Name: "list_variables", Description: "The variables saved in the session's latest checkpoint.", Annotations: ro}, t.listVariables)
	add(t, s, &sdk.Tool{Name: "checkpoints", Description: "The session's checkpoints, newest first, with their variables.", Annotations: ro}, t.checkpoints)
	add(t, s, &sdk.Tool{Name: "restore_checkpoint", Description: "Put the session back to a checkpoint: a fresh kernel with that namespace and those files."}, t.restore)
	add(t, s, &sdk.Tool{Name: "fork_session", Description: "Make a new session holding the variables and files of a session (its current state, or one of its checkpoints)."}, t.fork)
	t.registerPortable(s) // portable.go
}

// ---- handlers ----

func (t *tools) runPython(ctx context.Context, req *sdk.CallToolRequest, in runPythonIn) (*sdk.CallToolResult, runPythonOut, error) {
	ctx, err := t.scope(ctx, req, in.SessionID)
	if err != nil {
		return nil, runPythonOut{}, t.fail(req, createHint(err))
	}
	id := in.SessionID
	if id == "" && in.IdempotencyKey != "" {
		return nil, runPythonOut{}, t.fail(req, carryover.Errorf(carryover.CodeInvalid, "idempotency_key needs session_id: a call without one makes a new session each time"))
	}
	if id == "" {
		s, err := t.svc.Create(ctx, session.CreateRequest{Start: true})
		if err != nil {
			return nil, runPythonOut{}, t.fail(req, err)
		}
		id = s.ID
	}
	ls, err := t.svc.Session(id)
	if err != nil {
		return nil, runPythonOut{}, t.fail(req, createHint(err))
	}
	res, err := ls.Run(ctx, session.RunRequest{Code: in.Code, IdempotencyKey: in.IdempotencyKey, Stdin: in.Stdin}, session.RunOptions{})
	if err != nil {
		// A timeout or a kernel death: the API's code first, then what the run printed before it.
		e := carryover.ErrorOf(err)
		text := fmt.Sprintf("%s: %s (session_id %s)", e.Code, e.Message, id)
		if partial, ok := e.Result.(*session.RunResult); ok && partial != nil {
			if body := runText(partial); body != "" {
				text += "\n" + body
			}
		}
		return nil, runPythonOut{}, fmt.Errorf("%s", text)
	}
	out := runPythonOut{SessionID: id, ExecutionCount: res.ExecutionCount, Status: res.Status, Stdout: res.Stdout,
		Stderr: res.Stderr, CheckpointError: res.CheckpointError, Restore: res.Restore, ProcessesEnded: res.ProcessesEnded}
	if res.Result != nil {
		out.Result = *res.Result
	}
	if res.Error != nil {
		out.Error = &pyError{EName: res.Error.EName, EValue: res.Error.EValue, Traceback: stripANSIAll(res.Error.Traceback)}
	}
	if cp := res.Checkpoint; cp != nil {
		out.Checkpoint = &checkpointOut{ID: cp.ID, Turn: cp.Turn, Saved: nonNil(cp.Saved), Unchanged: cp.Unchanged,
			Skipped: nonNil(cp.Skipped), FilesSaved: cp.FilesSaved, BytesWritten: cp.BytesWritten}
	}
	content := []sdk.Content{}
	if body := runText(res); body != "" {
		content = append(content, &sdk.TextContent{Text: body})
	}
	for _, img := range images(res.Outputs) {
		content = append(content, img)
		out.Images++
	}
	content = append(content, &sdk.TextContent{Text: fmt.Sprintf("session_id: %s\n%s%s", id, restoreText(res), checkpointLine(res))})
	// A Python exception is the tool's error, not the protocol's: isError with everything above.
	return &sdk.CallToolResult{Content: content, IsError: res.Error != nil}, out, nil
}

// runText is a run's stdout, stderr, value and traceback as one text.
func runText(res *session.RunResult) string {
	var b strings.Builder
	section := func(name, s string) {
		if s == "" {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "[%s]\n%s", name, strings.TrimRight(s, "\n"))
	}
	section("stdout", res.Stdout)
	section("stderr", res.Stderr)
	if res.Result != nil {
		section("result", *res.Result)
	}
	if res.Error != nil {
		tb := strings.Join(stripANSIAll(res.Error.Traceback), "\n")
		if tb == "" {
			tb = res.Error.EName + ": " + res.Error.EValue
		}
		section("error", tb)
	}
	return b.String()
}

// restoreText is, each on a line of its own, what a restore since the last answer brought back and
// lost (carryover.RestoreReport.Summary) and the background processes that ended with the old
// kernel: a model reading the text learns of a lost variable here, not from a NameError later.
func restoreText(res *session.RunResult) string {
	var b strings.Builder
	if line := res.Restore.Summary(); line != "" {
		b.WriteString(line + "\n")
	}
	if len(res.ProcessesEnded) > 0 {
		ended := make([]string, len(res.ProcessesEnded))
		for i, p := range res.ProcessesEnded {
			ended[i] = fmt.Sprintf("%d (%s)", p.PID, p.Command)
		}
		b.WriteString("background processes ended with the previous kernel: " + strings.Join(ended, ", ") + "\n")
	}
	return b.String()
}

// checkpointLine is the turn's checkpoint as the CLI prints it.
func checkpointLine(res *session.RunResult) string {
	cp := res.Checkpoint
	switch {
	case cp != nil:
		skipped := make([]string, 0, len(cp.Skipped))
		for _, s := range cp.Skipped {
			skipped = append(skipped, fmt.Sprintf("%s (%s: %s)", s.Name, s.Type, s.Reason))
		}
		return fmt.Sprintf("checkpoint %s: saved [%s], %d unchanged, skipped [%s], %d files saved",
			cp.ID, strings.Join(cp.Saved, ", "), cp.Unchanged, strings.Join(skipped, ", "), cp.FilesSaved)
	case res.CheckpointError != "":
		return "checkpoint failed: " + res.CheckpointError
	default:
		return "no checkpoint"
	}
}

// images are the PNG and JPEG images of display_data and execute_result outputs.
func images(outs []kernel.Output) []*sdk.ImageContent {
	var imgs []*sdk.ImageContent
	for _, o := range outs {
		if o.Type != "display_data" && o.Type != "execute_result" {
			continue
		}
		for _, mime := range []string{"image/png", "image/jpeg"} {
			raw, ok := o.Data[mime]
			if !ok {
				continue
			}
			var b64 string
			if json.Unmarshal(raw, &b64) != nil {
				continue
			}
			data, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(b64), ""))
			if err != nil {
				continue
			}
			imgs = append(imgs, &sdk.ImageContent{Data: data, MIMEType: mime})
			break
		}
	}
	return imgs
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

func stripANSIAll(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = ansi.ReplaceAllString(l, "")
	}
	return out
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (t *tools) runShell(ctx context.Context, req *sdk.CallToolRequest, in runShellIn) (*sdk.CallToolResult, runShellOut, error) {
	ctx, err := t.scope(ctx, req, in.SessionID)
	if err != nil {
		return nil, runShellOut{}, t.fail(req, err)
	}
	ls, err := t.svc.Session(in.SessionID)
	if err != nil {
		return nil, runShellOut{}, t.fail(req, err)
	}
	res, err := ls.RunCommand(ctx, session.CommandRequest{Command: in.Command, WorkingDir: in.WorkingDir}, session.CommandOptions{})
	if err != nil {
		return nil, runShellOut{}, t.fail(req, err)
	}
	out := runShellOut{SessionID: in.SessionID, Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode, TimedOut: res.TimedOut, Interrupted: res.Interrupted,
		StdoutBase64: base64Of(res.StdoutBase64), StderrBase64: base64Of(res.StderrBase64)}
	var b strings.Builder
	shellStream(&b, "stdout", res.Stdout, res.StdoutBase64)
	shellStream(&b, "stderr", res.Stderr, res.StderrBase64)
	fmt.Fprintf(&b, "exit code %d", res.ExitCode)
	if res.TimedOut {
		b.WriteString(" (timed out)")
	}
	if res.Interrupted {
		b.WriteString(" (interrupted: the command was killed)")
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: b.String()}}, IsError: res.ExitCode != 0 || res.TimedOut || res.Interrupted}, out, nil
}

// createHint adds to run_python's not_found for a session_id it does not know that leaving
// session_id out makes a new session: an agent that made up an id, or lost its session to a
// delete, is told how to go on instead of retrying the same call.
func createHint(err error) error {
	e := carryover.ErrorOf(err)
	if e.Code != carryover.CodeNotFound {
		return err
	}
	return carryover.Errorf(e.Code, "%s; call run_python without session_id to create a new session", e.Message)
}

// shellStream writes one of a command's outputs into run_shell's text; output that is not UTF-8 is
// said to be so, and where its exact bytes are, rather than shown as if U+FFFD were what it printed.
func shellStream(b *strings.Builder, name, text string, raw []byte) {
	if text == "" {
		return
	}
	fmt.Fprintf(b, "[%s]\n%s\n", name, strings.TrimRight(text, "\n"))
	if raw != nil {
		fmt.Fprintf(b, "[%s is %d bytes that are not UTF-8: shown above with U+FFFD for each byte that is not; the exact bytes are structuredContent.%s_base64]\n", name, len(raw), name)
	}
}

// base64Of is raw in standard base64, "" for nil.
func base64Of(raw []byte) string {
	if raw == nil {
		return ""
	}
	return base64.StdEncoding.EncodeToString(raw)
}

func (t *tools) readFile(ctx context.Context, req *sdk.CallToolRequest, in pathIn) (*sdk.CallToolResult, readFileOut, error) {
	if _, err := t.scope(ctx, req, in.SessionID); err != nil {
		return nil, readFileOut{}, t.fail(req, err)
	}
	dir, err := t.svc.Files(in.SessionID)
	if err != nil {
		return nil, readFileOut{}, t.fail(req, err)
	}
	f, info, err := dir.Read(in.Path)
	if err != nil {
		return nil, readFileOut{}, t.fail(req, err)
	}
	defer f.Close()
	if info.Size() > maxReadBytes {
		return nil, readFileOut{}, t.fail(req, carryover.Errorf(carryover.CodePayloadTooLarge,
			"%q is %d bytes, over read_file's %d; use GET /api/sessions/%s/files/%s", in.Path, info.Size(), maxReadBytes, in.SessionID, in.Path))
	}
	data, err := io.ReadAll(io.LimitReader(f, maxReadBytes+1))
	if err != nil {
		return nil, readFileOut{}, t.fail(req, err)
	}
	out := readFileOut{SessionID: in.SessionID, Path: in.Path, Size: int64(len(data)), Encoding: "utf-8", Content: string(data)}
	if !utf8.Valid(data) {
		out.Encoding, out.Content = "base64", base64.StdEncoding.EncodeToString(data)
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: out.Content}}}, out, nil
}

func (t *tools) writeFile(ctx context.Context, req *sdk.CallToolRequest, in writeFileIn) (*sdk.CallToolResult, writeFileOut, error) {
	if _, err := t.scope(ctx, req, in.SessionID); err != nil {
		return nil, writeFileOut{}, t.fail(req, err)
	}
	dir, err := t.svc.Files(in.SessionID)
	if err != nil {
		return nil, writeFileOut{}, t.fail(req, err)
	}
	fi, err := dir.Write(in.Path, strings.NewReader(in.Content), int64(len(in.Content)))
	if err != nil {
		return nil, writeFileOut{}, t.fail(req, err)
	}
	out := writeFileOut{SessionID: in.SessionID, fileOut: fileOf(fi)}
	return textResult(fmt.Sprintf("wrote %s (%d bytes)", fi.Path, fi.Size)), out, nil
}

func fileOf(fi session.FileInfo) fileOut {
	return fileOut{Path: fi.Path, Size: fi.Size, ModifiedAt: fi.ModifiedAt.UTC().Format(time.RFC3339Nano)}
}

func textResult(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

func (t *tools) listFiles(ctx context.Context, req *sdk.CallToolRequest, in sessionIn) (*sdk.CallToolResult, listFilesOut, error) {
	if _, err := t.scope(ctx, req, in.SessionID); err != nil {
		return nil, listFilesOut{}, t.fail(req, err)
	}
	dir, err := t.svc.Files(in.SessionID)
	if err != nil {
		return nil, listFilesOut{}, t.fail(req, err)
	}
	files, err := dir.List()
	if err != nil {
		return nil, listFilesOut{}, t.fail(req, err)
	}
	out := listFilesOut{SessionID: in.SessionID, Files: []fileOut{}}
	var b strings.Builder
	for _, f := range files {
		out.Files = append(out.Files, fileOf(f))
		fmt.Fprintf(&b, "%s\t%d\n", f.Path, f.Size)
	}
	if len(files) == 0 {
		b.WriteString("(no files)")
	}
	return textResult(strings.TrimRight(b.String(), "\n")), out, nil
}

func (t *tools) listVariables(ctx context.Context, req *sdk.CallToolRequest, in sessionIn) (*sdk.CallToolResult, variablesOut, error) {
	ctx, err := t.scope(ctx, req, in.SessionID)
	if err != nil {
		return nil, variablesOut{}, t.fail(req, err)
	}
	cps, err := t.svc.Checkpoints(ctx, in.SessionID)
	if err != nil {
		return nil, variablesOut{}, t.fail(req, err)
	}
	out := variablesOut{SessionID: in.SessionID, Variables: []string{}}
	if len(cps) == 0 {
		return textResult("no checkpoint yet: no variables saved"), out, nil
	}
	out.CheckpointID, out.Turn, out.Variables = cps[0].ID, cps[0].Turn, nonNil(cps[0].Variables)
	return textResult(fmt.Sprintf("checkpoint %s (turn %d): %s", cps[0].ID, cps[0].Turn, strings.Join(out.Variables, ", "))), out, nil
}

func (t *tools) checkpoints(ctx context.Context, req *sdk.CallToolRequest, in sessionIn) (*sdk.CallToolResult, checkpointsOut, error) {
	ctx, err := t.scope(ctx, req, in.SessionID)
	if err != nil {
		return nil, checkpointsOut{}, t.fail(req, err)
	}
	cps, err := t.svc.Checkpoints(ctx, in.SessionID)
	if err != nil {
		return nil, checkpointsOut{}, t.fail(req, err)
	}
	out := checkpointsOut{SessionID: in.SessionID, Checkpoints: []carryover.CheckpointSummary{}}
	var b strings.Builder
	for _, cp := range cps {
		cp.Variables = nonNil(cp.Variables)
		out.Checkpoints = append(out.Checkpoints, cp)
		fmt.Fprintf(&b, "%s turn %d %s: %d files, variables [%s]\n", cp.ID, cp.Turn, cp.CreatedAt, cp.Files, strings.Join(cp.Variables, ", "))
	}
	if len(cps) == 0 {
		b.WriteString("no checkpoints")
	}
	return textResult(strings.TrimRight(b.String(), "\n")), out, nil
}

func (t *tools) restore(ctx context.Context, req *sdk.CallToolRequest, in restoreIn) (*sdk.CallToolResult, restoreOut, error) {
	ctx, err := t.scope(ctx, req, in.SessionID)
	if err != nil {
		return nil, restoreOut{}, t.fail(req, err)
	}
	ls, err := t.svc.Session(in.SessionID)
	if err != nil {
		return nil, restoreOut{}, t.fail(req, err)
	}
	res, err := ls.RestoreCheckpoint(ctx, in.CheckpointID)
	if err != nil {
		return nil, restoreOut{}, t.fail(req, err)
	}
	out := restoreOut{SessionID: in.SessionID, CheckpointID: res.CheckpointID, Turn: res.Turn, Restored: nonNil(res.Restored),
		Failed: nonNil(res.Failed), Files: res.Files}
	text := fmt.Sprintf("restored checkpoint %s (turn %d): [%s], %d files", res.CheckpointID, res.Turn, strings.Join(res.Restored, ", "), res.Files)
	for _, f := range res.Failed {
		text += fmt.Sprintf("\nnot restored: %s (%s: %s)", f.Name, f.Type, f.Reason)
	}
	return textResult(text), out, nil
}

func (t *tools) fork(ctx context.Context, req *sdk.CallToolRequest, in forkIn) (*sdk.CallToolResult, forkOut, error) {
	ctx, err := t.scope(ctx, req, in.SessionID)
	if err != nil {
		return nil, forkOut{}, t.fail(req, err)
	}
	// Count as given: 0 is refused by ForkMany, not taken as "not given" (it made one fork).
	fr := session.ForkRequest{SessionID: in.NewSessionID, CheckpointID: in.CheckpointID, Count: in.Count}
	docs, err := t.svc.ForkMany(ctx, in.SessionID, fr)
	if err != nil {
		return nil, forkOut{}, t.fail(req, err)
	}
	out := forkOut{SessionID: docs[0].ID, SourceSessionID: in.SessionID}
	for _, d := range docs {
		out.SessionIDs = append(out.SessionIDs, d.ID)
	}
	if docs[0].LastCheckpoint != nil {
		out.CheckpointID = docs[0].LastCheckpoint.ID
	}
	return textResult(fmt.Sprintf("forked %s into session_id %s", in.SessionID, strings.Join(out.SessionIDs, ", "))), out, nil
}
