package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/classmatch"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/slurm"
)

// Releaser is the EpilogSlurmctld mode of burst-suspend: event-driven
// release of a finished job's nodes.
type Releaser struct {
	Cfg   *config.Config
	Slurm Slurm
	Log   *slog.Logger
	// Linger starts a detached process that powers nodes down after the
	// warm-reuse window unless a job took them (see Linger).
	Linger func(nodes []string, until time.Time, waiting []uint32) error
	Now    func() time.Time
}

// Release powers the job's nodes down now (POWER_DOWN_ASAP: Slurm calls
// SuspendProgram within a second), except nodes a waiting job could use
// within the warm-reuse window, which stay up for that window.
func (r *Releaser) Release(ctx context.Context, jobID uint32, nodelist string) (kept, released []string, err error) {
	log, now := logOr(r.Log), nowOr(r.Now)
	if !r.Cfg.Teardown.ReleaseOnCompletion || nodelist == "" {
		return nil, nil, nil
	}
	nodes, err := hostlist.Expand(nodelist)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the job's node list %q: %w", nodelist, err)
	}
	var ours []string
	for _, n := range nodes {
		if _, ok := r.Cfg.ClassOfNode(n); ok {
			ours = append(ours, n)
		}
	}
	if len(ours) == 0 {
		return nil, nil, nil
	}
	ours, states := r.notGoingDown(ctx, ours)
	if len(ours) == 0 {
		return nil, nil, nil
	}
	// a job burst requeued after losing a node keeps its other nodes for
	// its relaunch
	held, ours, lost, note := r.requeueHold(ctx, jobID, ours, states)
	if len(lost) > 0 {
		log.Info("leaving the lost nodes of the requeued job to the interruption handler", "job", jobID, "nodes", lost, "requeued_by", note.By)
	}
	if len(held) > 0 {
		until := now().Add(r.Cfg.Teardown.RequeueHold.Duration)
		if err := r.Linger(held, until, []uint32{jobID}); err != nil {
			log.Warn("cannot hold the surviving nodes for the requeued job; releasing them", "job", jobID, "nodes", held, "err", err)
			ours = append(ours, held...)
		} else {
			log.Info("holding the surviving nodes for the requeued job's relaunch", "job", jobID, "nodes", held,
				"lost", note.Lost, "requeued_by", note.By, "until", until)
			kept = append(kept, held...)
		}
	}
	// a drained node (a rebalance recommendation, an admin) is never kept warm
	var keepable []string
	for _, n := range ours {
		if healthy(states, n) {
			keepable = append(keepable, n)
		} else {
			released = append(released, n)
		}
	}
	if w := r.Cfg.Teardown.WarmReuse.Duration; w > 0 && r.Linger != nil && len(keepable) > 0 {
		pending, err := waitingJobs(ctx, r.Slurm, jobID)
		if err != nil {
			log.Warn("listing pending jobs for warm reuse; releasing", "err", err)
		}
		k, rel, waiting := r.keepFor(pending, jobID, keepable)
		released = append(released, rel...)
		if len(k) > 0 {
			if err := r.Linger(k, now().Add(w), waiting); err != nil {
				log.Warn("cannot keep nodes warm; releasing them", "err", err)
				released = append(released, k...)
			} else {
				kept = append(kept, k...)
			}
		}
	} else {
		released = append(released, keepable...)
	}
	if len(released) == 0 {
		return kept, nil, nil
	}
	ups := powerDownUpdates(jobID, released, states)
	err = r.Slurm.UpdateNodes(ctx, ups...)
	log.Info("released at job end", "job", jobID, "nodes", strings.Join(released, ","), "err", err)
	return kept, released, err
}

