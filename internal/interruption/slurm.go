package interruption

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/jobmeta"
	"github.com/burst-hpc/burst/internal/slurm"
)

// Job is a job with an allocation on the node.
type Job struct {
	ID           uint32
	RestartCount uint32
	// StartTime of this run (with RestartCount, names the run in a Note).
	StartTime time.Time
	// Nodes of the whole allocation.
	Nodes        []string
	AdminComment string
	// CheckpointSignal from the job's metadata; "" means Options.Signal.
	CheckpointSignal string
	// CheckpointTo: the batch shell (default) or every step.
	CheckpointTo jobmeta.CheckpointTarget
	// Rebalance: what a rebalance recommendation does to the job.
	Rebalance jobmeta.RebalanceAction
	// Starting: the job is allocated but not running yet (CONFIGURING while
	// its nodes boot): it has nothing to checkpoint and is requeued at once.
	Starting bool
}

// SlurmOps is what the handler needs from Slurm.
type SlurmOps interface {
	// JobsOnNode lists the running (and starting) jobs with an allocation
	// on node.
	JobsOnNode(ctx context.Context, node string) ([]Job, error)
	// Node returns the node as Slurm shows it (found=false when unknown).
	Node(ctx context.Context, name string) (slurm.Node, bool, error)
	// Signal sends sig (USR1, ...) to the job's batch shell when batchOnly,
	// else to every process of its steps.
	Signal(ctx context.Context, jobID uint32, sig string, batchOnly bool) error
	// Note sets the job's AdminComment.
	Note(ctx context.Context, jobID uint32, text string) error
	Requeue(ctx context.Context, jobID uint32) error
	// StartNow clears the BeginTime hold Slurm puts on a requeued job.
	StartNow(ctx context.Context, jobID uint32) error
	DrainNode(ctx context.Context, node, reason string) error
	PowerDownForce(ctx context.Context, node, reason string) error
}

// SlurmClient adapts internal/slurm's Client to SlurmOps.
type SlurmClient struct {
	C slurm.Client
}

var _ SlurmOps = SlurmClient{}

// JobsOnNode lists RUNNING and CONFIGURING (Starting) jobs whose allocation
// includes node, with what their burst metadata says about checkpoints
// (invalid metadata is ignored: the defaults apply).
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
		md, _ := jobmeta.ParseMetadata(jobmeta.Combine(j.Comment, j.Extra))
		out = append(out, Job{ID: j.ID, RestartCount: j.RestartCount, StartTime: j.StartTime, Nodes: names, AdminComment: j.AdminComment,
			CheckpointSignal: md.CheckpointSignal, CheckpointTo: md.CheckpointTo, Rebalance: md.Rebalance, Starting: j.State == "CONFIGURING"})
	}
	return out, nil
}

// Node implements SlurmOps.
func (s SlurmClient) Node(ctx context.Context, name string) (slurm.Node, bool, error) {
	ns, err := s.C.Nodes(ctx, name)
	if err != nil {
		return slurm.Node{}, false, err
	}
	for _, n := range ns {
		if n.Name == name {
			return n, true, nil
		}
	}
	return slurm.Node{}, false, nil
}

// Signal implements SlurmOps.
func (s SlurmClient) Signal(ctx context.Context, id uint32, sig string, batchOnly bool) error {
	return s.C.Signal(ctx, id, sig, batchOnly)
}

// Note implements SlurmOps.
func (s SlurmClient) Note(ctx context.Context, id uint32, text string) error {
	return s.C.SetAdminComment(ctx, id, text)
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
