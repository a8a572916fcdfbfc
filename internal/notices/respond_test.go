package notices

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/ec2events"
	"github.com/burst-hpc/burst/internal/interruption"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
)

// memStore is the sizer's store as far as the consumer sees it.
type memStore struct {
	mu  sync.Mutex
	ins []sizerapi.Interruption
}

func (m *memStore) Interruptions(_ context.Context, since time.Time) ([]sizerapi.Interruption, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []sizerapi.Interruption
	for _, in := range m.ins {
		if !in.Time.Before(since) {
			out = append(out, in)
		}
	}
	return out, nil
}

func (m *memStore) AddInterruption(_ context.Context, in sizerapi.Interruption) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ins = append(m.ins, in)
	return nil
}

type fakeInstances struct {
	insts []cloud.Instance
	err   error
}

func (f *fakeInstances) List(context.Context) ([]cloud.Instance, error) { return f.insts, f.err }

// clock is a fake clock whose Sleep advances it.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Sleep(_ context.Context, d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
	time.Sleep(time.Millisecond)
}

var t0 = time.Date(2026, 12, 1, 11, 32, 0, 0, time.UTC)

const inst = "i-00b0000000000000a"

type rig struct {
	c     *Consumer
	sl    *slurmfake.Slurm
	st    *memStore
	cl    *clock
	inst  *fakeInstances
	kicks int
	root  string
}

// checkpointWhenSignalled: job 7's batch shell, once signalled, writes its
// checkpoint marker (its run's, at the clock's time).
func (r *rig) checkpointWhenSignalled() {
	go func() {
		for !has(r.sl.Calls(), "signal 7 USR1 batch") {
			time.Sleep(time.Millisecond)
		}
		dir := interruption.CheckpointDir(r.root, 7)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(interruption.MarkerPath(dir, 0), []byte("step=3\n"), 0o644)
		os.Chtimes(interruption.MarkerPath(dir, 0), r.cl.Now(), r.cl.Now())
	}()
}

func newRig(t *testing.T, nodeFlags ...string) *rig {
	t.Helper()
	r := &rig{st: &memStore{}, cl: &clock{t: t0.Add(time.Second)}, root: t.TempDir()}
	r.sl = slurmfake.New([]slurm.Job{
		{ID: 7, State: "RUNNING", Nodes: "a10g-[1-2]", StartTime: t0.Add(-time.Hour)},
		{ID: 8, State: "RUNNING", Nodes: "a10g-3"},
	}, []slurm.Node{{Name: "a10g-1", State: "MIXED", Flags: nodeFlags}, {Name: "a10g-2", State: "MIXED"}})
	ops := interruption.SlurmClient{C: r.sl}
	// the job answers its checkpoint signal at once (the marker: its run's)
	h, err := interruption.New(ops, interruption.Options{CheckpointRoot: r.root, Grace: 3 * time.Second, PollMarker: time.Millisecond, By: "sizer", Now: r.cl.Now})
	if err != nil {
		t.Fatal(err)
	}
	r.inst = &fakeInstances{insts: []cloud.Instance{{ID: inst, Node: "a10g-1", State: "running", Capacity: capacity.Spot},
		{ID: "i-00b0000000000000b", State: "running", Capacity: capacity.Spot}, {ID: "i-00b0000000000000d", Node: "a10g-2", State: "running", Capacity: capacity.OnDemand}}}
	r.c, err = New(nopSQS{}, r.inst, r.st, h, ops, Options{QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/q",
		Expect: ec2events.Expect{Region: "us-east-1"}, AgentWait: 10 * time.Second, Now: r.cl.Now, Sleep: r.cl.Sleep, Kick: func() { r.kicks++ }})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type nopSQS struct{ SQS }

func spot(id string) ec2events.Event {
	return ec2events.Event{ID: "e-1", Kind: ec2events.SpotInterruption, Account: "123456789012", Region: "us-east-1", Time: t0, InstanceID: id, Action: "terminate"}
}

func has(calls []string, prefix string) bool {
	return slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, prefix) })
}

