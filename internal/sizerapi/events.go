package sizerapi

import (
	"time"
)

// Job is what a job asked for: its owner and allocation (burst-resume sends
// it with the launch, InstanceEvent.Job, so usage is tied to user and job name).
type Job struct {
	JobID       string `json:"job_id"`
	JobName     string `json:"job_name"`
	User        string `json:"user"`
	Account     string `json:"account"`
	Class       string `json:"class,omitempty"`
	GPUModel    string `json:"gpu_model,omitempty"`
	GPUsPerNode int    `json:"gpus_per_node"`
	Nodes       int    `json:"nodes,omitempty"`
	// GPUMemoryMiB is the memory of one of the job's GPUs.
	GPUMemoryMiB int `json:"gpu_memory_mib,omitempty"`
	// Attempt is Slurm's restart count of the job + 1 (requeues = attempts - 1).
	Attempt int `json:"attempt,omitempty"`
	// Comment is the job's --comment (its burst: metadata), for the
	// recurring-job key.
	Comment string `json:"comment,omitempty"`
}

// JobStart is a job starting on burst nodes (PrologSlurmctld; a warm-reused
// node's job too): it enters the history of its recurring job.
type JobStart struct {
	Job
	NodeList string    `json:"node_list,omitempty"` // Slurm hostlist
	Start    time.Time `json:"start"`
	Restarts int       `json:"restarts,omitempty"`
	// Submit is Slurm's submit time of the attempt that starts (Slurm
	// gives a requeued job a new one): the start of the job's wait.
	Submit time.Time `json:"submit,omitzero"`
}

// JobEnd is how a job ended (EpilogSlurmctld).
type JobEnd struct {
	JobID    string    `json:"job_id"`
	End      time.Time `json:"end"`
	ExitCode int       `json:"exit_code"`
	Signal   int       `json:"signal,omitempty"`
	// OOM is set when the job's output shows it ran out of GPU memory
	// (Evidence says what was found where).
	OOM      bool   `json:"oom,omitempty"`
	Evidence string `json:"evidence,omitempty"`
}

// InstanceEvent is a launch (all fields) or a termination (InstanceID, Time).
type InstanceEvent struct {
	InstanceID   string    `json:"instance_id"`
	Node         string    `json:"node,omitempty"`
	InstanceType string    `json:"instance_type,omitempty"`
	Zone         string    `json:"zone,omitempty"`
	Capacity     string    `json:"capacity,omitempty"`  // spot or on-demand
	PriceUSD     float64   `json:"price_usd,omitempty"` // per hour; 0: the server prices it from the catalog
	Account      string    `json:"account,omitempty"`
	User         string    `json:"user,omitempty"`
	Time         time.Time `json:"time"`
	Job          *Job      `json:"job,omitempty"`
	// Source of a termination's time: SourceBurst (default) when burst saw
	// TerminateInstances accepted, SourceEC2 for EC2's own transition time.
	Source string `json:"source,omitempty"`
	// Reason is EC2's StateReason code of a termination, when known.
	Reason string `json:"reason,omitempty"`
	// Reservation is the capacity reservation (an On-Demand Capacity
	// Reservation or a Capacity Block, its cr- id) a launch runs in.
	Reservation string `json:"reservation,omitempty"`
}
