// Package report turns GPU samples into batched, sequenced reports for the
// sizer, buffers them on disk while the sizer is unreachable, and summarises
// each job's GPU use when it ends.
package report

import (
	"context"
	"errors"
	"time"

	"github.com/burst-hpc/burst/agent/gpu"
)

// Kind says what a Record carries.
type Kind string

// Record kinds.
const (
	KindGPU          Kind = "gpu"          // one sampling tick: GPUs
	KindJobSummary   Kind = "job_summary"  // a job ended: Summary
	KindInterruption Kind = "interruption" // a spot notice was handled: Event
)

// Record is one reported item. Seq is assigned by the Spool: it increases
// by one per record per node, survives agent restarts, and is how the
// server drops duplicates (a batch is resent when the agent dies between
// sending it and recording the acknowledgement).
type Record struct {
	Seq     uint64       `json:"seq"`
	Time    time.Time    `json:"time"`
	Kind    Kind         `json:"kind"`
	GPUs    []GPUReading `json:"gpus,omitempty"`
	Summary *JobSummary  `json:"summary,omitempty"`
	Event   *Event       `json:"event,omitempty"`
}

// GPUReading is a GPU sample with the Slurm jobs of its processes.
type GPUReading struct {
	gpu.Sample
	JobIDs []uint32 `json:"job_ids,omitempty"`
}

// JobSummary is a job's GPU use on this node, from first to last sample.
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
	// IdleGPUSeconds counts GPU samples below the tracker's idle threshold.
	IdleGPUSeconds float64 `json:"idle_gpu_seconds"`
}

// Event is an interruption the agent handled.
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
	Error        string        `json:"error,omitempty"`
}

// Batch is what one Send carries: records in Seq order.
type Batch struct {
	Node       string `json:"node"`
	InstanceID string `json:"instance_id,omitempty"`
	// Dropped counts records this node ever dropped because the on-disk
	// buffer was full (their Seqs never arrive).
	Dropped uint64   `json:"dropped"`
	Records []Record `json:"records"`
}

// Sink delivers a batch to the sizer. A nil error means the server stored
// every record in it. An error wrapping ErrRejected means the server will
// never accept the batch (malformed); it is dropped and counted rather than
// retried forever. Any other error is retried at the next interval.
type Sink interface {
	Send(ctx context.Context, b Batch) error
}

// ErrRejected marks a batch the server refused permanently.
var ErrRejected = errors.New("batch rejected by server")