// TestDeadAgent: no announcement from the node's agent within AgentWait:
// the sizer drains the node, signals the job (its batch shell, wherever it
// runs), which checkpoints; the job is requeued once, the node handed back,
// and the notice recorded. The same event again is a duplicate.
func TestDeadAgent(t *testing.T) {
	r := newRig(t)
	r.checkpointWhenSignalled()
	out, err := r.c.Handle(context.Background(), spot(inst))
	if err != nil || out != OutcomeHandled {
		t.Fatalf("Handle = %s, %v", out, err)
	}
	calls := r.sl.Calls()
	for _, want := range []string{"update a10g-1 DRAIN burst: spot interruption " + inst, "signal 7 USR1 batch", "admincomment 7 burst-requeue lost=a10g-1", "requeue 7",
		"update a10g-1 POWER_DOWN_FORCE"} {
		if !has(calls, want) {
			t.Errorf("no %q in %q", want, calls)
		}
	}
	if has(calls, "signal 8") || has(calls, "requeue 8") {
		t.Errorf("job 8 (another node) touched: %q", calls)
	}
	if waited := r.cl.Now().Sub(t0.Add(time.Second)); waited < 10*time.Second {
		t.Errorf("acted after %v, before AgentWait", waited)
	}
	if len(r.st.ins) != 1 || r.st.ins[0].Node != "a10g-1" || r.st.ins[0].Action != "terminate" {
		t.Errorf("recorded %+v", r.st.ins)
	}
	if out, _ := r.c.Handle(context.Background(), spot(inst)); out != OutcomeDuplicate {
		t.Errorf("second delivery: %s", out)
	}
}

// TestAgentAnnounced: the agent announced the interruption: the sizer does
// nothing until the deadline; then, if the run is still on the node (the
// agent died after announcing), requeues it at once without a signal.
func TestAgentAnnounced(t *testing.T) {
	r := newRig(t)
	r.st.AddInterruption(context.Background(), sizerapi.Interruption{InstanceID: inst, Node: "a10g-1", Action: "terminate", Time: t0.Add(time.Second)})
	out, err := r.c.Handle(context.Background(), spot(inst))
	if err != nil || out != OutcomeAgentLate {
		t.Fatalf("Handle = %s, %v", out, err)
	}
	if at := r.cl.Now(); at.Before(t0.Add(2*time.Minute - 20*time.Second)) {
		t.Errorf("watchdog acted at %v, before the agent's own deadline", at)
	}
	calls := r.sl.Calls()
	if has(calls, "signal") || !has(calls, "requeue 7") || !has(calls, "update a10g-1 POWER_DOWN_FORCE") {
		t.Fatalf("calls %q", calls)
	}
	if len(r.st.ins) != 1 {
		t.Errorf("the sizer recorded the agent's notice again: %+v", r.st.ins)
	}

	// the agent finished: the run left the node: nothing to do
	r = newRig(t)
	r.st.AddInterruption(context.Background(), sizerapi.Interruption{InstanceID: inst, Node: "a10g-1", Action: "terminate", Time: t0})
	r.c.o.Sleep = func(ctx context.Context, d time.Duration) {
		r.cl.Sleep(ctx, d)
		if d > time.Minute { // the watchdog's wait: meanwhile the agent requeued job 7
			r.sl.Requeue(ctx, 7)
		}
	}
	if out, err := r.c.Handle(context.Background(), spot(inst)); out != OutcomeAgent || err != nil || slices.Contains(r.sl.Calls(), "update a10g-1 DRAIN") {
		t.Fatalf("Handle = %s %v, calls %q", out, err, r.sl.Calls())
	}
	if n := strings.Count(strings.Join(r.sl.Calls(), "\n"), "requeue 7"); n != 1 {
		t.Fatalf("job 7 requeued %d times", n)
	}

	// by the deadline the instance is gone and the node runs the relaunched
	// job on a new instance: never touched
	r = newRig(t)
	r.st.AddInterruption(context.Background(), sizerapi.Interruption{InstanceID: inst, Node: "a10g-1", Action: "terminate", Time: t0})
	r.c.o.Sleep = func(ctx context.Context, d time.Duration) {
		r.cl.Sleep(ctx, d)
		if d > time.Minute {
			r.inst.insts = []cloud.Instance{{ID: "i-00b0000000000000f", Node: "a10g-1", State: "running", Capacity: capacity.Spot}}
		}
	}
	if out, _ := r.c.Handle(context.Background(), spot(inst)); out != OutcomeAgent || len(r.sl.Calls()) != 0 {
		t.Fatalf("Handle = %s, calls %q", out, r.sl.Calls())
	}
}

