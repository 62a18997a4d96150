package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/client"
)

// progressAfter is how long a run goes before a progress line appears (on a terminal);
// stderrTerminal decides whether stderr is one. Both are variables for the tests.
var (
	progressAfter  = 2 * time.Second
	stderrTerminal = isTerminal
)

func (c *cli) runCmd() *cobra.Command {
	var sid, code, key string
	var timeout float64
	var keepGoing bool
	cmd := &cobra.Command{
		Use:   "run -s SESSION [-c CODE | FILE | -]",
		Short: "Run Python code in a session (created if it does not exist), streaming its output",
		Long: `Run Python code in a session's kernel: the code of -c, of FILE, or of stdin ("-" or nothing).
The session is created on first use. Output streams as it comes: stdout and stderr to the
terminal's, results to stdout, tracebacks to stderr, images to <session>-<count>-<n>.<ext> in the
current directory, the turn's checkpoint line to stderr. Exit code 1 on a Python error, 2 on an
API error. With --json, the run's JSON answer is printed instead. A FILE ending in .ipynb runs as a
notebook: its code cells in order, each a turn, stopping at the first error (--continue-on-error
goes on).`,
		Args: cobra.MaximumNArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && strings.HasSuffix(args[0], ".ipynb") {
				return c.runNotebook(cmd, sid, args[0], keepGoing)
			}
			src, fromStdin, err := runSource(cmd, code, args)
			if err != nil {
				return err
			}
			var to *float64
			if timeout != 0 { // a negative one is sent: the server refuses it (it ran with the default)
				to = client.Seconds(timeout)
			}
			if key == "" {
				key = client.NewIdempotencyKey()
			}
			if c.json {
				return c.runJSON(cmd, sid, src, to, key)
			}
			return c.runStream(cmd, sid, src, to, fromStdin, key)
		}),
	}
	sessionFlag(cmd, &sid)
	cmd.Flags().StringVarP(&code, "code", "c", "", "code to run")
	cmd.Flags().Float64Var(&timeout, "timeout", 0, "run timeout in seconds (0: the server's default)")
	cmd.Flags().BoolVar(&keepGoing, "continue-on-error", false, "a notebook (.ipynb) goes on after a cell that raises")
	cmd.Flags().StringVar(&key, "idempotency-key", "", "the run's idempotency key (default: a new one): retries, the CLI's own through a\nserver restart and yours with the same key, never run the code twice")
	return cmd
}

// runNotebook runs a notebook file's code cells into the session (created on first use) and prints
// each cell's stdout, stderr, result and traceback; exit 1 when a cell failed.
func (c *cli) runNotebook(cmd *cobra.Command, sid, file string, keepGoing bool) error {
	nb, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	ctx, cl := cmd.Context(), c.client()
	res, err := cl.RunNotebook(ctx, sid, nb, keepGoing)
	if created, cerr := ensureSession(ctx, cl, sid, err); cerr != nil {
		return cerr
	} else if created {
		res, err = cl.RunNotebook(ctx, sid, nb, keepGoing)
	}
	if err != nil {
		return err
	}
	if c.json {
		if err := marshalJSON(cmd.OutOrStdout(), res); err != nil {
			return err
		}
	} else {
		printNotebookRun(cmd, res)
	}
	for _, cell := range res.Cells {
		if cell.Error != nil || cell.Result == nil || cell.Result.Status != client.StatusOK {
			return &exitError{code: 1}
		}
	}
	return nil
}

// printNotebookRun prints each cell's outcome: its output to stdout and stderr, errors to stderr.
func printNotebookRun(cmd *cobra.Command, res *client.NotebookRun) {
	out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	for _, cell := range res.Cells {
		fmt.Fprintf(errw, "-- cell %d\n", cell.Index)
		if r := cell.Result; r != nil {
			fmt.Fprint(out, r.Stdout)
			fmt.Fprint(errw, r.Stderr)
			if r.Result != nil {
				fmt.Fprintln(out, *r.Result)
			}
			if r.Error != nil {
				fmt.Fprintln(errw, strings.Join(r.Error.Traceback, "\n"))
			}
		}
		if cell.Error != nil {
			fmt.Fprintf(errw, "%s: %s\n", cell.Error.Code, cell.Error.Message)
		}
	}
	if res.StoppedAt != nil {
		fmt.Fprintf(errw, "stopped at cell %d (%d cells ran)\n", *res.StoppedAt, res.Ran)
	}
}

