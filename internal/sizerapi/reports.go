package sizerapi

import (
	"time"
)

// GPUReading is one GPU in one sampling tick (burst-agent reads it through
// NVML, agent/gpu), with the Slurm jobs whose processes run on it.
type GPUReading struct {
	Time             time.Time `json:"time,omitzero"`
	Index            int       `json:"index"`
	UUID             string    `json:"uuid,omitempty"`
	Name             string    `json:"name,omitempty"`
	UtilPercent      uint32    `json:"util_percent"`
	MemoryUsedBytes  uint64    `json:"memory_used_bytes"`
	MemoryTotalBytes uint64    `json:"memory_total_bytes"`
	PowerWatts       float64   `json:"power_watts,omitempty"`
	TemperatureC     uint32    `json:"temperature_c,omitempty"`
	// PIDs are the compute processes running on the GPU.
	PIDs   []int    `json:"pids,omitempty"`
	JobIDs []uint32 `json:"job_ids,omitempty"`
}

// JobSummary is one job's GPU use on one node, from its first to its last
// sample, sent when the job ends.
type JobSummary struct {
	JobID uint32    `json:"job_id"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	GPUs  []string  `json:"gpus"` // UUIDs
	// PeakMemoryBytes is the highest memory used on any one of its GPUs.
	PeakMemoryBytes  uint64  `json:"peak_memory_bytes"`
	MemoryTotalBytes uint64  `json:"memory_total_bytes"` // of that GPU model
	MeanUtilPercent  float64 `json:"mean_util_percent"`
	P95UtilPercent   float64 `json:"p95_util_percent"`
	GPUSeconds       float64 `json:"gpu_seconds"`
	// IdleGPUSeconds counts GPU samples below the agent's idle threshold.
	IdleGPUSeconds float64 `json:"idle_gpu_seconds"`
}

// Event is a spot interruption (or rebalance) the agent (or the sizer) handled.
type Event struct {
	InstanceID string    `json:"instance_id"`
	Action     string    `json:"action"` // terminate, stop, hibernate, rebalance
	NoticeTime time.Time `json:"notice_time"`
	// Deadline is when EC2 reclaims the instance (zero for rebalance).
	Deadline time.Time  `json:"deadline,omitzero"`
	Jobs     []JobEvent `json:"jobs,omitempty"`
	Error    string     `json:"error,omitempty"`
}

// JobEvent is what happened to one job during an interruption.
type JobEvent struct {
	JobID        uint32        `json:"job_id"`
	Signal       string        `json:"signal"`
	Checkpointed bool          `json:"checkpointed"`
	Waited       time.Duration `json:"waited_ns"`
	Requeued     bool          `json:"requeued"`
	Released     bool          `json:"released"`
	// Note says why nothing was done (the job was requeued already).
	Note  string `json:"note,omitempty"`
	Error string `json:"error,omitempty"`
}

// Kind says what a Record carries.
type Kind string

// Record kinds.
const (
	KindGPU          Kind = "gpu"          // one sampling tick: GPUs
	KindJobSummary   Kind = "job_summary"  // a job ended: Summary
	KindInterruption Kind = "interruption" // a spot notice was handled: Event
)

// Record is one reported item. Seq is assigned by the agent's spool: it
// increases by one per record per node, survives agent restarts, and is how
// the server drops duplicates (a batch is resent when the agent dies between
// sending it and recording the acknowledgement).
type Record struct {
	Seq     uint64       `json:"seq"`
	Time    time.Time    `json:"time"`
	Kind    Kind         `json:"kind"`
	GPUs    []GPUReading `json:"gpus,omitempty"`
	Summary *JobSummary  `json:"summary,omitempty"`
	Event   *Event       `json:"event,omitempty"`
	// Health is the GPU health event of a KindGPUHealth record.
	Health *GPUHealth `json:"health,omitempty"`
}

// GPU sources of a report batch (ReportBatch.GPUSource).
const (
	GPUSourceNVML = "nvml" // real GPUs read through NVML
	GPUSourceSim  = "sim"  // simulated GPUs (burst-agent --gpu-source sim): never learned from unless the sizer is a test stack
)

// ReportBatch is what an agent posts: records in Seq order. Node and
// InstanceID, when set, must be the credential's own.
type ReportBatch struct {
	Node string `json:"node"`
	// InstanceID is the EC2 instance the records come from. Records are
	// deduplicated by instance, node and seq (seq restarts on a new
	// instance that reuses the node name). The server attaches the
	// identity it trusts (the node credential's, once credentials carry
	// it) before storing.
	InstanceID string `json:"instance_id,omitempty"`
	// GPUSource says where the GPU readings come from: GPUSourceNVML or
	// GPUSourceSim. Anything else (an agent older than the field) is
	// treated as not real.
	GPUSource string `json:"gpu_source,omitempty"`
	// Dropped counts records this node ever dropped because its on-disk
	// buffer was full (their Seqs never arrive).
	Dropped uint64   `json:"dropped"`
	Records []Record `json:"records"`
}

// ReportResult says how many records were new and how many were duplicates
// of records already stored (resent batches).
type ReportResult struct {
	Accepted   int `json:"accepted"`
	Duplicates int `json:"duplicates"`
	// Refused counts records the sizer would not store (samples or
	// summaries of jobs that did not run on this node, interruptions of
	// another instance or with a time in the future); Problems says why
	// (the first few).
	Refused  int      `json:"refused,omitempty"`
	Problems []string `json:"problems,omitempty"`
	// Ignored counts accepted GPU records not used for learning because
	// they are simulated (the sizer learns from real GPUs only).
	Ignored int `json:"ignored,omitempty"`
}

// Interruption is a spot interruption (or rebalance) notice for an
// instance. From a node credential the sizer takes instance, node, type and
// zone from its own records of the credential's instance (a body naming
// another is refused) and refuses a time in the future.
type Interruption struct {
	InstanceID   string    `json:"instance_id"`
	Node         string    `json:"node"`
	InstanceType string    `json:"instance_type,omitempty"` // filled from the launch record when empty
	Zone         string    `json:"zone,omitempty"`
	Action       string    `json:"action,omitempty"`
	Time         time.Time `json:"time"`
}
