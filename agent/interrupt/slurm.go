package interrupt

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/jobmeta"
	"github.com/burst-hpc/burst/internal/slurm"
)

// SlurmClient adapts internal/slurm's Client to SlurmOps.
type SlurmClient struct {
	C slurm.Client
}

var _ SlurmOps = SlurmClient{}

// JobsOnNode lists RUNNING and CONFIGURING (Starting) jobs whose allocation
// includes node, with the
// checkpoint_signal of their burst metadata (invalid metadata is ignored:
// the default signal is used).
func (s SlurmClient) JobsOnNode(ctx context.Context, node string) ([]Job, error) {
	// the node's running jobs first (one small call), then only those in full
	states, err := s.C.JobStates(ctx, slurm.JobFilter{Nodes: []string{node}, States: []string{"RUNNING", "CONFIGURING"}})
	if err != nil || len(states) == 0 {
		return nil, err
	}
	ids := make([]uint32, 0, len(states))
	for _, st := range states {
		ids = append(ids, st.ID)
	}
	jobs, err := s.C.Jobs(ctx, ids...)
	if err != nil {
		return nil, err
	}
	var out []Job
	for _, j := range jobs {
		if (j.State != "RUNNING" && j.State != "CONFIGURING") || j.Nodes == "" {
			continue
		}
		names, err := hostlist.Expand(j.Nodes)
		if err != nil {
			return nil, fmt.Errorf("expanding nodes %q of job %d: %w", j.Nodes, j.ID, err)
		}
		if !slices.Contains(names, node) {
			continue
		}
		md, _ := jobmeta.ParseMetadata(j.Comment)
		out = append(out, Job{ID: j.ID, RestartCount: j.RestartCount, CheckpointSignal: md.CheckpointSignal, Starting: j.State == "CONFIGURING"})
	}
	return out, nil
}

// Signal implements SlurmOps.
func (s SlurmClient) Signal(ctx context.Context, id uint32, sig string, batchOnly bool) error {
	return s.C.Signal(ctx, id, sig, batchOnly)
}

// Requeue implements SlurmOps.
func (s SlurmClient) Requeue(ctx context.Context, id uint32) error { return s.C.Requeue(ctx, id) }

// StartNow implements SlurmOps. Slurm applies the requeue (and its ~120 s
// BeginTime hold) only once the job's processes are gone, after
// `scontrol requeue` returns; clearing the hold before that is undone. So it
// waits (up to 10 s: the requeue usually lands within a second) until the
// job is PENDING again, then clears the hold.
func (s SlurmClient) StartNow(ctx context.Context, id uint32) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		js, err := s.C.JobStates(ctx, slurm.JobFilter{IDs: []uint32{id}})
		if err == nil && (len(js) == 0 || js[0].State == "PENDING") {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return s.C.StartNow(ctx, id)
}

// DrainNode implements SlurmOps.
func (s SlurmClient) DrainNode(ctx context.Context, node, reason string) error {
	return s.C.UpdateNodes(ctx, slurm.NodeUpdate{Names: []string{node}, State: "DRAIN", Reason: reason})
}

// PowerDownForce implements SlurmOps.
func (s SlurmClient) PowerDownForce(ctx context.Context, node, reason string) error {
	return s.C.UpdateNodes(ctx, slurm.NodeUpdate{Names: []string{node}, State: "POWER_DOWN_FORCE", Reason: reason})
}
