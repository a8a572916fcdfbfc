package notices

import (
	"context"
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
