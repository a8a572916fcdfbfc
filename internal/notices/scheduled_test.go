package notices

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/ec2events"
)

func retirement(ids ...string) ec2events.Event {
	return ec2events.Event{ID: "h-1", Kind: ec2events.Scheduled, Account: "123456789012", Region: "us-east-1", Time: t0, InstanceID: ids[0],
		Instances: ids, Code: "instance-retirement", NotBefore: t0.Add(14 * 24 * time.Hour), NotAfter: t0.Add(14*24*time.Hour + 2*time.Hour)}
}

// TestScheduledRetirement: a scheduled retirement of a node's instance,
// spot or on-demand, needs no agent: the sizer drains the node at once
// with a reason naming the event, signals the job, requeues it on its
// checkpoint and hands the node back (Slurm then terminates the instance);
// the same event again is a duplicate, and one for an instance that is not
// a node, or whose window has passed, is left alone.
func TestScheduledRetirement(t *testing.T) {
	r := newRig(t)
	r.checkpointWhenSignalled()
	ev := retirement(inst)
	out, err := r.c.Handle(context.Background(), ev)
	if err != nil || out != OutcomeHandled {
		t.Fatalf("Handle = %s, %v", out, err)
	}
	calls := r.sl.Calls()
	for _, want := range []string{"update a10g-1 DRAIN burst: ec2 scheduled instance-retirement " + inst + " from 2026-12-15T11:32:00Z",
		"signal 7 USR1 batch", "requeue 7", "update a10g-1 POWER_DOWN_FORCE"} {
		if !has(calls, want) {
			t.Errorf("no %q in %q", want, calls)
		}
	}
	if waited := r.cl.Now().Sub(t0.Add(time.Second)); waited >= 10*time.Second {
		t.Errorf("waited %v for an agent; a scheduled event has none to wait for", waited)
	}
	if out, _ := r.c.Handle(context.Background(), ev); out != OutcomeDuplicate {
		t.Errorf("second delivery: %s", out)
	}
	// an on-demand node (a10g-2) is evacuated too
	if out, err := r.c.Handle(context.Background(), retirement("i-00b0000000000000d")); err != nil || out != OutcomeHandled || !has(r.sl.Calls(), "update a10g-2 DRAIN burst: ec2 scheduled") {
		t.Errorf("on-demand node: %s %v %q", out, err, r.sl.Calls())
	}
	n := len(r.sl.Calls())
	if out, _ := r.c.Handle(context.Background(), retirement("i-00b0000000000000b")); out != OutcomeNotOurs {
		t.Errorf("an instance with no node: %s", out)
	}
	past := retirement(inst)
	past.NotBefore, past.NotAfter, past.ID = t0.Add(-2*time.Hour), t0.Add(-time.Hour), "h-2"
	if out, _ := r.c.Handle(context.Background(), past); out != OutcomeIgnored {
		t.Errorf("a past window: %s", out)
	}
	if len(r.sl.Calls()) != n {
		t.Errorf("Slurm touched for events left alone: %q", r.sl.Calls()[n:])
	}
}

// statusList is DescribeInstanceStatus's scheduled events as the Poller
// sees them.
type statusList struct {
	evs   []ec2events.StatusEvent
	calls int
}

func (s *statusList) ScheduledEvents(context.Context) ([]ec2events.StatusEvent, error) {
	s.calls++
	return s.evs, nil
}

// TestPollerScheduled: a retirement found by polling DescribeInstanceStatus
// evacuates the node as the EventBridge form does; the next poll, and the
// AWS Health event for it arriving later on the queue, are duplicates (one
// Scheduled shared by both); a completed or canceled event, and one for an
// instance that is no node of the cluster, touch nothing; a deposed leader
// (Fence) neither lists nor acts.
func TestPollerScheduled(t *testing.T) {
	r := newRig(t)
	r.checkpointWhenSignalled()
	health := retirement(inst)
	ret := ec2events.StatusEvent{InstanceID: inst, EventID: "instance-event-0123456789abcdef0", Code: health.Code,
		Description: "The instance is running on degraded hardware", NotBefore: health.NotBefore, NotAfter: health.NotAfter}
	done := ec2events.StatusEvent{InstanceID: "i-00b0000000000000d", EventID: "instance-event-0123456789abcdef1", Code: "system-reboot",
		Description: "[Completed] The instance is scheduled for a reboot", NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(time.Hour)}
	canceled := done
	canceled.EventID, canceled.Description = "instance-event-0123456789abcdef2", "[Canceled] The instance is scheduled for a reboot"
	stranger := ret
	stranger.InstanceID, stranger.EventID = "i-00b0000000000000b", "instance-event-0123456789abcdef3"
	sl := &statusList{evs: []ec2events.StatusEvent{ret, done, canceled, stranger}}
	fenced := errors.New("deposed")
	var fence error
	p, err := NewPoller(sl, r.c.sched, PollOptions{Now: r.cl.Now, Fence: func(context.Context) error { return fence }})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	calls := r.sl.Calls()
	for _, want := range []string{"update a10g-1 DRAIN burst: ec2 scheduled instance-retirement " + inst + " from 2026-12-15T11:32:00Z",
		"signal 7 USR1 batch", "requeue 7", "update a10g-1 POWER_DOWN_FORCE"} {
		if !has(calls, want) {
			t.Errorf("no %q in %q", want, calls)
		}
	}
	if has(calls, "update a10g-2") {
		t.Errorf("a completed or canceled event touched a10g-2: %q", calls)
	}
	n := len(calls)
	if err := p.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out, _ := r.c.Handle(context.Background(), health); out != OutcomeDuplicate {
		t.Errorf("the AWS Health event after the poll: %s, want duplicate", out)
	}
	if len(r.sl.Calls()) != n {
		t.Errorf("Slurm touched again: %q", r.sl.Calls()[n:])
	}
	fence = fenced
	before := sl.calls
	if err := p.Pass(context.Background()); !errors.Is(err, fenced) || sl.calls != before {
		t.Errorf("a deposed leader's pass: %v, %d lists; want the fence's error and no list", err, sl.calls-before)
	}
}

// TestScheduledHealthThenPoll: the AWS Health event first, then the same
// event by polling: acted on once.
func TestScheduledHealthThenPoll(t *testing.T) {
	r := newRig(t, "NOT_RESPONDING") // requeued at once: no checkpoint wait
	ev := retirement(inst)
	if out, err := r.c.Handle(context.Background(), ev); err != nil || out != OutcomeRequeued {
		t.Fatalf("Handle = %s, %v", out, err)
	}
	n := len(r.sl.Calls())
	sl := &statusList{evs: []ec2events.StatusEvent{{InstanceID: inst, EventID: "instance-event-0123456789abcdef0", Code: ev.Code,
		Description: "The instance is running on degraded hardware", NotBefore: ev.NotBefore.Add(300 * time.Millisecond), NotAfter: ev.NotAfter}}}
	p, err := NewPoller(sl, r.c.sched, PollOptions{Now: r.cl.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(r.sl.Calls()) != n {
		t.Errorf("the polled event after the AWS Health one: Slurm calls %q", r.sl.Calls()[n:])
	}
}
