package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/agent/gpu"
	"github.com/burst-hpc/burst/internal/bootstrap"
	"github.com/burst-hpc/burst/internal/catalog"

	"github.com/burst-hpc/burst/agent/gpu/gputest"
)

// TestRealGPUGate runs the boot gate on the machine's GPUs (make
// test-gpu): the instance type is $BURST_INSTANCE_TYPE, else the catalog's
// first type with as many GPUs of the model NVML names. It skips without a
// driver; with one, a failing gate fails the test with the node reason
// the bootstrap would set.
func TestRealGPUGate(t *testing.T) {
	r, err := gpu.Open()
	if errors.Is(err, gpu.ErrNoDriver) {
		gputest.Skip(t, "no NVIDIA driver on this machine: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	devs, _ := r.Devices()
	r.Close()
	if len(devs) == 0 {
		gputest.Skip(t, "NVML loaded but reports 0 GPUs")
	}
	typ := os.Getenv("BURST_INSTANCE_TYPE")
	if typ == "" {
		for _, ct := range catalog.Default().All() {
			if ct.GPUs == len(devs) && ct.GPUModel != "" && strings.Contains(strings.ToLower(devs[0].Name), ct.GPUModel) {
				typ = ct.Name
				break
			}
		}
	}
	if typ == "" {
		gputest.Skip(t, "no catalog type has %d x %s; set BURST_INSTANCE_TYPE", len(devs), devs[0].Name)
	}
	t.Logf("gate for %s (%d x %s)", typ, len(devs), devs[0].Name)
	if err := gpuGate(slog.Default(), "/usr/bin/dcgmi")(context.Background(), bootstrap.GateInput{InstanceType: typ, GPUSource: "nvml"}); err != nil {
		t.Fatalf("the gate refuses this machine: %v", err)
	}
}
