package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestPrecedence: built-in defaults < file < CARRYOVER_* env < flags.
func TestPrecedence(t *testing.T) {
	c := Default()
	if c.Server.Addr != "127.0.0.1:8080" || c.Kernel.Python != "/usr/bin/python3" || c.Pool.Size != 2 || !filepath.IsAbs(c.DataDir) {
		t.Fatalf("defaults: %+v", c)
	}
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte("pool:\n  size: 5\nserver:\n  addr: \"0.0.0.0:1\"\ncull:\n  idle_seconds: 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CARRYOVER_SERVER_ADDR", "127.0.0.1:9999")
	t.Setenv("CARRYOVER_CULL_IDLE_SECONDS", "9")
	flags := pflag.NewFlagSet("t", pflag.ContinueOnError)
	flags.Int("pool.size", 2, "")
	flags.String("server.addr", "127.0.0.1:8080", "")
	if err := flags.Parse([]string{"--pool.size", "3"}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(file, flags)
	if err != nil {
		t.Fatal(err)
	}
	if c.Pool.Size != 3 { // flag set beats the file
		t.Errorf("pool.size = %d, want 3 (flag)", c.Pool.Size)
	}
	if c.Server.Addr != "127.0.0.1:9999" { // env beats the file; the unset flag does not count
		t.Errorf("server.addr = %s, want the env value", c.Server.Addr)
	}
	if c.Cull.IdleSeconds != 9 {
		t.Errorf("cull.idle_seconds = %g, want 9 (env)", c.Cull.IdleSeconds)
	}
}

// TestValidate: values that would only fail later are refused at load with the key's name.
func TestValidate(t *testing.T) {
	for key, val := range map[string]string{
		"CARRYOVER_KERNEL_TRANSPORT":       "udp",
		"CARRYOVER_POOL_SIZE":              "-1",
		"CARRYOVER_PERSISTENCE_CHUNK_SIZE": "10",
		"CARRYOVER_PERSISTENCE_RETENTION":  "0",
		"CARRYOVER_SERVER_MAX_BODY_BYTES":  "0",
	} {
		t.Run(key, func(t *testing.T) {
			t.Setenv(key, val)
			_, err := Load("", nil)
			want := strings.ToLower(strings.TrimPrefix(key, "CARRYOVER_"))
			if err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), ".", "_"), want) {
				t.Fatalf("%s=%s: err %v", key, val, err)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), nil); err == nil {
		t.Fatal("a missing config file must be an error")
	}
}

// TestEveryKeyDocumented: each key of the embedded file has a comment line above it or its section.
func TestEveryKeyDocumented(t *testing.T) {
	lines := strings.Split(string(DefaultYAML()), "\n")
	for i, l := range lines {
		trim := strings.TrimSpace(l)
		if trim == "" || strings.HasPrefix(trim, "#") || !strings.Contains(trim, ":") || strings.HasSuffix(trim, ":") {
			continue
		}
		j := i - 1
		for j >= 0 && !strings.HasPrefix(strings.TrimSpace(lines[j]), "#") && strings.TrimSpace(lines[j]) != "" && !strings.HasSuffix(strings.TrimSpace(lines[j]), ":") {
			j--
		}
		if j < 0 || !strings.HasPrefix(strings.TrimSpace(lines[j]), "#") {
			t.Errorf("key without a comment: %q", trim)
		}
	}
}
