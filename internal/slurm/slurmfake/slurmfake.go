// Package slurmfake is a stateful in-memory slurm.Client for unit tests of
// the code above the Slurm seam (lifecycle, reconciler, agent). It keeps
// jobs and nodes, applies what callers ask (requeue puts a job back to
// PENDING, hold records the reason, node updates set reason, comment and
// address), records every call in a readable log, and returns injected
// errors. It models the answers burst relies on, not Slurm's scheduler: real
// slurmctld behaviour is covered by the tests against real Slurm
// (internal/slurm, test/e2e).
package slurmfake

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/burst-hpc/burst/internal/slurm"
)

// Slurm is the fake. The zero value is an empty cluster; it is safe for
// concurrent use.
type Slurm struct {
	mu    sync.Mutex
	jobs  []slurm.Job
	nodes []slurm.Node
	calls []string
	ups   []slurm.NodeUpdate
	reads [][]uint32 // the ids of each Jobs call

	// PingErr, JobsErr, NodesErr and UpdateErr are returned by their method
	// when set (UpdateErr after recording the call).
	PingErr, JobsErr, NodesErr, UpdateErr error
	// RequeueErr fails Requeue for the given jobs (the job stays as it is).
	RequeueErr map[uint32]error
}

var _ slurm.Client = (*Slurm)(nil)

// New returns a fake holding jobs and nodes.
func New(jobs []slurm.Job, nodes []slurm.Node) *Slurm {
	return &Slurm{jobs: slices.Clone(jobs), nodes: slices.Clone(nodes)}
}

// SetJobs replaces the jobs.
func (s *Slurm) SetJobs(jobs ...slurm.Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs = slices.Clone(jobs)
}

// SetNodes replaces the nodes.
func (s *Slurm) SetNodes(nodes ...slurm.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes = slices.Clone(nodes)
}

// Job returns job id as the fake holds it now.
func (s *Slurm) Job(id uint32) (slurm.Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.jobIndex(id); i >= 0 {
		return s.jobs[i], true
	}
	return slurm.Job{}, false
}

// Node returns node name as the fake holds it now.
func (s *Slurm) Node(name string) (slurm.Node, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.nodes {
		if n.Name == name {
			return n, true
		}
	}
	return slurm.Node{}, false
}

// Calls is the log of changing calls, in order: "update NAMES STATE REASON |
// COMMENT", "requeue ID", "startnow ID", "hold ID REASON", "release ID",
// "signal ID SIG [batch]", "admincomment ID TEXT".
func (s *Slurm) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// JobReads are the ids each Jobs call asked for (nil: all jobs), in order:
// what full job records the code under test read.
func (s *Slurm) JobReads() [][]uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reads)
}

// Updates are the node updates asked for, in order.
func (s *Slurm) Updates() []slurm.NodeUpdate {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ups)
}

func (s *Slurm) jobIndex(id uint32) int {
	return slices.IndexFunc(s.jobs, func(j slurm.Job) bool { return j.ID == id })
}

func (s *Slurm) log(format string, args ...any) {
	s.calls = append(s.calls, fmt.Sprintf(format, args...))
}

// Ping implements slurm.Client.
func (s *Slurm) Ping(context.Context) error { return s.PingErr }

// Jobs implements slurm.Client: the given jobs (all when none), unknown ids
// left out.
func (s *Slurm) Jobs(_ context.Context, ids ...uint32) ([]slurm.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads = append(s.reads, slices.Clone(ids))
	if s.JobsErr != nil {
		return nil, s.JobsErr
	}
	var out []slurm.Job
	for _, j := range s.jobs {
		if len(ids) == 0 || slices.Contains(ids, j.ID) {
			out = append(out, j)
		}
	}
	return out, nil
}

