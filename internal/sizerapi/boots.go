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
	// PhaseSlurmd ends when slurmd has started (after the boot guard);
	// PhaseRegister ends when slurmctld sees the node registered.
	PhaseSlurmd   = "slurmd"
	PhaseRegister = "register"
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

// End is when the named bootstrap step ended, on the node's clock: Started
// plus the steps up to and including it (they run one after another); false
// when the report has no such step or it failed or was skipped.
func (b BootReport) End(step string) (time.Time, bool) {
	if b.Started.IsZero() {
		return time.Time{}, false
	}
	t := b.Started
	for _, ph := range b.Phases {
		if ph.Name == PhaseEC2 || ph.Name == PhaseTotal {
			continue // not steps: before the start, and the whole
		}
		t = t.Add(time.Duration(ph.Seconds * float64(time.Second)))
		if ph.Name == step {
			return t, !ph.Failed && !ph.Skipped
		}
	}
	return time.Time{}, false
}