// notGoingDown are the nodes not already on their way down, and Slurm's
// view of the nodes (nil when Slurm could not be asked): nodes already on
// their way down (a failed resume handed them back with its reason) keep
// that reason: it is what the admin needs to see.
func (r *Releaser) notGoingDown(ctx context.Context, ours []string) ([]string, map[string]slurm.Node) {
	var states map[string]slurm.Node
	if ns, err := r.Slurm.Nodes(ctx, ours...); err == nil {
		states = map[string]slurm.Node{}
		down := map[string]bool{}
		for _, n := range ns {
			states[n.Name] = n
			if n.HasFlag("POWER_DOWN") || n.HasFlag("POWERING_DOWN") || n.HasFlag("POWERED_DOWN") {
				down[n.Name] = true
			}
		}
		var up []string
		for _, n := range ours {
			if !down[n] {
				up = append(up, n)
			}
		}
		ours = up
	}
	return ours, states
}

// powerDownUpdates power the released nodes down, grouped by reason: a
// drained node keeps burst's reason for draining it (a spot interruption,
// a rebalance recommendation): it says why it left.
func powerDownUpdates(jobID uint32, released []string, states map[string]slurm.Node) []slurm.NodeUpdate {
	ended := fmt.Sprintf("burst: job %d ended", jobID)
	byReason := map[string][]string{}
	var reasons []string
	for _, n := range released {
		reason := ended
		if st, ok := states[n]; ok && st.HasFlag("DRAIN") && strings.HasPrefix(st.Reason, "burst: ") {
			reason = st.Reason
		}
		if _, ok := byReason[reason]; !ok {
			reasons = append(reasons, reason)
		}
		byReason[reason] = append(byReason[reason], n)
	}
	var ups []slurm.NodeUpdate
	for _, reason := range reasons {
		hl, herr := hostlist.Compress(byReason[reason])
		if herr != nil {
			hl = strings.Join(byReason[reason], ",")
		}
		ups = append(ups, slurm.NodeUpdate{Names: []string{hl}, State: "POWER_DOWN_ASAP", Reason: reason})
	}
	return ups
}

// keepFor splits a finished job's nodes into those kept for waiting jobs
// and those released. A waiting job (pending, no nodes yet, not held or
// waiting on a dependency or begin time) gets up to as many of the nodes as
// it asks for, of a class that fits it exactly (internal/classmatch:
// constraint over whole feature names, partition, GRES, --gpus); a
// multi-node job may get several, and Slurm powers up the rest it needs.
func (r *Releaser) keepFor(jobs []slurm.Job, done uint32, nodes []string) (kept, released []string, waiting []uint32) {
	byClass := map[string][]string{}
	var order []string
	for _, n := range nodes {
		cl, _ := r.Cfg.ClassOfNode(n)
		if _, ok := byClass[cl.Name]; !ok {
			order = append(order, cl.Name)
		}
		byClass[cl.Name] = append(byClass[cl.Name], n)
	}
	claimed := map[uint32]bool{}
	log := logOr(r.Log)
	for _, name := range order {
		cl, _ := r.Cfg.Class(name)
		free := byClass[name]
		for _, j := range jobs {
			if len(free) == 0 {
				break
			}
			if j.ID == done || claimed[j.ID] || j.State != "PENDING" || j.Nodes != "" {
				continue
			}
			if !waitingReason(j.Reason) {
				continue // held, dependency, begin time, ...
			}
			if ok, why := classmatch.Fits(r.Cfg, cl, j); !ok {
				log.Debug("a waiting job does not fit the class", "waiting_job", j.ID, "class", cl.Name, "why", why)
				continue
			}
			k := min(classmatch.Nodes(j), len(free))
			for _, n := range free[:k] {
				log.Info("keeping node warm for a waiting job", "node", n, "job", done, "waiting_job", j.ID, "waiting_job_nodes", classmatch.Nodes(j))
			}
			kept = append(kept, free[:k]...)
			free = free[k:]
			claimed[j.ID] = true
			waiting = append(waiting, j.ID)
		}
		released = append(released, free...)
	}
	return kept, released, waiting
}

// maxWarmCandidates bounds the jobs Release reads in full for warm reuse,
// and maxWarmScan the pending jobs' states it reads to find them (the
// highest priority first: held jobs, priority 0, last), so the scan costs
// the same whatever the queue's length.
const (
	maxWarmCandidates = 200
	maxWarmScan       = 1000
)