// JobStates implements slurm.Client: the brief states of the jobs q
// selects, as they are now (a requeued job is PENDING).
func (s *Slurm) JobStates(_ context.Context, q slurm.JobFilter) ([]slurm.JobState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.JobsErr != nil {
		return nil, s.JobsErr
	}
	var out []slurm.JobState
	for _, j := range s.jobs {
		if q.Matches(j) {
			out = append(out, j.Brief())
		}
	}
	if q.Max > 0 {
		// squeue --sort=-p: the fake knows no priorities but that a held
		// job's is 0, so held jobs go last; then the first Max
		slices.SortStableFunc(out, func(a, b slurm.JobState) int {
			return cmpBool(strings.HasPrefix(a.Reason, "JobHeld"), strings.HasPrefix(b.Reason, "JobHeld"))
		})
		out = out[:min(len(out), q.Max)]
	}
	return out, nil
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// Nodes implements slurm.Client: the named nodes (all when none), unknown
// names left out.
func (s *Slurm) Nodes(_ context.Context, names ...string) ([]slurm.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.NodesErr != nil {
		return nil, s.NodesErr
	}
	var out []slurm.Node
	for _, n := range s.nodes {
		if len(names) == 0 || slices.Contains(names, n.Name) {
			out = append(out, n)
		}
	}
	return out, nil
}

// UpdateNodes implements slurm.Client: each update is logged and its
// reason, comment, extra and address applied to the nodes it names (plain
// names only; the state is logged, not simulated). As scontrol, it fails
// on a context already done.
func (s *Slurm) UpdateNodes(ctx context.Context, updates ...slurm.NodeUpdate) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("updating nodes: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range updates {
		s.ups = append(s.ups, u)
		s.log("update %s %s %s | %s", strings.Join(u.Names, ","), u.State, u.Reason, u.Comment)
		for i := range s.nodes {
			n := &s.nodes[i]
			if !slices.Contains(u.Names, n.Name) {
				continue
			}
			set := func(dst *string, v string) {
				if v != "" {
					*dst = v
				}
			}
			set(&n.Reason, u.Reason)
			set(&n.Comment, u.Comment)
			set(&n.Extra, u.Extra)
			set(&n.Addr, u.Addr)
			set(&n.Hostname, u.Hostname)
		}
	}
	return s.UpdateErr
}

// Requeue implements slurm.Client: the job is PENDING again, with no nodes
// and its restart count up by one.
func (s *Slurm) Requeue(_ context.Context, id uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log("requeue %d", id)
	if err := s.RequeueErr[id]; err != nil {
		return err
	}
	i := s.jobIndex(id)
	if i < 0 {
		return fmt.Errorf("requeueing job %d: %w", id, slurm.ErrNotFound)
	}
	j := &s.jobs[i]
	j.State, j.Nodes, j.Reason, j.RestartCount = "PENDING", "", "BeginTime", j.RestartCount+1
	return nil
}

// StartNow implements slurm.Client.
func (s *Slurm) StartNow(_ context.Context, id uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log("startnow %d", id)
	if i := s.jobIndex(id); i >= 0 && s.jobs[i].Reason == "BeginTime" {
		s.jobs[i].Reason = "None"
	}
	return nil
}

// Hold implements slurm.Client: the job is held with the reason as its
// AdminComment.
func (s *Slurm) Hold(_ context.Context, id uint32, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log("hold %d %s", id, reason)
	if i := s.jobIndex(id); i >= 0 {
		s.jobs[i].Reason = "JobHeldAdmin"
		if reason != "" {
			s.jobs[i].AdminComment = reason
		}
	}
	return nil
}

// RequeueHold requeues a job that has nodes and holds it with the reason.
func (s *Slurm) RequeueHold(_ context.Context, id uint32, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log("requeuehold %d %s", id, reason)
	if i := s.jobIndex(id); i >= 0 {
		s.jobs[i].State, s.jobs[i].Nodes, s.jobs[i].Reason = "PENDING", "", "JobHeldAdmin"
		s.jobs[i].RestartCount++
		if reason != "" {
			s.jobs[i].AdminComment = reason
		}
	}
	return nil
}

// Release implements slurm.Client.
func (s *Slurm) Release(_ context.Context, id uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log("release %d", id)
	if i := s.jobIndex(id); i >= 0 && s.jobs[i].Reason == "JobHeldAdmin" {
		s.jobs[i].Reason = "None"
	}
	return nil
}

// Signal implements slurm.Client.
func (s *Slurm) Signal(_ context.Context, id uint32, sig string, batchOnly bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if batchOnly {
		s.log("signal %d %s batch", id, sig)
	} else {
		s.log("signal %d %s", id, sig)
	}
	return nil
}
