// Package spotwatch is burst-agent's side of spot interruptions: it turns
// the node's IMDS notices into internal/interruption's sequence (the same
// code burst-sizer runs for EventBridge events when a node's agent is dead),
// tells the sizer of each notice at once (so the sizer leaves the node to
// this agent) and reports what happened.
//
// On a rebalance recommendation the node is drained (no new jobs) and jobs
// that allow it (metadata rebalance=checkpoint) get an early-checkpoint
// signal. On a spot interruption notice (two minutes before EC2 reclaims
// the instance) the node is drained, every job on it is sent its checkpoint
// signal, the handler waits for each job to confirm its checkpoint (or a
// grace period that ends well before the deadline), requeues it (the whole
// job, on all its nodes; the survivors are held for its relaunch), clears
// the ~120 s requeue hold so the replacement node is launched at once,
// hands the node back to Slurm (POWER_DOWN_FORCE) and reports.
//
// # Checkpoint protocol (what a job does)
//
// A job finds its checkpoint directory in $BURST_CHECKPOINT_DIR
// (<checkpoint root>/<job id>, on shared storage, kept across requeues) and
// its restart count in $SLURM_RESTART_COUNT. On its checkpoint signal
// (default SIGUSR1 to the batch shell, sent through slurmctld so it reaches
// the batch shell from whichever node got the notice; per job with the
// metadata "burst: checkpoint_signal=USR2", and "checkpoint_to=steps" to
// signal every process of every step on every node instead) it saves a
// checkpoint durably and then creates the marker
//
//	$BURST_CHECKPOINT_DIR/.checkpointed-$SLURM_RESTART_COUNT
//
// (contents free; examples/train writes "step=N"). The agent requeues the
// job as soon as a marker written after the signal appears, or when the
// grace period runs out. The job should write the marker only in answer to
// the signal, not after periodic checkpoints.
package spotwatch

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/imds"
	"github.com/burst-hpc/burst/internal/interruption"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

// The job-side types live in internal/interruption, shared with the sizer.
type (
	// Job is a job running on the node.
	Job = interruption.Job
	// SlurmOps is what the handler needs from Slurm.
	SlurmOps = interruption.SlurmOps
	// SlurmClient adapts internal/slurm's Client to SlurmOps.
	SlurmClient = interruption.SlurmClient
)

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
	core *interruption.Handler
	rec  Recorder
	opts Options
	log  *slog.Logger
	once sync.Once
}

// New returns a Handler. rec may be nil (nothing is reported).
func New(ops SlurmOps, rec Recorder, o Options) (*Handler, error) {
	if o.Node == "" || o.CheckpointRoot == "" {
		return nil, fmt.Errorf("creating interruption handler: node %q and checkpoint root %q are both required", o.Node, o.CheckpointRoot)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	h := &Handler{rec: rec, opts: o, log: o.Logger.With("component", "interrupt", "node", o.Node)}
	// the report of what happened to the jobs leaves before the hand-back
	// terminates this instance (and its unsent spool)
	core, err := interruption.New(ops, interruption.Options{CheckpointRoot: o.CheckpointRoot, Signal: o.Signal, Grace: o.Grace,
		Reserve: o.Reserve, PollMarker: o.PollMarker, By: "agent", Now: o.Now, Logger: o.Logger, BeforeHandBack: h.record})
	if err != nil {
		return nil, err
	}
	h.core = core
	return h, nil
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
// go on (those with rebalance=checkpoint take an early checkpoint). The
// event is reported.
func (h *Handler) Rebalance(ctx context.Context, r imds.Rebalance) error {
	announced := h.announce(ctx, "rebalance", r.NoticeTime)
	defer announced()
	ev, err := h.core.Rebalance(ctx, interruption.Notice{Node: h.opts.Node, InstanceID: h.opts.InstanceID, Action: "rebalance", Time: r.NoticeTime})
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
	h.once.Do(func() {
		ran = true
		start := h.opts.Now()
		announced := h.announce(ctx, a.Action, start)
		defer announced()
		deadline, off := DeadlineHere(start, a.Time)
		if off {
			h.log.Warn("EC2's action time is out of reach of this node's clock (the clocks differ): counting EC2's two minutes from now",
				"action_time", a.Time, "node_now", start, "deadline_here", deadline)
		}
		ev, err = h.core.Interrupt(ctx, interruption.Notice{Node: h.opts.Node, InstanceID: h.opts.InstanceID, Action: a.Action, Time: start, Deadline: deadline})
	})
	if !ran {
		return sizerapi.Event{}, nil
	}
	return ev, err
}

// NoticeLead is how long before its action EC2 gives a spot interruption
// notice.
const NoticeLead = 2 * time.Minute

// DeadlineHere is EC2's action time (EC2's clock) on this node's clock,
// for a notice seen at seen. An action time already past while the
// instance still runs, or more than EC2's two minutes ahead, can only be
// a clock off from EC2's: the deadline is then NoticeLead from seen (the
// notice is fresh: the agent polls IMDS every few seconds) and off is
// true. A zero action time stays zero.
func DeadlineHere(seen, action time.Time) (deadline time.Time, off bool) {
	if action.IsZero() {
		return action, false
	}
	if left := action.Sub(seen); left <= 0 || left > NoticeLead {
		return seen.Add(NoticeLead), true
	}
	return action, false
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
