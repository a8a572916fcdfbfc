// Package gpu defines what burst-agent reads from a node's GPUs and, in
// nvml.go (cgo only), reads it from NVIDIA's NVML through go-nvml.
//
// The types and the Reader interface here are pure Go so that every other
// agent package builds with CGO_ENABLED=0; a simulated Reader lives in
// agent/gpu/sim.
package gpu

import (
	"context"
	"errors"
	"time"
)

// Device identifies one GPU.
type Device struct {
	Index            int    `json:"index"`
	UUID             string `json:"uuid"`
	Name             string `json:"name"`
	MemoryTotalBytes uint64 `json:"memory_total_bytes"`
}

// Sample is one reading of one GPU.
type Sample struct {
	Time             time.Time `json:"time"`
	Index            int       `json:"index"`
	UUID             string    `json:"uuid"`
	Name             string    `json:"name"`
	UtilPercent      uint32    `json:"util_percent"`
	MemoryUsedBytes  uint64    `json:"memory_used_bytes"`
	MemoryTotalBytes uint64    `json:"memory_total_bytes"`
	PowerWatts       float64   `json:"power_watts"`
	TemperatureC     uint32    `json:"temperature_c"`
	// PIDs are the compute processes running on the GPU.
	PIDs []int `json:"pids,omitempty"`
}

// Reader reads GPUs. Implementations are safe for use by one goroutine.
type Reader interface {
	Devices() ([]Device, error)
	Sample(ctx context.Context) ([]Sample, error)
	Close() error
}

// ErrNoDriver is returned (wrapped) by Open when NVML cannot be used on this
// machine: no libnvidia-ml, no driver loaded, or a binary built without cgo.
// Callers fall back to another source or report that the node has no GPUs.
var ErrNoDriver = errors.New("no usable NVIDIA driver")
