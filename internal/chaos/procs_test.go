package chaos

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func lookPath(name string) bool { _, err := exec.LookPath(name); return err == nil }

// descendants lists the processes below pid (children, their children, ...) from /proc.
func descendants(pid int) []int {
	parent := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The field after the command (which may hold spaces) in its parentheses: state, then ppid.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[pp] = append(parent[pp], p)
	}
	var out []int
	for q := []int{pid}; len(q) > 0; q = q[1:] {
		for _, c := range parent[q[0]] {
			out = append(out, c)
			q = append(q, c)
		}
	}
	return out
}

// appendFile appends s to the file at path (the tables of several topologies go to one file).
func appendFile(path, s string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	f.WriteString(s)
}
