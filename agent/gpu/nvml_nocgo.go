//go:build !cgo

package gpu

import (
	"context"
	"fmt"
	"time"

	"github.com/burst-hpc/burst/internal/gpuhealth"
)

// NVML is unavailable in binaries built with CGO_ENABLED=0.
type NVML struct{}

// Open always fails without cgo; the error wraps ErrNoDriver.
func Open() (*NVML, error) {
	return nil, fmt.Errorf("opening NVML: this burst-agent was built with CGO_ENABLED=0 and cannot load libnvidia-ml; rebuild with cgo: %w", ErrNoDriver)
}

// Devices is never reached: Open fails.
func (n *NVML) Devices() ([]Device, error) { return nil, ErrNoDriver }

// Sample is never reached: Open fails.
func (n *NVML) Sample(context.Context) ([]Sample, error) { return nil, ErrNoDriver }

// Close does nothing.
func (n *NVML) Close() error { return nil }

// Health is never reached: Open fails.
func (n *NVML) Health(context.Context, time.Duration) ([]gpuhealth.Event, error) {
	return nil, ErrNoDriver
}

// RegisterHealthEvents is never reached: Open fails.
func (n *NVML) RegisterHealthEvents() (int, error) { return 0, ErrNoDriver }
