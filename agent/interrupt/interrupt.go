// Package interrupt makes spot interruptions safe for Slurm jobs.
//
// On a rebalance recommendation the node is drained (no new jobs). On a spot
// interruption notice (two minutes before EC2 reclaims the instance) the
// node is drained, every job on it is sent its checkpoint signal, the
// handler waits for each job to confirm its checkpoint (or a grace period
// that ends well before the deadline), requeues it, clears the ~120 s
// requeue hold so the replacement node is launched at once, hands the node
// back to Slurm (POWER_DOWN_FORCE) and reports what happened.
//
// # Checkpoint protocol (what a job does)
//
// A job finds its checkpoint directory in $BURST_CHECKPOINT_DIR
// (<checkpoint root>/<job id>, on shared storage, kept across requeues) and
// its restart count in $SLURM_RESTART_COUNT. On its checkpoint signal
// (default SIGUSR1 to the batch shell; per job with the metadata
// "burst: checkpoint_signal=USR2") it saves a checkpoint durably and then
// creates the marker
//
//	$BURST_CHECKPOINT_DIR/.checkpointed-$SLURM_RESTART_COUNT
//
// (contents free; examples/train writes "step=N"). The agent deletes a stale
// marker before signalling and requeues the job as soon as the marker
// appears, or when the grace period runs out. The job should write the
// marker only in answer to the signal, not after periodic checkpoints.
package interrupt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/imds"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

// Job is a job running on the node.
type Job struct {
	ID           uint32
	RestartCount uint32
	// CheckpointSignal from the job's metadata; "" means Options.Signal.
	CheckpointSignal string
	// Starting: the job is allocated but not running yet (CONFIGURING while
	// its nodes boot): it has nothing to checkpoint and is requeued at once.
	Starting bool
}

// SlurmOps is what the handler needs from Slurm.
type SlurmOps interface {
	// JobsOnNode lists the running (and starting) jobs with an allocation
	// on node.
	JobsOnNode(ctx context.Context, node string) ([]Job, error)
	// Signal sends sig (USR1, ...) to the job's batch shell when batchOnly,
	// else to its steps.
	Signal(ctx context.Context, jobID uint32, sig string, batchOnly bool) error
	Requeue(ctx context.Context, jobID uint32) error
	// StartNow clears the BeginTime hold Slurm puts on a requeued job.
	StartNow(ctx context.Context, jobID uint32) error
	DrainNode(ctx context.Context, node, reason string) error
	PowerDownForce(ctx context.Context, node, reason string) error
}

// Recorder takes the interruption report (a *report.Reporter).
type Recorder interface {
	Add(sizerapi.Record) error
	Flush(ctx context.Context) error
}

// Announcer tells the sizer about a notice at once (a *report.Announcer).
type Announcer interface {
	Announce(ctx context.Context, in sizerapi.Interruption) error
}

// Options configure a Handler.
type Options struct {
	Node       string
	InstanceID string
	// CheckpointRoot holds one directory per job id ($BURST_CHECKPOINT_DIR).
	CheckpointRoot string
	// Signal is the default checkpoint signal; default USR1.
	Signal string
	// SignalSteps sends the default signal to the job steps instead of
	// the batch shell.
	SignalSteps bool
	// Grace is the longest wait for checkpoint markers; default 90 s.
	Grace time.Duration
	// Reserve is kept before EC2's deadline for requeueing and handing the
	// node back; the wait ends at deadline-Reserve if that is sooner than
	// Grace; default 20 s.
	Reserve time.Duration
	// PollMarker is how often markers are checked; default 250 ms.
	PollMarker time.Duration
	// Announcer, if set, is told of each notice before anything else, in
	// the background (bounded to 10 s).
	Announcer Announcer
	Now       func() time.Time
	Logger    *slog.Logger
}

// Handler handles interruption notices for one node.
type Handler struct {
	ops  SlurmOps
	rec  Recorder
	opts Options
	log  *slog.Logger
	once sync.Once
}