// runSource is the code to run: -c, a file, or stdin ("-" or no argument).
func runSource(cmd *cobra.Command, code string, args []string) (src string, fromStdin bool, err error) {
	if cmd.Flags().Changed("code") {
		if len(args) > 0 {
			return "", false, errors.New("give the code with -c or as a file, not both")
		}
		return code, false, nil
	}
	if len(args) == 0 || args[0] == "-" {
		b, err := io.ReadAll(cmd.InOrStdin())
		return string(b), true, err
	}
	b, err := os.ReadFile(args[0])
	return string(b), false, err
}

// ensureSession creates session sid when err says it does not exist; it reports whether it did.
func ensureSession(ctx context.Context, cl *client.Client, sid string, err error) (bool, error) {
	if client.ErrorCode(err) != client.CodeNotFound {
		return false, err
	}
	if _, cerr := cl.CreateSession(ctx, client.CreateRequest{SessionID: sid}); cerr != nil && client.ErrorCode(cerr) != client.CodeConflict {
		return false, cerr
	}
	return true, nil
}

// runJSON runs over HTTP and prints the answer as the API gave it (a timeout's or kernel death's
// partial answer too, before exiting 2).
func (c *cli) runJSON(cmd *cobra.Command, sid, src string, to *float64, key string) error {
	ctx, cl := cmd.Context(), c.client()
	req := client.RunRequest{Code: src, TimeoutSeconds: to}
	var raw []byte
	h := http.Header{client.IdempotencyKeyHeader: {key}}
	err := cl.DoWithHeader(ctx, http.MethodPost, apiPath(sid, "run"), h, req, &raw)
	if created, cerr := ensureSession(ctx, cl, sid, err); cerr != nil {
		return cerr
	} else if created {
		err = cl.DoWithHeader(ctx, http.MethodPost, apiPath(sid, "run"), h, req, &raw)
	}
	if err != nil {
		var ae *client.Error
		if errors.As(err, &ae) && ae.Result != nil {
			printJSON(cmd.OutOrStdout(), ae.Result)
		}
		return err
	}
	printJSON(cmd.OutOrStdout(), raw)
	var res client.RunResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return err
	}
	if res.Status != client.StatusOK {
		return &exitError{code: 1}
	}
	return nil
}

// runStream runs over the session's websocket, printing each frame of the run as it arrives.
func (c *cli) runStream(cmd *cobra.Command, sid, src string, to *float64, codeFromStdin bool, key string) error {
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	cl := c.client()
	conn, err := cl.Connect(ctx, sid)
	if created, cerr := ensureSession(ctx, cl, sid, err); cerr != nil {
		return cerr
	} else if created {
		conn, err = cl.Connect(ctx, sid)
	}
	if err != nil {
		return err
	}
	defer conn.Close()

	p := &runPrinter{sid: sid, stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(), tty: stderrTerminal(cmd.ErrOrStderr())}
	if !codeFromStdin {
		p.stdin = bufio.NewReader(cmd.InOrStdin())
	}
	interrupted := interruptOnCtrlC(ctx, cancel, conn, p)
	stop := p.startProgress()
	defer stop()

	id := newRunID()
	if err := conn.Send(ctx, client.RunFrame{ID: id, Code: src, TimeoutSeconds: to, IdempotencyKey: key}); err != nil {
		return err
	}
	return p.follow(ctx, conn, id, stop, interrupted)
}

// interruptOnCtrlC makes Ctrl-C interrupt the kernel (the run ends with KeyboardInterrupt); a second
// one gives up waiting (the returned channel closes and ctx is cancelled).
func interruptOnCtrlC(ctx context.Context, cancel context.CancelFunc, conn *client.Conn, p *runPrinter) <-chan struct{} {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt)
	interrupted := make(chan struct{})
	go func() {
		defer signal.Stop(sigs)
		n := 0
		for {
			select {
			case <-sigs:
				n++
				if n > 1 {
					close(interrupted)
					cancel()
					return
				}
				p.note("interrupting the kernel (Ctrl-C again to stop waiting; the run goes on)")
				_ = conn.Send(ctx, client.Interrupt{})
			case <-ctx.Done():
				return
			}
		}
	}()
	return interrupted
}

