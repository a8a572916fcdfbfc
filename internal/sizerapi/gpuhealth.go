package sizerapi

import "time"

// KindGPUHealth is a Record carrying a GPU health event (Health).
const KindGPUHealth Kind = "gpu_health"

// GPUHealth is one GPU health event burst-agent found and what it did
// about it (internal/gpuhealth has the kinds and the table of actions).
type GPUHealth struct {
	Time time.Time `json:"time"`
	// Kind is internal/gpuhealth's: xid, ecc_uncorrected_volatile, gpu_lost, ...
	Kind string `json:"kind"`
	// GPU index on the node; -1 the node as a whole (a missing GPU).
	GPU    int    `json:"gpu"`
	UUID   string `json:"uuid,omitempty"`
	BusID  string `json:"bus_id,omitempty"`
	Xid    uint64 `json:"xid,omitempty"`
	Count  uint64 `json:"count,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Action is what the agent did: replace (drained, jobs requeued,
	// instance handed back), note or ignore.
	Action string `json:"action"`
	// Reason is the Slurm node reason set (replace).
	Reason string `json:"reason,omitempty"`
	// Jobs ran on the node when the event was found.
	Jobs []uint32 `json:"jobs,omitempty"`
	// Gate is true for a finding of the boot gate (before slurmd started).
	Gate bool `json:"gate,omitempty"`
}

// GPUHealthRow is a stored GPU health event with where it happened.
type GPUHealthRow struct {
	InstanceID   string    `json:"instance_id"`
	Node         string    `json:"node"`
	InstanceType string    `json:"instance_type,omitempty"`
	Zone         string    `json:"zone,omitempty"`
	Event        GPUHealth `json:"event"`
}
