package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/config"
)

// TestPackagedConfig: the package's burst.yaml is the example with
// slurm.burst_bin at /usr/bin, and still loads.
func TestPackagedConfig(t *testing.T) {
	gen := t.TempDir()
	if err := writePackagedConfig("../../examples/burst.yaml", gen); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(gen, "burst.yaml")
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatalf("the packaged burst.yaml does not load: %v", err)
	}
	if cfg.Slurm.BurstBin != "/usr/bin" {
		t.Errorf("slurm.burst_bin = %q, want /usr/bin", cfg.Slurm.BurstBin)
	}
	ex, _ := os.ReadFile("../../examples/burst.yaml")
	got, _ := os.ReadFile(p)
	if d := len(strings.Split(string(ex), "\n")) - len(strings.Split(string(got), "\n")); d != 0 {
		t.Errorf("the packaged burst.yaml has %d lines fewer than the example", d)
	}
	if _, err := PackagedConfig([]byte("slurm:\n  conf_dir: /etc/slurm\n")); err == nil || !strings.Contains(err.Error(), "found 0") {
		t.Errorf("an example without burst_bin: %v", err)
	}
}
