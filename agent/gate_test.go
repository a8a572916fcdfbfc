package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/bootstrap"
)

func TestGPUGateSim(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("BURST_REQUIRE_SLURM") == "1" {
			t.Fatal("the simulated GPUs' fault file must be root's: run as root (make test does)")
		}
		t.Skip("SKIP: the simulated GPUs' fault file must be root's (run as root; make test does)")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	faults := filepath.Join(dir, bootstrap.SimFaultFileName)
	gate := gpuGate(slog.New(slog.DiscardHandler), "/nonexistent/dcgmi")
	ctx := context.Background()
	in := bootstrap.GateInput{InstanceID: "i-0abc", InstanceType: "g5.12xlarge", GPUSource: "sim", SimFaultFile: faults}
	if err := gate(ctx, in); err != nil {
		t.Fatalf("healthy g5.12xlarge: %v", err)
	}
	os.WriteFile(faults, []byte(`{"faults":[{"kind":"gpu_count","count":3,"instance":"i-0abc"}]}`), 0o644)
	if err := gate(ctx, in); err == nil || err.Error() != "gpu: gpu_count (3 GPUs, the class has 4)" {
		t.Errorf("3 of 4 GPUs: %v", err)
	}
	other := in
	other.InstanceID = "i-0def" // the replacement instance of the node
	if err := gate(ctx, other); err != nil {
		t.Errorf("another instance failed the gate: %v", err)
	}
	os.WriteFile(faults, []byte(`{"faults":[{"kind":"gpu_lost","gpu":2}]}`), 0o644)
	if err := gate(ctx, in); err == nil || !strings.HasPrefix(err.Error(), "gpu: gpu_lost on GPU 2") {
		t.Errorf("lost GPU: %v", err)
	}
	if err := gate(ctx, bootstrap.GateInput{InstanceType: "c7i.large", GPUSource: "sim"}); err != nil {
		t.Errorf("a CPU instance: %v", err)
	}
}

func TestRunDCGM(t *testing.T) {
	if err := runDCGM(context.Background(), "/nonexistent/dcgmi", 1, 0); err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Errorf("missing dcgmi: %v", err)
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "dcgmi")
	os.WriteFile(fake, []byte("#!/bin/sh\necho 'Diagnostic | Result'\necho '| Memory | Fail - GPU 1 |'\nexit 226\n"), 0o755)
	if err := runDCGM(context.Background(), fake, 1, 0); err == nil || !strings.Contains(err.Error(), "Fail - GPU 1") {
		t.Errorf("failing diag: %v", err)
	}
	os.WriteFile(fake, []byte("#!/bin/sh\nsleep 5\n"), 0o755)
	if err := runDCGM(context.Background(), fake, 1, 100_000_000); err == nil || !strings.Contains(err.Error(), "did not finish within") {
		t.Errorf("hung diag: %v", err)
	}
	os.WriteFile(fake, []byte("#!/bin/sh\necho Pass\n"), 0o755)
	if err := runDCGM(context.Background(), fake, 2, 0); err != nil {
		t.Errorf("passing diag: %v", err)
	}
}
