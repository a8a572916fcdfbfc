//go:build cgo

package gpu

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/burst-hpc/burst/agent/gpu/gputest"
)

// openReal opens the machine's NVML, closed when t ends; it skips (fails
// under BURST_REQUIRE_GPU=1) where there is no driver.
func openReal(t *testing.T) *NVML {
	t.Helper()
	r, err := Open()
	if errors.Is(err, ErrNoDriver) {
		gputest.Skip(t, "no NVIDIA driver on this machine: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestRealNVML reads the machine's GPUs through libnvidia-ml (make test-gpu;
// it also runs, and skips, in plain go test where there is no driver).
// It skips, saying why, where there is no driver.
func TestRealNVML(t *testing.T) {
	r := openReal(t)
	devs, err := r.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) == 0 {
		gputest.Skip(t, "NVML loaded but reports 0 GPUs")
	}
	samples, err := r.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != len(devs) {
		t.Fatalf("got %d samples for %d devices", len(samples), len(devs))
	}
	for i, s := range samples {
		t.Logf("GPU %d %s %s: util %d%%, memory %d/%d MiB, %.1f W, %d C, pids %v",
			s.Index, s.UUID, s.Name, s.UtilPercent, s.MemoryUsedBytes>>20, s.MemoryTotalBytes>>20, s.PowerWatts, s.TemperatureC, s.PIDs)
		if s.UUID != devs[i].UUID || s.MemoryTotalBytes == 0 || s.UtilPercent > 100 {
			t.Errorf("GPU %d sample implausible: %+v", i, s)
		}
	}
}

// TestRealNVMLHealth registers the health event sets on every GPU and reads
// every health counter once (make test-gpu); it skips without a driver.
// Findings are logged, not failures: a real GPU may well carry an
// aggregate ECC count or a slowdown while the test runs.
func TestRealNVMLHealth(t *testing.T) {
	r := openReal(t)
	n, err := r.RegisterHealthEvents()
	if err != nil {
		t.Fatal(err)
	}
	devs, _ := r.Devices()
	t.Logf("health events registered on %d of %d GPU(s)", n, len(devs))
	evs, err := r.Health(context.Background(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		t.Logf("finding: %s on GPU %d (%s): count %d %s", e.What(), e.GPU, e.BusID, e.Count, e.Detail)
		if e.GPU < -1 || e.GPU >= len(devs) {
			t.Errorf("finding names GPU %d of %d", e.GPU, len(devs))
		}
	}
	for i, b := range r.busIDs {
		if b == "" {
			t.Errorf("GPU %d has no PCI bus id", i)
		}
	}
}
