package sizerapi

import (
	"time"
)

// Boot phase names in a BootReport, in boot order. The bootstrap's steps
// (internal/bootstrap) are phases too, under their own names (userdata,
// munge, mount: the FSx for Lustre mount, checkpoint-root, slurmd,
// register: slurmd start to slurmctld seeing the node, agent).
const (
	// PhaseEC2 is EC2 pending (the identity document's pendingTime) to the
	// bootstrap's start: pending to running plus the OS boot.
	PhaseEC2 = "ec2-pending-to-bootstrap"
	// PhaseTotal is the bootstrap from start to end.
	PhaseTotal = "bootstrap-total"
)

// BootReport is how one node booted, phase by phase; burst-agent bootstrap
// posts it to POST /v1/boots with the node's credential.
type BootReport struct {
	Node         string      `json:"node"`
	InstanceID   string      `json:"instance_id,omitempty"`
	InstanceType string      `json:"instance_type,omitempty"`
	PendingTime  time.Time   `json:"pending_time,omitempty"` // EC2 entered pending (zero: unknown)
	Started      time.Time   `json:"started"`                // the bootstrap started
	Phases       []BootPhase `json:"phases"`
	OK           bool        `json:"ok"`
}

// BootPhase is one phase of a boot.
type BootPhase struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	Skipped bool    `json:"skipped,omitempty"`
	Failed  bool    `json:"failed,omitempty"`
}