// New returns a Handler. rec may be nil (nothing is reported).
func New(ops SlurmOps, rec Recorder, o Options) (*Handler, error) {
	if ops == nil {
		return nil, errors.New("creating interruption handler: nil SlurmOps")
	}
	if o.Node == "" || o.CheckpointRoot == "" {
		return nil, fmt.Errorf("creating interruption handler: node %q and checkpoint root %q are both required", o.Node, o.CheckpointRoot)
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
	if o.Grace < 0 || o.Reserve < 0 || o.PollMarker < 0 {
		return nil, fmt.Errorf("creating interruption handler: negative grace %v, reserve %v or poll %v", o.Grace, o.Reserve, o.PollMarker)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Handler{ops: ops, rec: rec, opts: o, log: o.Logger.With("component", "interrupt", "node", o.Node)}, nil
}

// CheckpointDir is $BURST_CHECKPOINT_DIR of job id under root.
func CheckpointDir(root string, id uint32) string {
	return filepath.Join(root, strconv.FormatUint(uint64(id), 10))
}

// MarkerPath is the file a job creates once it checkpointed in answer to
// the signal, in restart restartCount.
func MarkerPath(checkpointDir string, restartCount uint32) string {
	return filepath.Join(checkpointDir, ".checkpointed-"+strconv.FormatUint(uint64(restartCount), 10))
}

// Handle dispatches a poller notice (imds.Poller.Handle).
func (h *Handler) Handle(ctx context.Context, n imds.Notice) {
	switch {
	case n.InstanceAction != nil:
		if _, err := h.Interrupt(ctx, *n.InstanceAction); err != nil {
			h.log.Error("handling spot interruption", "err", err)
		}
	case n.Rebalance != nil:
		if err := h.Rebalance(ctx, *n.Rebalance); err != nil {
			h.log.Error("handling rebalance recommendation", "err", err)
		}
	}
}

// Rebalance drains the node so Slurm starts no new job on it; running jobs
// go on. The event is reported.
func (h *Handler) Rebalance(ctx context.Context, r imds.Rebalance) error {
	announced := h.announce(ctx, "rebalance", r.NoticeTime)
	defer announced()
	reason := "burst: rebalance recommendation " + h.instance()
	err := h.ops.DrainNode(ctx, h.opts.Node, reason)
	ev := sizerapi.Event{InstanceID: h.opts.InstanceID, Action: "rebalance", NoticeTime: r.NoticeTime}
	if err != nil {
		err = fmt.Errorf("draining %s on rebalance recommendation: %w", h.opts.Node, err)
		ev.Error = err.Error()
	} else {
		h.log.Warn("drained node on rebalance recommendation")
	}
	h.record(ctx, ev)
	return err
}

// Interrupt runs the interruption sequence once (later calls return at
// once) and returns what happened. The error joins every failed step; the
// sequence goes on past failures so that as many jobs as possible are
// requeued and the node is handed back.
func (h *Handler) Interrupt(ctx context.Context, a imds.InstanceAction) (sizerapi.Event, error) {
	var ev sizerapi.Event
	var err error
	ran := false
	h.once.Do(func() { ran = true; ev, err = h.interrupt(ctx, a) })
	if !ran {
		return sizerapi.Event{}, nil
	}
	return ev, err
}

func (h *Handler) interrupt(ctx context.Context, a imds.InstanceAction) (sizerapi.Event, error) {
	start := h.opts.Now()
	announced := h.announce(ctx, a.Action, start)
	defer announced()
	ev := sizerapi.Event{InstanceID: h.opts.InstanceID, Action: a.Action, NoticeTime: start, Deadline: a.Time}
	reason := "burst: spot interruption " + h.instance()
	var errs []error
	if err := h.ops.DrainNode(ctx, h.opts.Node, reason); err != nil {
		errs = append(errs, fmt.Errorf("draining %s: %w", h.opts.Node, err))
	}
	jobs, err := h.ops.JobsOnNode(ctx, h.opts.Node)
	if err != nil {
		errs = append(errs, fmt.Errorf("listing jobs on %s: %w", h.opts.Node, err))
	}
	// Wait until the earlier of start+Grace and deadline-Reserve.
	until := start.Add(h.opts.Grace)
	if !a.Time.IsZero() {
		if d := a.Time.Add(-h.opts.Reserve); d.Before(until) {
			until = d
		}
	}
	h.log.Warn("spot interruption: checkpointing jobs", "action", a.Action, "deadline", a.Time, "jobs", len(jobs), "wait_until", until)

	results := make([]sizerapi.JobEvent, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = h.job(ctx, j, until)
		}()
	}
	wg.Wait()
	for _, r := range results {
		if r.Error != "" {
			errs = append(errs, fmt.Errorf("job %d: %s", r.JobID, r.Error))
		}
	}
	ev.Jobs = results
	if err := errors.Join(errs...); err != nil {
		ev.Error = err.Error()
	}
	// Report what happened to the jobs before handing the node back: the
	// hand-back terminates this instance, and the unsent spool with it.
	h.record(ctx, ev)
	if err := h.ops.PowerDownForce(ctx, h.opts.Node, reason); err != nil {
		errs = append(errs, fmt.Errorf("handing %s back (POWER_DOWN_FORCE): %w", h.opts.Node, err))
	}
	err = errors.Join(errs...)
	h.log.Warn("spot interruption handled", "jobs", len(jobs), "took", h.opts.Now().Sub(start), "err", err)
	return ev, err
}

// job signals one job, waits for its marker until until, then requeues it
// and makes it eligible at once.
func (h *Handler) job(ctx context.Context, j Job, until time.Time) sizerapi.JobEvent {
	sig, batch := h.opts.Signal, !h.opts.SignalSteps
	if j.CheckpointSignal != "" {
		sig = j.CheckpointSignal
	}
	r := sizerapi.JobEvent{JobID: j.ID, Signal: sig}
	var errs []error
	marker := MarkerPath(CheckpointDir(h.opts.CheckpointRoot, j.ID), j.RestartCount)
	if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("removing stale marker: %w", err))
	}
	t0 := h.opts.Now()
	if j.Starting {
		r.Signal = ""
	} else if err := h.ops.Signal(ctx, j.ID, sig, batch); err != nil {
		errs = append(errs, fmt.Errorf("sending checkpoint signal %s: %w", sig, err))
	} else {
		r.Checkpointed = h.waitMarker(ctx, marker, until)
	}
	r.Waited = h.opts.Now().Sub(t0)
	log := h.log.With("job", j.ID, "signal", sig, "waited", r.Waited)
	switch {
	case j.Starting:
		log.Info("job had not started; requeueing")
	case r.Checkpointed:
		log.Info("job checkpointed")
	default:
		log.Warn("job did not confirm a checkpoint in time; requeueing anyway", "marker", marker)
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

func (h *Handler) waitMarker(ctx context.Context, marker string, until time.Time) bool {
	t := time.NewTicker(h.opts.PollMarker)
	defer t.Stop()
	for {
		if _, err := os.Stat(marker); err == nil {
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

// instance names the instance in Slurm reasons.
func (h *Handler) instance() string {
	if h.opts.InstanceID == "" {
		return "(instance id unknown)"
	}
	return h.opts.InstanceID
}

// announce tells the Announcer in the background; the returned func waits
// for it.
func (h *Handler) announce(ctx context.Context, action string, at time.Time) func() {
	if h.opts.Announcer == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		in := sizerapi.Interruption{InstanceID: h.opts.InstanceID, Node: h.opts.Node, Action: action, Time: at.UTC()}
		if err := h.opts.Announcer.Announce(actx, in); err != nil {
			h.log.Warn("announcing the notice to the sizer failed", "action", action, "err", err)
		}
	}()
	return func() { <-done }
}

func (h *Handler) record(ctx context.Context, ev sizerapi.Event) {
	if h.rec == nil {
		return
	}
	if err := h.rec.Add(sizerapi.Record{Time: h.opts.Now(), Kind: sizerapi.KindInterruption, Event: &ev}); err != nil {
		h.log.Error("recording interruption report", "err", err)
		return
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := h.rec.Flush(fctx); err != nil {
		h.log.Warn("sending interruption report failed; it stays spooled", "err", err)
	}
}
