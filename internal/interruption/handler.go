package interruption

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/jobmeta"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

// Notice is one interruption notice for one node.
type Notice struct {
	Node       string
	InstanceID string // "" unknown
	// Action is EC2's: terminate, stop or hibernate (a spot interruption)
	// or rebalance.
	Action string
	// Time the notice was seen; Deadline when EC2 acts (zero unknown).
	Time, Deadline time.Time
	// Reason, if set, is the node's Slurm reason in place of Reason's
	// (a GPU fault: "gpu: Xid 79 on GPU 3 (0000:b3:00.0)").
	Reason string
}

// Options configure a Handler. Zero values take the defaults noted.
type Options struct {
	// CheckpointRoot holds one directory per job id ($BURST_CHECKPOINT_DIR).
	CheckpointRoot string
	// Signal is the default checkpoint signal; default USR1.
	Signal string
	// Grace is the longest wait for checkpoint markers; default 90 s.
	Grace time.Duration
	// Reserve is kept before EC2's deadline for requeueing and handing the
	// node back: the wait ends at Deadline-Reserve if that is sooner than
	// Grace; default 20 s.
	Reserve time.Duration
	// PollMarker is how often markers are checked; default 250 ms.
	PollMarker time.Duration
	// MarkerSkew: a marker written this long before the signal still counts
	// (the job's node and this one need not agree on the time to the
	// second, and the other notice path may have signalled just before);
	// default 5 s.
	MarkerSkew time.Duration
	// By says who acts, in notes and logs: "agent" or "sizer".
	By string
	// BeforeHandBack, if set, gets what happened to the jobs right before
	// the node is handed back (the agent reports it then: the hand-back
	// terminates its instance, and the unsent report with it).
	BeforeHandBack func(ctx context.Context, ev sizerapi.Event)
	Now            func() time.Time
	Logger         *slog.Logger
}

// Handler runs the interruption sequence (see the package documentation).
// It is safe for concurrent use; every call is one sequence.
type Handler struct {
	ops  SlurmOps
	opts Options
	log  *slog.Logger
	jobs sync.Map // job id -> *sync.Mutex
}

