package kernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Spec is a kernelspec (kernel.json) found in the Jupyter data dirs.
type Spec struct {
	Name          string            `json:"-"`
	Argv          []string          `json:"argv"`
	DisplayName   string            `json:"display_name"`
	Language      string            `json:"language"`
	InterruptMode string            `json:"interrupt_mode"` // "signal" (default) | "message"
	Env           map[string]string `json:"env"`
	ResourceDir   string            `json:"-"`
}

// defaultPython is Debian's interpreter, the one with ipykernel installed; never the python3 on PATH.
const defaultPython = "/usr/bin/python3"

// ErrNoSpec is returned by FindSpec when no kernelspec of that name is installed.
var ErrNoSpec = errors.New("no such kernelspec")

// specDirs lists the kernelspec directories in jupyter_core's precedence order: $JUPYTER_PATH, the
// user data dir, then the system dirs. Reading the environment here is deliberate: it is the
// documented Jupyter discovery contract, not carryover configuration.
func specDirs() []string {
	var dirs []string
	for _, p := range filepath.SplitList(os.Getenv("JUPYTER_PATH")) {
		if p != "" {
			dirs = append(dirs, filepath.Join(p, "kernels"))
		}
	}
	if d := os.Getenv("JUPYTER_DATA_DIR"); d != "" {
		dirs = append(dirs, filepath.Join(d, "kernels"))
	} else if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		dirs = append(dirs, filepath.Join(x, "jupyter", "kernels"))
	} else if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".local", "share", "jupyter", "kernels"))
	}
	return append(dirs, "/usr/local/share/jupyter/kernels", "/usr/share/jupyter/kernels")
}

// normalizeName maps the aliases to the spec name: "" and "python" mean "python3".
func normalizeName(name string) string {
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" || name == "python" {
		return "python3"
	}
	return name
}

// FindSpec finds a kernelspec by name in $JUPYTER_PATH, ~/.local/share/jupyter/kernels,
// /usr/local/share/jupyter/kernels, /usr/share/jupyter/kernels. "python" (and "") means "python3".
// python, when non-empty, replaces argv[0] of a python kernel (argv[0] "python", "python3" or a path
// ending in python3*). When no python3 spec is installed, a built-in one is used:
// [python, -m, ipykernel_launcher, -f, {connection_file}].
func FindSpec(name, python string) (*Spec, error) {
	name = normalizeName(name)
	for _, dir := range specDirs() {
		s, err := readSpec(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		s.overridePython(python)
		return s, nil
	}
	if name == "python3" {
		return builtinPythonSpec(python), nil
	}
	return nil, fmt.Errorf("kernelspec %q: %w", name, ErrNoSpec)
}

// ListSpecs returns every installed kernelspec (the first of each name in precedence order), sorted
// by name. The built-in python3 spec is included when none is installed.
func ListSpecs() ([]*Spec, error) {
	seen := map[string]*Spec{}
	for _, dir := range specDirs() {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue // a missing data dir is normal
		}
		for _, e := range entries {
			name := strings.ToLower(e.Name())
			if _, dup := seen[name]; dup {
				continue
			}
			s, err := readSpec(filepath.Join(dir, e.Name()))
			if err != nil {
				continue // not a kernelspec dir, or a broken one: skip it like jupyter_client does
			}
			seen[name] = s
		}
	}
	if _, ok := seen["python3"]; !ok {
		seen["python3"] = builtinPythonSpec("")
	}
	out := make([]*Spec, 0, len(seen))
	for _, s := range seen {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func readSpec(dir string) (*Spec, error) {
	b, err := os.ReadFile(filepath.Join(dir, "kernel.json"))
	if err != nil {
		return nil, err
	}
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("kernelspec %s: %w", dir, err)
	}
	if len(s.Argv) == 0 {
		return nil, fmt.Errorf("kernelspec %s: empty argv", dir)
	}
	s.Name = strings.ToLower(filepath.Base(dir))
	s.ResourceDir = dir
	if s.InterruptMode == "" {
		s.InterruptMode = "signal"
	}
	return &s, nil
}

func builtinPythonSpec(python string) *Spec {
	if python == "" {
		python = defaultPython
	}
	return &Spec{
		Name:          "python3",
		Argv:          []string{python, "-m", "ipykernel_launcher", "-f", "{connection_file}"},
		DisplayName:   "Python 3 (ipykernel)",
		Language:      "python",
		InterruptMode: "signal",
	}
}

// overridePython swaps argv[0] for the configured interpreter when argv[0] is a python.
func (s *Spec) overridePython(python string) {
	if python == "" || len(s.Argv) == 0 {
		return
	}
	base := filepath.Base(s.Argv[0])
	if base == "python" || strings.HasPrefix(base, "python3") {
		s.Argv = append([]string{python}, s.Argv[1:]...)
	}
}

// argv returns the command line with {connection_file} and {resource_dir} substituted.
func (s *Spec) argv(connFile string) []string {
	r := strings.NewReplacer("{connection_file}", connFile, "{resource_dir}", s.ResourceDir)
	out := make([]string, len(s.Argv))
	for i, a := range s.Argv {
		out[i] = r.Replace(a)
	}
	return out
}
