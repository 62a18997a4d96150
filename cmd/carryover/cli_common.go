package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/carryover/carryover/client"
)

// The client subcommands share a connection (CARRYOVER_URL and CARRYOVER_TOKEN, overridden by
// --url and --token) and --json, which prints the API's JSON answers instead of text.

const defaultURL = "http://127.0.0.1:8080"

// cli is the state the client subcommands share: the persistent flags of one command line.
type cli struct {
	url, token string
	json       bool
}

// exitError ends the process with code; err (when not nil) is printed on stderr first.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// errorText is how an error reads on stderr; an API error shows its code and HTTP status.
func errorText(err error) string {
	var ae *client.Error
	if errors.As(err, &ae) {
		if ae.Status == 0 {
			return fmt.Sprintf("%s: %s", ae.Code, ae.Message)
		}
		return fmt.Sprintf("%s (%d): %s", ae.Code, ae.Status, ae.Message)
	}
	return err.Error()
}

// addClientCommands adds the client subcommands and their persistent flags to root.
func addClientCommands(root *cobra.Command) {
	c := &cli{}
	// The flags go on each client command rather than on root, so that `serve` (whose token is
	// --auth.token) does not show them.
	for _, cmd := range []*cobra.Command{c.runCmd(), c.execCmd(), c.sessionsCmd(), c.filesCmd(), c.checkpointsCmd(), c.eventsCmd(), c.keysCmd()} {
		pf := cmd.PersistentFlags()
		pf.StringVar(&c.url, "url", "", "server address (default $CARRYOVER_URL, else "+defaultURL+")")
		pf.StringVar(&c.token, "token", "", "API token (default $CARRYOVER_TOKEN)")
		pf.BoolVar(&c.json, "json", false, "print the API's JSON answers (machine output)")
		root.AddCommand(cmd)
	}
}

// client is the API client of the command line's connection settings.
func (c *cli) client() *client.Client {
	u, tok := c.url, c.token
	if u == "" {
		u = os.Getenv("CARRYOVER_URL")
	}
	if u == "" {
		u = defaultURL
	}
	if tok == "" {
		tok = os.Getenv("CARRYOVER_TOKEN")
	}
	return client.New(u, tok)
}

// apiErr makes any error of a client subcommand an exit with code 2 (API, connection or usage
// error), leaving an *exitError as it is.
func apiErr(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return &exitError{code: 2, err: err}
}

// runE wraps a client subcommand's body so its errors exit with code 2.
func runE(f func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error { return apiErr(f(cmd, args)) }
}

// apiPath is /api/sessions/{id}/{parts...}, each segment escaped.
func apiPath(id string, parts ...string) string {
	p := "/api/sessions/" + url.PathEscape(id)
	for _, s := range parts {
		p += "/" + url.PathEscape(s)
	}
	return p
}

// call sends one request; with --json it prints the answer as the API gave it (indented), and it
// decodes it into out unless out is nil.
func (c *cli) call(cmd *cobra.Command, method, path string, body, out any) error {
	var raw []byte
	if err := c.client().Do(cmd.Context(), method, path, body, &raw); err != nil {
		return err
	}
	if c.json {
		printJSON(cmd.OutOrStdout(), raw)
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("decoding the answer of %s %s: %w", method, path, err)
		}
	}
	return nil
}

// printJSON writes a JSON document indented, followed by a newline.
func printJSON(w io.Writer, raw []byte) {
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		buf.Reset()
		buf.Write(raw)
	}
	buf.WriteByte('\n')
	_, _ = w.Write(buf.Bytes())
}

// marshalJSON prints v as indented JSON.
func marshalJSON(w io.Writer, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	printJSON(w, raw)
	return nil
}

// isTerminal says whether w is a terminal (a tty file descriptor).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

var ansiRE = regexp.MustCompile("\x1b\\[[0-9;?]*[A-Za-z]")

// stripANSI drops terminal color codes (tracebacks carry them) for output that is not a terminal.
func stripANSI(s string) string { return ansiRE.ReplaceAllString(s, "") }

// workspacePath is a workspace path as the API takes it in a URL (without /workspace/).
func workspacePath(p string) (string, error) {
	if p == "/workspace" || strings.HasPrefix(p, "/workspace/") {
		p = strings.TrimPrefix(strings.TrimPrefix(p, "/workspace"), "/")
	} else if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q is outside /workspace", p)
	}
	if p == "" {
		return "", errors.New("empty file path")
	}
	return p, nil
}

// ctxDone reports whether the context ended (an interrupted follow).
func ctxDone(ctx context.Context) bool { return ctx.Err() != nil }

// sessionFlag adds the required -s/--session flag.
func sessionFlag(cmd *cobra.Command, id *string) {
	cmd.Flags().StringVarP(id, "session", "s", "", "session id")
	_ = cmd.MarkFlagRequired("session")
}

// varSkips formats skipped variables as "name (type: reason), ...".
func varSkips(list []client.VarSkip) string {
	parts := make([]string, len(list))
	for i, s := range list {
		parts[i] = fmt.Sprintf("%s (%s: %s)", s.Name, s.Type, s.Reason)
	}
	return strings.Join(parts, ", ")
}

// cell is a user's text (a file path, a session name) as a table shows it: quoted, Go-style, when
// it holds a control character (a newline or a tab would break the table's rows and columns),
// else as it is.
func cell(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
