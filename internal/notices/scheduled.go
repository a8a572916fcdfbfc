package notices

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/ec2events"
	"github.com/burst-hpc/burst/internal/interruption"
)

// Scheduled acts on EC2's scheduled events (instance-retirement,
// instance-stop, instance-reboot, system-reboot, system-maintenance),
// whichever source sees one first: AWS Health's EventBridge form (the
// queue's Consumer) or DescribeInstanceStatus (the Poller). For each of
// the cluster's live instances an event names, the node is evacuated as
// for a spot interruption whose agent is silent (internal/interruption's
// Evacuate: drained with a reason naming the event, its jobs
// checkpoint-signalled, waited for up to the handler's grace, requeued,
// the node handed back). Slurm then powers the node down (burst-suspend
// terminates the instance) and resumes a fresh instance for the requeued
// job, so nothing runs on the instance when EC2 acts. Every event type
// evacuates: a retirement or a stop ends the instance, a reboot (the
// instance's or its host's) and power maintenance reboot it, network
// maintenance cuts it off for a while (EC2 User Guide, "Scheduled events
// for Amazon EC2 instances"), and each ends or stalls a training job. An
// event that is over (completed, canceled) or whose window has passed is
// ignored. An event is acted on once per instance, code and start, from
// either source.
type Scheduled struct {
	inst Instances
	h    *interruption.Handler
	ops  interruption.SlurmOps
	now  func() time.Time
	log  *slog.Logger

	mu   sync.Mutex
	seen map[string]time.Time // event key -> kept until
}

// NewScheduled returns a Scheduled acting through h and ops on the
// instances inst lists; now and log may be nil (time.Now, discard).
func NewScheduled(inst Instances, h *interruption.Handler, ops interruption.SlurmOps, now func() time.Time, log *slog.Logger) (*Scheduled, error) {
	if inst == nil || h == nil || ops == nil {
		return nil, errors.New("creating the scheduled-event handler: instances, handler and Slurm are all required")
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Scheduled{inst: inst, h: h, ops: ops, now: now, log: log.With("component", "scheduled-events"), seen: map[string]time.Time{}}, nil
}

// Handle acts on one scheduled event and says what it did.
func (s *Scheduled) Handle(ctx context.Context, ev ec2events.Event) (string, error) {
	if o, done := s.over(ev); done {
		return o, nil
	}
	insts, err := s.inst.List(ctx)
	if err != nil {
		return OutcomeRetry, fmt.Errorf("listing the cluster's instances: %w", err)
	}
	return s.act(ctx, ev, insts)
}

// over says whether ev is nothing to act on any more: completed,
// canceled, or its window passed.
func (s *Scheduled) over(ev ec2events.Event) (string, bool) {
	log := s.log.With("event", ev.ID, "code", ev.Code, "instance_id", ev.InstanceID, "not_before", ev.NotBefore)
	if ev.Closed {
		log.Debug("EC2 scheduled event completed or canceled; ignored")
		return OutcomeIgnored, true
	}
	if s.now().After(windowEnd(ev)) {
		log.Info("EC2 scheduled event whose window has passed; ignored")
		return OutcomeIgnored, true
	}
	return "", false
}

func windowEnd(ev ec2events.Event) time.Time {
	if ev.NotAfter.IsZero() {
		return ev.NotBefore
	}
	return ev.NotAfter
}

// act evacuates the live nodes among insts that ev names.
func (s *Scheduled) act(ctx context.Context, ev ec2events.Event, insts []cloud.Instance) (string, error) {
	outcome := OutcomeNotOurs
	var errs []error
	for _, id := range ev.Instances {
		key := fmt.Sprintf("%s/%s/%s/%d", ev.Kind, id, ev.Code, ev.NotBefore.Unix())
		node, live := "", false
		for _, in := range insts {
			if in.ID == id {
				node, live = in.Node, in.Live()
			}
		}
		if node == "" || !live {
			s.log.Debug("EC2 scheduled event for an instance that is not a live node of this cluster; ignored", "instance_id", id, "code", ev.Code)
			continue
		}
		if !s.firstSight(key, windowEnd(ev)) {
			outcome = OutcomeDuplicate
			continue
		}
		o, err := s.evacuate(ctx, ev, id, node)
		if err != nil {
			if o == OutcomeRetry {
				s.forget(key)
			}
			errs = append(errs, err)
		}
		outcome = o
	}
	return outcome, errors.Join(errs...)
}

// evacuate empties one node ahead of a scheduled event.
func (s *Scheduled) evacuate(ctx context.Context, ev ec2events.Event, id, node string) (string, error) {
	log := s.log.With("event", ev.ID, "code", ev.Code, "instance_id", id, "node", node)
	reason := interruption.ScheduledReason(ev.Code, id, ev.NotBefore)
	at := ev.Time
	if at.IsZero() {
		at = s.now()
	}
	n := interruption.Notice{Node: node, InstanceID: id, Action: "scheduled-" + ev.Code, Time: at, Deadline: ev.NotBefore, Reason: reason}
	sn, found, err := s.ops.Node(ctx, node)
	if err != nil {
		return OutcomeRetry, fmt.Errorf("reading node %s from Slurm: %w", node, err)
	}
	if !found {
		log.Warn("EC2 scheduled event for a node Slurm does not know; ignored")
		return OutcomeNotOurs, nil
	}
	why := fmt.Sprintf("EC2 scheduled %s from %s", ev.Code, ev.NotBefore.UTC().Format(time.RFC3339))
	if unreachable(sn.State, sn.HasFlag) {
		log.Warn("EC2 scheduled event on a node Slurm cannot reach: requeueing its jobs without a checkpoint and handing the node back")
		if _, err := s.h.RequeueNow(ctx, n, why); err != nil {
			return OutcomeError, err
		}
		return OutcomeRequeued, nil
	}
	log.Warn("EC2 scheduled event: draining the node, checkpointing and requeueing its jobs, replacing the instance")
	if _, err := s.h.Evacuate(ctx, n, why); err != nil {
		return OutcomeError, err
	}
	return OutcomeHandled, nil
}

// firstSight records key until the later of an hour from now and an hour
// after the event's window (a poll sees the event again every pass until
// EC2 drops it); false when it was seen before.
func (s *Scheduled) firstSight(key string, end time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k, until := range s.seen {
		if now.After(until) {
			delete(s.seen, k)
		}
	}
	if _, ok := s.seen[key]; ok {
		return false
	}
	s.seen[key] = later(now, end).Add(time.Hour)
	return true
}

// forget drops key, so the event is handled again when it comes back.
func (s *Scheduled) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.seen, key)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
