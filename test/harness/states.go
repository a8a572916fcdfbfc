package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// TerminalJobStates are the states a job ends in (it leaves none of them).
var TerminalJobStates = []string{"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"}

// JobState returns a job's JobState from scontrol (e.g. PENDING, RUNNING,
// COMPLETED) and its Reason.
func (c *Cluster) JobState(ctx context.Context, jobID string) (state, reason string, err error) {
	out, err := c.Run(ctx, "scontrol", "show", "job", "-o", jobID)
	if err != nil {
		return "", "", err
	}
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "JobState="); ok {
			state = v
		}
		if v, ok := strings.CutPrefix(f, "Reason="); ok {
			reason = v
		}
	}
	if state == "" {
		return "", "", fmt.Errorf("reading state of job %s: no JobState in %q", jobID, out)
	}
	return state, reason, nil
}

// WaitJobState polls (every 200 ms) until the job is in one of states and
// returns it. It fails early when the job ends in a state not wanted, and
// when ctx ends (the error then includes the last state and reason).
func (c *Cluster) WaitJobState(ctx context.Context, jobID string, states ...string) (string, error) {
	var last, reason string
	for {
		st, r, err := c.JobState(ctx, jobID)
		if err == nil {
			last, reason = st, r
			if slices.Contains(states, st) {
				return st, nil
			}
			if slices.Contains(TerminalJobStates, st) {
				return st, fmt.Errorf("waiting for job %s to be %v: it ended %s (reason %s); see %s", jobID, states, st, r, c.SlurmctldLog())
			}
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("waiting for job %s to be %v: %w (last state %q reason %q); see %s", jobID, states, ctx.Err(), last, reason, c.SlurmctldLog())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// NodeState returns sinfo's compact state of a node, e.g. "idle~", "mix",
// "alloc#", "down~".
func (c *Cluster) NodeState(ctx context.Context, name string) (string, error) {
	out, err := c.Run(ctx, "sinfo", "-h", "-N", "-n", name, "-o", "%T")
	if err != nil {
		return "", err
	}
	f := strings.Fields(out)
	if len(f) == 0 {
		return "", fmt.Errorf("reading state of node %s: sinfo printed nothing (unknown node?)", name)
	}
	return f[0], nil
}

// WaitNodeState polls (every 200 ms) until NodeState is one of states.
func (c *Cluster) WaitNodeState(ctx context.Context, name string, states ...string) (string, error) {
	var last string
	for {
		if st, err := c.NodeState(ctx, name); err == nil {
			last = st
			if slices.Contains(states, st) {
				return st, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("waiting for node %s to be %v: %w (last state %q); see %s", name, states, ctx.Err(), last, c.SlurmctldLog())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