// waitingJobs returns the pending jobs that could take a warm node: waiting
// for resources or priority, no nodes yet, not the job that ended. It lists
// states of the maxWarmScan highest-priority pending jobs first (one small
// call, however many jobs are queued, held or waiting for their begin time)
// and reads only those candidates in full (at most maxWarmCandidates, in
// squeue's order: highest priority first).
func waitingJobs(ctx context.Context, sl Slurm, done uint32) ([]slurm.Job, error) {
	states, err := sl.JobStates(ctx, slurm.JobFilter{States: []string{"PENDING"}, Max: maxWarmScan})
	if err != nil {
		return nil, err
	}
	var ids []uint32
	for _, s := range states {
		if s.ID == done || s.Nodes != "" || !waitingReason(s.Reason) {
			continue
		}
		if ids = append(ids, s.ID); len(ids) == maxWarmCandidates {
			break
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	jobs, err := sl.Jobs(ctx, ids...)
	if err != nil {
		return nil, err
	}
	// keep squeue's order
	pos := map[uint32]int{}
	for i, id := range ids {
		pos[id] = i
	}
	slices.SortStableFunc(jobs, func(a, b slurm.Job) int { return pos[a.ID] - pos[b.ID] })
	return jobs, nil
}

// waitingReason: a pending job with this reason would start on a free node
// (not held, not waiting for a dependency or its begin time).
func waitingReason(r string) bool {
	switch r {
	case "Resources", "Priority", "None", "":
		return true
	}
	return false
}

// Poke makes Slurm schedule the waiting jobs as soon as the warm nodes are
// idle. Slurm's main scheduler runs on events; once a finished job's node
// leaves COMPLETING nothing schedules until the next periodic pass (up to
// 30 s), so the node would sit idle. Updating a waiting job is such an
// event (`scontrol update jobid=N starttime=now`, harmless for an eligible
// job). A job requeued after a spot interruption is still COMPLETING while
// its epilog runs; Poke waits for it to be pending again too, and the same
// update clears the ~120 s BeginTime hold Slurm gives a requeued job.
func Poke(ctx context.Context, sl interface {
	Slurm
	StartNow(ctx context.Context, jobID uint32) error
}, nodes []string, waiting []uint32, log *slog.Logger) {
	log = logOr(log)
	end := time.Now().Add(15 * time.Second)
	for time.Now().Before(end) {
		ns, err := sl.Nodes(ctx, nodes...)
		idle := err == nil && len(ns) > 0
		for _, n := range ns {
			if n.State != "IDLE" || n.HasFlag("COMPLETING") {
				idle = false
			}
		}
		if idle {
			js, err := sl.Jobs(ctx, waiting...)
			for _, j := range js {
				if j.State != "PENDING" {
					idle = false
				}
			}
			if err == nil && idle {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, j := range waiting {
		if err := sl.StartNow(ctx, j); err != nil {
			log.Warn("poking the scheduler for a waiting job", "job", j, "err", err)
		}
	}
	log.Info("warm nodes idle; scheduler poked", "nodes", strings.Join(nodes, ","), "waiting_jobs", waiting)
}

// LingerOnce powers down the nodes that are still idle; run by the detached
// process Releaser.Linger starts, after the warm-reuse window.
func LingerOnce(ctx context.Context, sl Slurm, nodes []string, log *slog.Logger) ([]string, error) {
	log = logOr(log)
	ns, err := sl.Nodes(ctx, nodes...)
	if err != nil {
		return nil, fmt.Errorf("reading node states: %w", err)
	}
	var idle []string
	for _, n := range ns {
		if n.State == "IDLE" && !isBusy(n) {
			idle = append(idle, n.Name)
		}
	}
	if len(idle) == 0 {
		log.Info("warm nodes were reused", "nodes", strings.Join(nodes, ","))
		return nil, nil
	}
	err = sl.UpdateNodes(ctx, slurm.NodeUpdate{Names: idle, State: "POWER_DOWN_ASAP", Reason: "burst: warm-reuse window over"})
	log.Info("warm-reuse window over", "released", strings.Join(idle, ","), "err", err)
	return idle, err
}