// follow prints run id's frames until its turn is over (idle after the result) and returns how
// the command ends: nil, exit 1 for a Python error, the API's error, or 130 when given up.
func (p *runPrinter) follow(ctx context.Context, conn *client.Conn, id string, stopProgress func(), interrupted <-chan struct{}) error {
	var res *client.RunResult
	defer func() { p.saveImages(res) }()
	for {
		f, err := conn.Next(ctx)
		if err != nil {
			select {
			case <-interrupted:
				return &exitError{code: 130, err: errors.New("interrupted; the run goes on in the session")}
			default:
			}
			return err
		}
		if f.Type == client.FrameNotice {
			p.note(fmt.Sprintf("%d frames dropped (this client was too slow): output incomplete", f.Dropped))
			continue
		}
		if f.ID != id {
			continue // another client's run
		}
		switch f.Type {
		case client.FrameOutput:
			if f.Output != nil {
				p.output(*f.Output)
			}
		case client.FrameInputRequest:
			_ = conn.Send(ctx, client.InputReply{ID: id, Value: p.input(f.Prompt)})
		case client.FrameResult:
			res = f.Result
			stopProgress()
			p.saveImages(res)
			p.result(res)
		case client.FrameError:
			if f.Error != nil {
				return f.Error.Err()
			}
		case client.FrameStatus:
			if f.ExecutionState == "idle" && res != nil {
				if res.Status != client.StatusOK {
					return &exitError{code: 1}
				}
				return nil
			}
		}
	}
}

func newRunID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "cli-" + hex.EncodeToString(b)
}

// runPrinter prints one run's frames. Its writes clear the progress line first.
type runPrinter struct {
	sid            string
	stdout, stderr io.Writer
	tty            bool          // stderr is a terminal: colors kept, progress shown
	stdin          *bufio.Reader // answers input(); nil when the code came from stdin

	mu       sync.Mutex
	progress bool // a progress line is on the screen
	images   []client.Output
	saved    int
}

func (p *runPrinter) write(w io.Writer, s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
	_, _ = io.WriteString(w, s)
}

func (p *runPrinter) clearLocked() {
	if p.progress {
		_, _ = io.WriteString(p.stderr, "\r\x1b[K")
		p.progress = false
	}
}

func (p *runPrinter) note(msg string) { p.write(p.stderr, "carryover: "+msg+"\n") }

// startProgress shows "[session] running Ns" on a terminal once a run passes progressAfter; the
// returned stop (idempotent) clears it.
func (p *runPrinter) startProgress() (stop func()) {
	if !p.tty {
		return func() {}
	}
	start := time.Now()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		timer := time.NewTimer(progressAfter)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-done:
			return
		}
		tick := time.NewTicker(time.Second / 4)
		defer tick.Stop()
		last := ""
		for {
			p.mu.Lock()
			line := fmt.Sprintf("[%s] running %.0fs", p.sid, time.Since(start).Seconds())
			if line != last || !p.progress { // redrawn when the seconds change or output cleared it
				fmt.Fprintf(p.stderr, "\r\x1b[K%s", line)
				p.progress, last = true, line
			}
			p.mu.Unlock()
			select {
			case <-tick.C:
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-finished
			p.mu.Lock()
			p.clearLocked()
			p.mu.Unlock()
		})
	}
}

// imageTypes are the image MIME types saved to files, by preference, with their extensions.
var imageTypes = []struct{ mime, ext string }{
	{"image/png", "png"}, {"image/jpeg", "jpg"}, {"image/gif", "gif"}, {"image/svg+xml", "svg"},
}

func hasImage(o client.Output) bool {
	for _, t := range imageTypes {
		if _, ok := o.Data[t.mime]; ok {
			return true
		}
	}
	return false
}

// output prints one output as it arrives; images wait for the run's execution count (their names
// carry it), which comes with the result. A display's update (update_display_data: a progress
// display, a handle's update()) is printed as a new line, as a terminal cannot redraw the first:
// dropped, the display's last state was never shown.
func (p *runPrinter) output(o client.Output) {
	switch o.Type {
	case "stream":
		if o.Name == "stderr" {
			p.write(p.stderr, o.Text)
		} else {
			p.write(p.stdout, o.Text)
		}
	case "execute_result", "display_data", "update_display_data":
		img := hasImage(o)
		if img {
			p.mu.Lock()
			p.images = append(p.images, o)
			p.mu.Unlock()
		}
		if text := o.DataString("text/plain"); text != "" && (o.Type == "execute_result" || !img) {
			p.write(p.stdout, text+"\n")
		}
	case "error":
		p.write(p.stderr, p.traceback(o.EName, o.EValue, o.Traceback))
	}
}

func (p *runPrinter) traceback(ename, evalue string, tb []string) string {
	s := strings.Join(tb, "\n")
	if s == "" {
		s = ename + ": " + evalue
	}
	if !p.tty {
		s = stripANSI(s)
	}
	return s + "\n"
}

