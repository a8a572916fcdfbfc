package gpu

import (
	"context"
	"time"

	"github.com/burst-hpc/burst/internal/gpuhealth"
)

// HealthReader reads GPU faults (see internal/gpuhealth for the kinds).
// Both the NVML reader and the simulated one implement it.
type HealthReader interface {
	// Health waits up to wait for critical events (Xids, ECC errors) from
	// the GPUs' event sets, then reads every GPU's health counters once,
	// and returns what it found. A GPU that fell off the bus is a KindLost
	// event, not an error; err is for NVML itself failing.
	Health(ctx context.Context, wait time.Duration) ([]gpuhealth.Event, error)
}
