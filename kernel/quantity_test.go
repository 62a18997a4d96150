package kernel

import "testing"

func TestParseMemory(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "4Gi": 4 << 30, "512Mi": 512 << 20, "1.5G": 1.5e9, "100000000": 1e8, " 64Mi ": 64 << 20} {
		got, err := ParseMemory(in)
		if err != nil || got != want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"abc", "-1Gi", "0", "1Ki", "4Xi", "NaN"} {
		if _, err := ParseMemory(in); err == nil {
			t.Errorf("ParseMemory(%q): no error", in)
		}
	}
	if s := FormatMemory(4 << 30); s != "4Gi" {
		t.Errorf("FormatMemory = %q", s)
	}
}

// TestParseQuantity: a disk's size has no memory floor (8Mi is a workspace disk's minimum, its
// caller's to say); ParseMemory keeps the 16Mi a kernel needs.
func TestParseQuantity(t *testing.T) {
	for in, want := range map[string]int64{"8Mi": 8 << 20, "12M": 12e6, "1Ki": 1 << 10, "": 0} {
		if got, err := ParseQuantity(in); err != nil || got != want {
			t.Errorf("ParseQuantity(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"abc", "-1Mi", "0", "4Xi"} {
		if _, err := ParseQuantity(in); err == nil {
			t.Errorf("ParseQuantity(%q): no error", in)
		}
	}
	if _, err := ParseMemory("8Mi"); err == nil {
		t.Error("ParseMemory(8Mi): no error, want the 16Mi floor")
	}
}

func TestParseCPUs(t *testing.T) {
	for in, want := range map[string]float64{"": 0, "2": 2, "0.5": 0.5, "500m": 0.5} {
		got, err := ParseCPUs(in)
		if err != nil || got != want {
			t.Errorf("ParseCPUs(%q) = %g, %v; want %g", in, got, err, want)
		}
	}
	for _, in := range []string{"x", "-1", "0", "1m"} {
		if _, err := ParseCPUs(in); err == nil {
			t.Errorf("ParseCPUs(%q): no error", in)
		}
	}
}