// New returns a Handler.
func New(ops SlurmOps, o Options) (*Handler, error) {
	if ops == nil {
		return nil, errors.New("creating interruption handler: nil SlurmOps")
	}
	if o.CheckpointRoot == "" {
		return nil, errors.New("creating interruption handler: the checkpoint root is required")
	}
	if o.By != "agent" && o.By != "sizer" {
		return nil, fmt.Errorf("creating interruption handler: By %q: want agent or sizer", o.By)
	}
	if o.Signal == "" {
		o.Signal = "USR1"
	}
	if o.Grace == 0 {
		o.Grace = 90 * time.Second
	}
	if o.Reserve == 0 {
		o.Reserve = 20 * time.Second
	}
	if o.PollMarker == 0 {
		o.PollMarker = 250 * time.Millisecond
	}
	if o.MarkerSkew == 0 {
		o.MarkerSkew = 5 * time.Second
	}
	if o.Grace < 0 || o.Reserve < 0 || o.PollMarker < 0 || o.MarkerSkew < 0 {
		return nil, fmt.Errorf("creating interruption handler: negative grace %v, reserve %v, poll %v or skew %v", o.Grace, o.Reserve, o.PollMarker, o.MarkerSkew)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{ops: ops, opts: o, log: o.Logger.With("component", "interrupt", "by", o.By)}, nil
}

// Reason is the Slurm node reason of an interrupted node.
func Reason(instanceID string) string { return "burst: spot interruption " + instanceOr(instanceID) }

// RebalanceReason is the Slurm node reason of a node drained on a
// rebalance recommendation.
func RebalanceReason(instanceID string) string {
	return "burst: rebalance recommendation " + instanceOr(instanceID)
}

// ScheduledReason is the Slurm node reason of a node evacuated ahead of
// one of EC2's scheduled events (code: instance-retirement, ...).
func ScheduledReason(code, instanceID string, notBefore time.Time) string {
	return "burst: ec2 scheduled " + code + " " + instanceOr(instanceID) + " from " + notBefore.UTC().Format(time.RFC3339)
}

func instanceOr(id string) string {
	if id == "" {
		return "(instance id unknown)"
	}
	return id
}

// Until is when the wait for markers ends: the earlier of start+Grace and
// the deadline less Reserve.
func (h *Handler) Until(start, deadline time.Time) time.Time {
	until := start.Add(h.opts.Grace)
	if !deadline.IsZero() {
		if d := deadline.Add(-h.opts.Reserve); d.Before(until) {
			until = d
		}
	}
	return until
}

// Interrupt runs the spot-interruption sequence for the notice's node and
// returns what happened. The error joins every failed step; the sequence
// goes on past failures so that as many jobs as possible are requeued and
// the node is handed back.
func (h *Handler) Interrupt(ctx context.Context, n Notice) (sizerapi.Event, error) {
	return h.run(ctx, n, true, "spot interruption")
}

// Evacuate is the interruption sequence for another cause than a spot
// notice (a GPU fault, burst-agent's health monitor): drain with
// n.Reason, checkpoint-signal, wait up to Grace, requeue, hand the node
// back. why says so in the jobs' notes and the logs.
func (h *Handler) Evacuate(ctx context.Context, n Notice, why string) (sizerapi.Event, error) {
	return h.run(ctx, n, true, why)
}

// RequeueNow is Interrupt without the checkpoint signal and the wait: the
// node cannot be reached, or the notice's deadline has come. why says so in
// the jobs' notes and the logs.
func (h *Handler) RequeueNow(ctx context.Context, n Notice, why string) (sizerapi.Event, error) {
	return h.run(ctx, n, false, why)
}

// RequeueRuns is RequeueNow for the given runs only (jobs as seen on the
// node earlier: a run that left the node since, or was requeued, is left
// alone).
func (h *Handler) RequeueRuns(ctx context.Context, n Notice, runs []Job, why string) (sizerapi.Event, error) {
	return h.runJobs(ctx, n, false, why, runs, true)
}

func (h *Handler) run(ctx context.Context, n Notice, checkpoint bool, why string) (sizerapi.Event, error) {
	return h.runJobs(ctx, n, checkpoint, why, nil, false)
}

func (h *Handler) runJobs(ctx context.Context, n Notice, checkpoint bool, why string, given []Job, useGiven bool) (sizerapi.Event, error) {
	start := h.opts.Now()
	if n.Time.IsZero() {
		n.Time = start
	}
	log := h.log.With("node", n.Node, "instance_id", n.InstanceID)
	ev := sizerapi.Event{InstanceID: n.InstanceID, Action: n.Action, NoticeTime: n.Time, Deadline: n.Deadline}
	reason := Reason(n.InstanceID)
	if n.Reason != "" {
		reason = n.Reason
	}
	var errs []error
	if err := h.ops.DrainNode(ctx, n.Node, reason); err != nil {
		errs = append(errs, fmt.Errorf("draining %s: %w", n.Node, err))
	}
	jobs, err := given, error(nil)
	if !useGiven {
		jobs, err = h.ops.JobsOnNode(ctx, n.Node)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("listing jobs on %s: %w", n.Node, err))
	}
	until := h.Until(start, n.Deadline)
	if !checkpoint {
		until = start
	}
	log.Warn("spot interruption: handling the node's jobs", "action", n.Action, "deadline", n.Deadline, "jobs", len(jobs),
		"checkpoint", checkpoint, "wait_until", until, "why", why)
	results := make([]sizerapi.JobEvent, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = h.job(ctx, n, j, checkpoint, until, why)
		}()
	}
	wg.Wait()
	for _, r := range results {
		if r.Error != "" {
			errs = append(errs, fmt.Errorf("job %d: %s", r.JobID, r.Error))
		}
	}
	ev.Jobs = results
	if h.opts.BeforeHandBack != nil {
		sofar := ev
		if err := errors.Join(errs...); err != nil {
			sofar.Error = err.Error()
		}
		h.opts.BeforeHandBack(ctx, sofar)
	}
	if err := h.ops.PowerDownForce(ctx, n.Node, reason); err != nil {
		errs = append(errs, fmt.Errorf("handing %s back (POWER_DOWN_FORCE): %w", n.Node, err))
	}
	err = errors.Join(errs...)
	if err != nil {
		ev.Error = err.Error()
	}
	log.Warn("spot interruption handled", "jobs", len(jobs), "took", h.opts.Now().Sub(start), "err", err)
	return ev, err
}

