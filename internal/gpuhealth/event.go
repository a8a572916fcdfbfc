// Package gpuhealth is what burst knows about GPU faults: the kinds of
// health event burst-agent detects (event.go), the classification of each
// into what burst does about it (table.go, from NVIDIA's Xid catalogue) and
// the operator's overrides from burst.yaml.
//
// It is pure Go: the agent's NVML reader (agent/gpu, cgo) produces Events,
// the agent's health monitor classifies them, and the sizer records them.
package gpuhealth

import (
	"fmt"
	"time"
)

// Kind is what went wrong.
type Kind string

// Event kinds. Each has a default Action in the table.
const (
	// KindXid is a critical Xid event from NVML's event set (Xid holds the code).
	KindXid Kind = "xid"
	// KindECCVolatile: uncorrected ECC errors since the driver loaded.
	KindECCVolatile Kind = "ecc_uncorrected_volatile"
	// KindECCAggregate: uncorrected ECC errors over the GPU's lifetime.
	KindECCAggregate Kind = "ecc_uncorrected_aggregate"
	// KindRetiredPagesPending: a retired page waits for a GPU reset.
	KindRetiredPagesPending Kind = "retired_pages_pending"
	// KindRowRemapPending: a remapped row waits for a GPU reset.
	KindRowRemapPending Kind = "row_remap_pending"
	// KindRowRemapFailed: row remapping failed (no spare rows left).
	KindRowRemapFailed Kind = "row_remap_failed"
	// KindNVLink: NVLink error counters grew past the threshold.
	KindNVLink Kind = "nvlink_errors"
	// KindLost: the GPU fell off the bus (NVML ERROR_GPU_IS_LOST).
	KindLost Kind = "gpu_lost"
	// KindSlowdown: hardware thermal or power-brake clock slowdown held
	// longer than the threshold.
	KindSlowdown Kind = "clock_slowdown"
	// KindCount: fewer GPUs than the node's class has.
	KindCount Kind = "gpu_count"
	// KindModel: a GPU of another model than the node's class.
	KindModel Kind = "gpu_model"
)

// Kinds lists every kind, in the order the docs show them.
var Kinds = []Kind{KindXid, KindECCVolatile, KindECCAggregate, KindRetiredPagesPending, KindRowRemapPending, KindRowRemapFailed,
	KindNVLink, KindLost, KindSlowdown, KindCount, KindModel}

// Event is one health finding on one GPU (GPU -1: the node as a whole, e.g.
// a missing GPU).
type Event struct {
	Time  time.Time `json:"time"`
	Kind  Kind      `json:"kind"`
	GPU   int       `json:"gpu"`
	UUID  string    `json:"uuid,omitempty"`
	BusID string    `json:"bus_id,omitempty"`
	// Xid is the Xid code (KindXid only).
	Xid uint64 `json:"xid,omitempty"`
	// Count is the counter's value (ECC errors, NVLink errors, GPUs found).
	Count uint64 `json:"count,omitempty"`
	// Detail is free text (the model found, the slowdown reasons).
	Detail string `json:"detail,omitempty"`
}

// What is the event in a few words: "Xid 79", "gpu_lost".
func (e Event) What() string {
	if e.Kind == KindXid {
		return fmt.Sprintf("Xid %d", e.Xid)
	}
	return string(e.Kind)
}

// Reason is the Slurm node reason of a node drained for e, e.g.
// "gpu: Xid 79 on GPU 3 (0000:b3:00.0)"; at most 120 characters.
func (e Event) Reason() string {
	var r string
	switch {
	case e.GPU < 0:
		r = "gpu: " + e.What()
		if e.Detail != "" {
			r += " (" + e.Detail + ")"
		}
	case e.BusID != "":
		r = fmt.Sprintf("gpu: %s on GPU %d (%s)", e.What(), e.GPU, e.BusID)
	default:
		r = fmt.Sprintf("gpu: %s on GPU %d", e.What(), e.GPU)
	}
	if len(r) > 120 {
		r = r[:117] + "..."
	}
	return r
}

// Key identifies the finding so that one fault is acted on once.
func (e Event) Key() string { return fmt.Sprintf("%s/%d/%d", e.Kind, e.GPU, e.Xid) }