// saveImages writes the images seen so far to <session>-<count>-<n>.<ext> and names them on stderr.
func (p *runPrinter) saveImages(res *client.RunResult) {
	p.mu.Lock()
	imgs := p.images
	p.images = nil
	p.mu.Unlock()
	count := 0
	if res != nil {
		count = res.ExecutionCount
	}
	for _, o := range imgs {
		for _, t := range imageTypes {
			s := o.DataString(t.mime)
			if s == "" {
				continue
			}
			data := []byte(s)
			if t.ext != "svg" {
				b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
				if err != nil {
					p.note(fmt.Sprintf("%s output not decodable: %v", t.mime, err))
					break
				}
				data = b
			}
			p.saved++
			name := fmt.Sprintf("%s-%d-%d.%s", p.sid, count, p.saved, t.ext)
			if err := os.WriteFile(name, data, 0o644); err != nil {
				p.note(fmt.Sprintf("saving %s: %v", name, err))
			} else {
				abs, _ := filepath.Abs(name)
				p.note(fmt.Sprintf("image saved to %s (%d bytes)", abs, len(data)))
			}
			break
		}
	}
}

// result prints what the answer adds to the streamed outputs: dropped output, the checkpoint line.
func (p *runPrinter) result(res *client.RunResult) {
	if res == nil {
		return
	}
	if res.OutputDroppedBytes > 0 {
		p.note(fmt.Sprintf("%d bytes of output dropped (run.max_output_bytes)", res.OutputDroppedBytes))
	}
	if line := restoreLine(res.Restore); line != "" {
		p.write(p.stderr, line+"\n")
	}
	if len(res.ProcessesEnded) > 0 {
		ended := make([]string, len(res.ProcessesEnded))
		for i, e := range res.ProcessesEnded {
			ended[i] = fmt.Sprintf("%d (%s)", e.PID, cell(e.Command))
		}
		p.write(p.stderr, "background processes ended with the previous kernel: "+strings.Join(ended, ", ")+"\n")
	}
	if line := checkpointLine(res); line != "" {
		p.write(p.stderr, line+"\n")
	}
}

// restoreLine is the answer's restore report as carryover.RestoreReport.Summary words it (the MCP
// tool's text says the same); "" without a restore.
func restoreLine(r *client.RestoreReport) string {
	if r == nil {
		return ""
	}
	b, err := json.Marshal(r) // the client's type is the API's JSON, as the server's is
	var rep carryover.RestoreReport
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil {
		return "restored from checkpoint " + r.CheckpointID + " (report not readable: " + err.Error() + ")"
	}
	return rep.Summary()
}

// checkpointLine is "checkpoint <id>: saved [...], N unchanged, skipped [...]" or the checkpoint's error.
func checkpointLine(res *client.RunResult) string {
	if res.CheckpointError != "" {
		return "checkpoint_error: " + res.CheckpointError
	}
	cp := res.Checkpoint
	if cp == nil {
		return ""
	}
	line := fmt.Sprintf("checkpoint %s: saved [%s], %d unchanged, skipped [%s]",
		cp.ID, strings.Join(cp.Saved, ", "), cp.Unchanged, varSkips(cp.Skipped))
	if cp.FilesSaved > 0 || len(cp.FilesSkipped) > 0 {
		skipped := make([]string, len(cp.FilesSkipped))
		for i, f := range cp.FilesSkipped {
			skipped[i] = f.Path + " (" + f.Reason + ")"
		}
		line += fmt.Sprintf("; files saved %d, skipped [%s]", cp.FilesSaved, strings.Join(skipped, ", "))
	}
	return line
}

// inputEOF is the input_reply value that makes the kernel's input() raise EOFError (ipykernel's
// convention, as a terminal's Ctrl-D).
const inputEOF = "\x04"

// input answers an input() prompt from stdin, a line at a time; at the end of stdin (or when stdin
// held the code) the kernel's input() raises EOFError, as Python's own does: a `while True: input()`
// loop reading piped lines ends instead of getting empty lines forever.
func (p *runPrinter) input(prompt string) string {
	p.write(p.stdout, prompt)
	if p.stdin == nil {
		p.note("input() got end of file: stdin held the code")
		return inputEOF
	}
	line, err := p.stdin.ReadString('\n')
	if err != nil && line == "" {
		return inputEOF
	}
	return strings.TrimRight(line, "\r\n")
}