// job signals one job, waits for its marker until until, then requeues it
// (if the same run is still there) and makes it eligible at once.
func (h *Handler) job(ctx context.Context, n Notice, j Job, checkpoint bool, until time.Time, why string) sizerapi.JobEvent {
	sig, batch := h.opts.Signal, j.CheckpointTo != jobmeta.CheckpointToSteps
	if j.CheckpointSignal != "" {
		sig = j.CheckpointSignal
	}
	r := sizerapi.JobEvent{JobID: j.ID}
	var errs []error
	marker := MarkerPath(CheckpointDir(h.opts.CheckpointRoot, j.ID), j.RestartCount)
	t0 := h.opts.Now()
	log := h.log.With("node", n.Node, "job", j.ID, "restart", j.RestartCount)
	switch {
	case j.Starting:
		log.Info("job had not started; requeueing")
	case !checkpoint:
		log.Warn("requeueing without a checkpoint", "why", why)
	default:
		r.Signal = sig
		if err := h.ops.Signal(ctx, j.ID, sig, batch); err != nil {
			errs = append(errs, fmt.Errorf("sending checkpoint signal %s: %w", sig, err))
		} else {
			r.Checkpointed = h.waitMarker(ctx, marker, t0.Add(-h.opts.MarkerSkew), until)
		}
		r.Waited = h.opts.Now().Sub(t0)
		if r.Checkpointed {
			log.Info("job checkpointed", "signal", sig, "to_steps", !batch, "waited", r.Waited)
		} else {
			log.Warn("job did not confirm a checkpoint in time; requeueing anyway", "signal", sig, "marker", marker, "waited", r.Waited)
		}
	}
	// one check-and-requeue at a time per job in this process (two nodes of
	// one job interrupted together); across processes Slurm refuses to
	// requeue a job that is no longer running
	unlock := h.lockJob(j.ID)
	defer unlock()
	if cur, ok, err := h.sameRun(ctx, n.Node, j); err != nil {
		log.Warn("cannot tell whether the job was requeued already; requeueing", "err", err)
	} else if ok {
		j.AdminComment = cur.AdminComment
	} else {
		r.Note = "already requeued (the other notice path, or Slurm)"
		log.Info("the job's run is no longer on the node: already requeued")
		if err := errors.Join(errs...); err != nil {
			r.Error = err.Error()
		}
		return r
	}
	note := mergeNote(j.AdminComment, Note{Lost: []string{n.Node}, Instance: n.InstanceID, Run: j.StartTime.UTC().Truncate(time.Second),
		Restart: j.RestartCount, By: h.opts.By, Why: why})
	if err := h.ops.Note(ctx, j.ID, note.String()); err != nil {
		// the epilog then releases every node of the job: a slower relaunch,
		// nothing lost
		log.Warn("recording the requeue note on the job", "err", err)
	}
	if err := h.ops.Requeue(ctx, j.ID); err != nil {
		errs = append(errs, fmt.Errorf("requeueing: %w", err))
	} else {
		r.Requeued = true
		if err := h.ops.StartNow(ctx, j.ID); err != nil {
			errs = append(errs, fmt.Errorf("clearing requeue hold: %w", err))
		} else {
			r.Released = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		r.Error = err.Error()
	}
	return r
}

// sameRun reports whether run (id, restart count) of j still has the node,
// and returns the job as Slurm has it now.
func (h *Handler) sameRun(ctx context.Context, node string, j Job) (Job, bool, error) {
	jobs, err := h.ops.JobsOnNode(ctx, node)
	if err != nil {
		return Job{}, false, err
	}
	for _, c := range jobs {
		if c.ID == j.ID {
			return c, c.RestartCount == j.RestartCount, nil
		}
	}
	return Job{}, false, nil
}

func (h *Handler) lockJob(id uint32) func() {
	m, _ := h.jobs.LoadOrStore(id, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

func (h *Handler) waitMarker(ctx context.Context, marker string, since, until time.Time) bool {
	t := time.NewTicker(h.opts.PollMarker)
	defer t.Stop()
	for {
		if MarkerWritten(marker, since) {
			return true
		}
		if !h.opts.Now().Before(until) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// Rebalance drains the notice's node so Slurm starts no new job on it;
// running jobs go on. Jobs whose metadata says rebalance=checkpoint get
// SIGUSR2 on their batch shell (an early checkpoint).
func (h *Handler) Rebalance(ctx context.Context, n Notice) (sizerapi.Event, error) {
	if n.Time.IsZero() {
		n.Time = h.opts.Now()
	}
	log := h.log.With("node", n.Node, "instance_id", n.InstanceID)
	ev := sizerapi.Event{InstanceID: n.InstanceID, Action: "rebalance", NoticeTime: n.Time}
	var errs []error
	if err := h.ops.DrainNode(ctx, n.Node, RebalanceReason(n.InstanceID)); err != nil {
		errs = append(errs, fmt.Errorf("draining %s on rebalance recommendation: %w", n.Node, err))
	} else {
		log.Warn("drained node on rebalance recommendation")
	}
	jobs, err := h.ops.JobsOnNode(ctx, n.Node)
	if err != nil {
		errs = append(errs, fmt.Errorf("listing jobs on %s: %w", n.Node, err))
	}
	for _, j := range jobs {
		if j.Rebalance != jobmeta.RebalanceCheckpoint || j.Starting {
			continue
		}
		r := sizerapi.JobEvent{JobID: j.ID, Signal: "USR2"}
		if err := h.ops.Signal(ctx, j.ID, "USR2", true); err != nil {
			err = fmt.Errorf("job %d: early checkpoint signal USR2: %w", j.ID, err)
			r.Error = err.Error()
			errs = append(errs, err)
		} else {
			log.Info("early checkpoint asked on rebalance recommendation", "job", j.ID)
		}
		ev.Jobs = append(ev.Jobs, r)
	}
	err = errors.Join(errs...)
	if err != nil {
		ev.Error = err.Error()
	}
	return ev, err
}
