package kernel

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Quantities of the resource limits a session may ask for (sandbox.cpus, sandbox.memory), read the
// way Kubernetes writes them. They live here, beside Limits, so a service can validate a request
// whatever provisioner will apply it.

var memUnits = []struct {
	suffix string
	mult   float64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
}

// ParseMemory reads a Kubernetes-style quantity of memory: "4Gi", "512Mi", "1.5G", "1000000"
// (bytes). The binary suffixes are powers of 1024, the decimal ones powers of 1000. "" is 0 (no
// limit). Below 16Mi is refused: no Python kernel runs in less.
func ParseMemory(s string) (int64, error) {
	b, err := ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("memory %w", err)
	}
	if b > 0 && b < 16<<20 {
		return 0, fmt.Errorf("memory %q: below the 16Mi minimum a Python kernel needs", strings.TrimSpace(s))
	}
	return b, nil
}

// ParseQuantity reads a byte quantity as ParseMemory does, with no floor: a disk's size, whose own
// minimum its caller knows (a workspace disk may be 8Mi).
func ParseQuantity(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	num, mult := s, 1.0
	for _, u := range memUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("%q: want a positive quantity like 512Mi or 4Gi", s)
	}
	b := f * mult
	if b > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q: too large", s)
	}
	return int64(b), nil
}

// FormatMemory writes bytes the way ParseMemory reads them, exactly when possible.
func FormatMemory(b int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if b >= u.m && b%u.m == 0 {
			return strconv.FormatInt(b/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(b, 10)
}

// ParseCPUs reads "2", "0.5" or a Kubernetes millicore quantity "500m". "" is 0 (no limit).
func ParseCPUs(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	div := 1.0
	if strings.HasSuffix(s, "m") {
		s, div = strings.TrimSuffix(s, "m"), 1000
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("cpus %q: want a positive number like 2, 0.5 or 500m", s)
	}
	f /= div
	if f < 0.01 {
		return 0, fmt.Errorf("cpus %q: below the 0.01 minimum", s)
	}
	return f, nil
}
