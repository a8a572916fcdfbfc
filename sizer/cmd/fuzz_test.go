package cmd

import (
	"testing"
)

func FuzzJobOptionParsers(f *testing.F) {
	for _, s := range []string{"2:00:00", "1-2:3:4", "UNLIMITED", "gpu:a100:8", "gres:gpu:2,gres:nvme:1", "a100:4", "16G", "2-4", "", "::", "-", "1e9", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := parseSlurmTime(s); err == nil && d < 0 {
			t.Fatalf("negative time %v from %q", d, s)
		}
		if _, n, err := parseGPUSpec(s); err == nil && n < 0 {
			t.Fatalf("negative GPU count from %q", s)
		}
		if _, n, err := parseGresGPUs(s); err == nil && n < 0 {
			t.Fatalf("negative GRES count from %q", s)
		}
		if n, err := parseNodes(s); err == nil && n < 0 {
			t.Fatalf("negative nodes from %q", s)
		}
		if m, err := parseMemMiB(s); err == nil && m < 0 {
			t.Fatalf("negative memory from %q", s)
		}
	})
}
