package admit

import (
	"context"
	"fmt"
	"slices"

	"github.com/burst-hpc/burst/internal/slurm"
)

// Reader is the read side of slurm.Client that admission control uses.
type Reader interface {
	Jobs(ctx context.Context, ids ...uint32) ([]slurm.Job, error)
	JobStates(ctx context.Context, f slurm.JobFilter) ([]slurm.JobState, error)
}

// holdingStates are the states in which a job holds its nodes (running):
// the ones a limit counts.
var holdingStates = []string{"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED"}

// View is what a decision needs of Slurm's jobs, read in a bounded way
// however long the queue (the hooks used to read every job):
//
//   - the brief states of the jobs holding burst nodes (one squeue call
//     filtered by state and by Options.Nodes on every release: about 40
//     bytes a job, and none for the queue);
//   - in full, by ID: the jobs named (those being decided), the jobs
//     holding burst nodes that this cluster's entries do not account for
//     (they count against the limits with their own GPUs), the released
//     entries' jobs not running yet (is one held again?) and, with
//     withHeld (releasing), every entry's job not holding burst nodes (the
//     held ones; an admitted job held again).
//
// A job holding burst nodes that an admitted or released entry accounts
// for is given as its brief state with the entry's account and user: the
// entry holds its GPUs, nodes and reservation. The jobs Slurm does not
// show are left out, as Jobs leaves them out. Held jobs burst holds with
// no entry (the file lost; an over-budget hold of the sizing policy) are
// not read here: HeldWithoutEntry finds them.
func (c *Controller) View(ctx context.Context, sl Reader, withHeld bool, ids ...uint32) ([]slurm.Job, error) {
	es, err := c.read()
	if err != nil {
		return nil, fmt.Errorf("reading the admissions for Slurm's view: %w", err)
	}
	mine := map[uint32]Entry{}
	for _, e := range es {
		if e.Cluster == c.mine() {
			mine[e.JobID] = e
		}
	}
	var holding []slurm.JobState
	if len(c.o.Nodes) > 0 {
		holding, err = sl.JobStates(ctx, slurm.JobFilter{States: holdingStates, Nodes: c.o.Nodes})
		if err != nil {
			return nil, fmt.Errorf("reading the jobs on burst nodes: %w", err)
		}
	}
	full := map[uint32]bool{}
	for _, id := range ids {
		full[id] = true
	}
	isHolding := map[uint32]bool{}
	var brief []slurm.Job
	for _, s := range holding {
		isHolding[s.ID] = true
		if e, ok := mine[s.ID]; ok && e.State != StateHeld && !full[s.ID] {
			brief = append(brief, slurm.Job{ID: s.ID, State: s.State, Reason: s.Reason, Nodes: s.Nodes, NodeCount: s.NodeCount, Account: e.Account, User: e.User})
			continue
		}
		full[s.ID] = true // not accounted for: its own GPUs count
	}
	for id, e := range mine {
		if !isHolding[id] && (e.State == StateReleased || withHeld) {
			full[id] = true
		}
	}
	if len(full) == 0 {
		return brief, nil
	}
	want := make([]uint32, 0, len(full))
	for id := range full {
		want = append(want, id)
	}
	slices.Sort(want)
	jobs, err := sl.Jobs(ctx, want...)
	if err != nil {
		return nil, fmt.Errorf("reading %d jobs for admission control: %w", len(want), err)
	}
	return append(jobs, brief...), nil
}

// HeldWithoutEntry reads the jobs burst holds that have no entry here
// (the admissions were lost, or the sizing policy held an over-budget job
// without one): the brief states of the pending jobs (about 40 bytes a job
// of the queue), then in full those held and not entered. ReleaseHeld
// releases them outright, so that their resume decides again. burst-sizer's
// release loop asks, not the hooks.
func (c *Controller) HeldWithoutEntry(ctx context.Context, sl Reader) ([]slurm.Job, error) {
	pending, err := sl.JobStates(ctx, slurm.JobFilter{States: []string{"PENDING"}})
	if err != nil {
		return nil, fmt.Errorf("reading the pending jobs' states: %w", err)
	}
	es, err := c.read()
	if err != nil {
		return nil, fmt.Errorf("reading the admissions: %w", err)
	}
	entered := map[uint32]bool{}
	for _, e := range es {
		if e.Cluster == c.mine() {
			entered[e.JobID] = true
		}
	}
	var ids []uint32
	for _, s := range pending {
		if onHold(s.Reason) && !entered[s.ID] {
			ids = append(ids, s.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	jobs, err := sl.Jobs(ctx, ids...)
	if err != nil {
		return nil, fmt.Errorf("reading %d held jobs: %w", len(ids), err)
	}
	return slices.DeleteFunc(jobs, func(j slurm.Job) bool { return !heldByBurst(j) }), nil
}