func TestUnreachableNodeRequeuedAtOnce(t *testing.T) {
	r := newRig(t, "NOT_RESPONDING")
	out, err := r.c.Handle(context.Background(), spot(inst))
	if err != nil || out != OutcomeRequeued {
		t.Fatalf("Handle = %s, %v", out, err)
	}
	if calls := r.sl.Calls(); has(calls, "signal") || !has(calls, "requeue 7") {
		t.Fatalf("calls %q", calls)
	}
}

func TestNotOursAndRetry(t *testing.T) {
	r := newRig(t)
	// no node tag; not the cluster's; on-demand (EC2 warns spot instances only)
	for _, id := range []string{"i-00b0000000000000b", "i-00b0000000000000c", "i-00b0000000000000d"} {
		if out, _ := r.c.Handle(context.Background(), spot(id)); out != OutcomeNotOurs {
			t.Errorf("%s: %s", id, out)
		}
	}
	if len(r.sl.Calls()) != 0 {
		t.Fatalf("calls %q", r.sl.Calls())
	}
	// a warning that waited in the queue past its deadline, or one from the future
	for _, at := range []time.Time{t0.Add(-time.Hour), t0.Add(time.Hour)} {
		ev := spot(inst)
		ev.Time = at
		if out, _ := r.c.Handle(context.Background(), ev); out != OutcomeIgnored || len(r.sl.Calls()) != 0 {
			t.Errorf("event of %v: %s, calls %q", at, out, r.sl.Calls())
		}
	}
	r.inst.err = errors.New("RequestLimitExceeded")
	if out, err := r.c.Handle(context.Background(), spot(inst)); out != OutcomeRetry || err == nil {
		t.Fatalf("EC2 down: %s %v", out, err)
	}
	r.inst.err = nil
	r.st.AddInterruption(context.Background(), sizerapi.Interruption{InstanceID: inst, Action: "terminate", Time: t0})
	if out, _ := r.c.Handle(context.Background(), spot(inst)); out == OutcomeDuplicate {
		t.Fatal("the redelivered message after a failure was taken for a duplicate")
	}
}

func TestRebalanceAndStateChange(t *testing.T) {
	r := newRig(t)
	reb := ec2events.Event{ID: "e-2", Kind: ec2events.Rebalance, Region: "us-east-1", Time: t0, InstanceID: inst}
	if out, err := r.c.Handle(context.Background(), reb); out != OutcomeHandled || err != nil {
		t.Fatalf("rebalance: %s %v", out, err)
	}
	if calls := r.sl.Calls(); !has(calls, "update a10g-1 DRAIN burst: rebalance recommendation") || has(calls, "requeue") {
		t.Fatalf("calls %q", calls)
	}
	r = newRig(t)
	r.st.AddInterruption(context.Background(), sizerapi.Interruption{InstanceID: inst, Action: "rebalance", Time: t0})
	// an agent's interruption announcement is not a rebalance one, and the
	// reverse
	if out, _ := r.c.Handle(context.Background(), reb); out != OutcomeAgent || len(r.sl.Calls()) != 0 {
		t.Fatalf("rebalance the agent announced: %s, calls %q", out, r.sl.Calls())
	}
	for _, st := range []string{"stopping", "shutting-down", "terminated", "running"} {
		out, _ := r.c.Handle(context.Background(), ec2events.Event{Kind: ec2events.StateChange, InstanceID: inst, State: st, Time: t0})
		if want := map[bool]string{true: OutcomeIgnored, false: OutcomeReconcile}[st == "running"]; out != want {
			t.Errorf("state %s: %s, want %s", st, out, want)
		}
	}
	if r.kicks != 3 {
		t.Errorf("%d reconciler kicks, want 3", r.kicks)
	}
}
