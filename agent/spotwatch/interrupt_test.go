package spotwatch

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/imds"
	"github.com/burst-hpc/burst/internal/interruption"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm"
)

// fakeOps records every call in order. onSignal runs (in its own
// goroutine) after a job is signalled, like the job reacting. A requeued
// job leaves the node.
type fakeOps struct {
	mu       sync.Mutex
	calls    []string
	jobs     []Job
	onSignal func(id uint32)
}

func (f *fakeOps) log(s string) { f.mu.Lock(); f.calls = append(f.calls, s); f.mu.Unlock() }
func (f *fakeOps) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}
func (f *fakeOps) JobsOnNode(_ context.Context, node string) ([]Job, error) {
	f.log("jobs " + node)
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.jobs), nil
}
func (f *fakeOps) Node(context.Context, string) (slurm.Node, bool, error) {
	return slurm.Node{}, false, nil
}
func (f *fakeOps) Signal(_ context.Context, id uint32, sig string, batch bool) error {
	f.log(fmt.Sprintf("signal %d %s batch=%v", id, sig, batch))
	if f.onSignal != nil {
		go f.onSignal(id)
	}
	return nil
}
func (f *fakeOps) Note(_ context.Context, id uint32, text string) error {
	f.log(fmt.Sprintf("note %d", id))
	return nil
}
func (f *fakeOps) Requeue(_ context.Context, id uint32) error {
	f.log(fmt.Sprintf("requeue %d", id))
	f.mu.Lock()
	f.jobs = slices.DeleteFunc(f.jobs, func(j Job) bool { return j.ID == id })
	f.mu.Unlock()
	return nil
}
func (f *fakeOps) StartNow(_ context.Context, id uint32) error {
	f.log(fmt.Sprintf("startnow %d", id))
	return nil
}
func (f *fakeOps) DrainNode(_ context.Context, node, reason string) error {
	f.log(fmt.Sprintf("drain %s %q", node, reason))
	return nil
}
func (f *fakeOps) PowerDownForce(_ context.Context, node, reason string) error {
	f.log(fmt.Sprintf("power_down_force %s %q", node, reason))
	return nil
}

type fakeRecorder struct {
	mu      sync.Mutex
	recs    []sizerapi.Record
	flushes int
	ops     *fakeOps // when set, flushes are logged among its calls
}

func (r *fakeRecorder) Add(rec sizerapi.Record) error {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
	return nil
}
func (r *fakeRecorder) Flush(context.Context) error {
	r.mu.Lock()
	r.flushes++
	r.mu.Unlock()
	if r.ops != nil {
		r.ops.log("report flushed")
	}
	return nil
}

type fakeAnnouncer struct {
	mu  sync.Mutex
	got []sizerapi.Interruption
}

func (a *fakeAnnouncer) Announce(_ context.Context, in sizerapi.Interruption) error {
	a.mu.Lock()
	a.got = append(a.got, in)
	a.mu.Unlock()
	return nil
}

// TestInterruptSequence: the agent announces the notice to the sizer,
// runs internal/interruption's sequence for its node (which the package's
// own tests cover step by step), reports the result once, and does nothing
// on a second notice.
func TestInterruptSequence(t *testing.T) {
	root := t.TempDir()
	ops := &fakeOps{jobs: []Job{{ID: 11}}}
	ops.onSignal = func(id uint32) {
		dir := interruption.CheckpointDir(root, id)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(interruption.MarkerPath(dir, 0), []byte("step=40\n"), 0o644)
	}
	rec := &fakeRecorder{ops: ops}
	ann := &fakeAnnouncer{}
	h, err := New(ops, rec, Options{Node: "gpu-1", InstanceID: "i-0abc", CheckpointRoot: root,
		Grace: time.Minute, PollMarker: 5 * time.Millisecond, Announcer: ann})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := h.Interrupt(context.Background(), imds.InstanceAction{Action: "terminate", Time: time.Now().Add(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	calls := ops.Calls()
	// the report of what happened to the jobs leaves before the hand-back
	// terminates the instance (and its spool)
	want := []string{`drain gpu-1 "burst: spot interruption i-0abc"`, "jobs gpu-1", "signal 11 USR1 batch=true", "jobs gpu-1", "note 11", "requeue 11", "startnow 11",
		"report flushed", `power_down_force gpu-1 "burst: spot interruption i-0abc"`}
	if !slices.Equal(calls, want) {
		t.Fatalf("calls = %q\nwant %q", calls, want)
	}
	if len(ev.Jobs) != 1 || !ev.Jobs[0].Checkpointed || !ev.Jobs[0].Released {
		t.Fatalf("event jobs = %+v", ev.Jobs)
	}
	if len(rec.recs) != 1 || rec.recs[0].Kind != sizerapi.KindInterruption || rec.recs[0].Event.InstanceID != "i-0abc" || rec.flushes != 1 {
		t.Fatalf("recorded %+v (flushes %d)", rec.recs, rec.flushes)
	}
	if len(ann.got) != 1 || ann.got[0].Action != "terminate" || ann.got[0].InstanceID != "i-0abc" || ann.got[0].Node != "gpu-1" {
		t.Fatalf("announced %+v", ann.got)
	}
	// A second notice does nothing.
	n := len(ops.Calls())
	if _, err := h.Interrupt(context.Background(), imds.InstanceAction{Action: "terminate"}); err != nil || len(ops.Calls()) != n {
		t.Fatalf("second Interrupt made calls: %q", ops.Calls()[n:])
	}
}

// imdsServer is a minimal IMDSv2 endpoint serving whatever docs holds.
func imdsServer(t *testing.T, docs *sync.Map) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" {
			w.Header().Set("X-aws-ec2-metadata-token-ttl-seconds", "21600")
			w.Write([]byte("t0k"))
			return
		}
		if r.Header.Get("X-aws-ec2-metadata-token") != "t0k" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		if v, ok := docs.Load(strings.TrimPrefix(r.URL.Path, "/latest/meta-data/")); ok {
			w.Write([]byte(v.(string)))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestPollerDrivesHandler wires the IMDS poller to the handler against an
// IMDSv2 test server: a rebalance drains, the notice runs the sequence.
func TestPollerDrivesHandler(t *testing.T) {
	var docs sync.Map
	url := imdsServer(t, &docs)
	root := t.TempDir()
	ops := &fakeOps{jobs: []Job{{ID: 77, RestartCount: 1}}}
	ops.onSignal = func(id uint32) {
		dir := interruption.CheckpointDir(root, id)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(interruption.MarkerPath(dir, 1), nil, 0o644)
	}
	rec := &fakeRecorder{}
	h, _ := New(ops, rec, Options{Node: "gpu-9", InstanceID: "i-9", CheckpointRoot: root, PollMarker: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &imds.Poller{Client: imds.New(imds.Options{Endpoint: url}), Interval: 10 * time.Millisecond, Handle: h.Handle}
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	waitFor := func(call string) {
		giveUp := time.Now().Add(time.Minute) // a hang guard, not a performance bound
		for !slices.Contains(ops.Calls(), call) {
			if time.Now().After(giveUp) {
				t.Fatalf("no %q call in a minute; calls: %q", call, ops.Calls())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	docs.Store("events/recommendations/rebalance", `{"noticeTime":"2026-11-29T13:29:21Z"}`)
	waitFor(`drain gpu-9 "burst: rebalance recommendation i-9"`)
	if slices.ContainsFunc(ops.Calls(), func(c string) bool { return strings.HasPrefix(c, "signal") || strings.HasPrefix(c, "requeue") }) {
		t.Fatalf("a rebalance signalled or requeued a job that did not ask for it: %q", ops.Calls())
	}
	docs.Store("spot/instance-action", fmt.Sprintf(`{"action":"terminate","time":%q}`, time.Now().Add(2*time.Minute).UTC().Format(time.RFC3339)))
	waitFor(`power_down_force gpu-9 "burst: spot interruption i-9"`)
	cancel()
	<-done
	calls := ops.Calls()
	if !slices.Contains(calls, "requeue 77") || !slices.Contains(calls, "startnow 77") {
		t.Fatalf("calls = %q", calls)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.recs) != 2 || rec.recs[0].Event.Action != "rebalance" || rec.recs[1].Event.Action != "terminate" || !rec.recs[1].Event.Jobs[0].Checkpointed {
		t.Fatalf("records = %+v", rec.recs)
	}
}

// TestDeadlineHere: EC2's action time is taken as is when this node's
// clock puts it within EC2's two minutes, else (a clock off from EC2's)
// counted as two minutes from the moment the notice was seen.
func TestDeadlineHere(t *testing.T) {
	seen := time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		action time.Time
		want   time.Time
		off    bool
	}{
		{"clocks agree", seen.Add(110 * time.Second), seen.Add(110 * time.Second), false},
		{"no action time", time.Time{}, time.Time{}, false},
		{"node clock 10 min ahead", seen.Add(-8 * time.Minute), seen.Add(NoticeLead), true},
		{"node clock 10 min behind", seen.Add(12 * time.Minute), seen.Add(NoticeLead), true},
		{"exactly at the action", seen, seen.Add(NoticeLead), true},
	} {
		got, off := DeadlineHere(seen, c.action)
		if !got.Equal(c.want) || off != c.off {
			t.Errorf("%s: DeadlineHere = %v, %v; want %v, %v", c.name, got, off, c.want, c.off)
		}
	}
}

// TestInterruptNodeClockAhead: on a node whose clock runs 10 minutes
// ahead of EC2's, the notice's deadline (reported to the sizer, and what
// the checkpoint wait is cut to) is two minutes from the moment it was
// seen, not 8 minutes in the past.
func TestInterruptNodeClockAhead(t *testing.T) {
	root := t.TempDir()
	ops := &fakeOps{jobs: []Job{{ID: 11}}}
	skew := 10 * time.Minute
	h, err := New(ops, &fakeRecorder{ops: ops}, Options{Node: "gpu-1", InstanceID: "i-0abc", CheckpointRoot: root,
		Grace: 50 * time.Millisecond, PollMarker: 5 * time.Millisecond, Now: func() time.Time { return time.Now().Add(skew) }})
	if err != nil {
		t.Fatal(err)
	}
	ec2Now := time.Now()
	ev, err := h.Interrupt(context.Background(), imds.InstanceAction{Action: "terminate", Time: ec2Now.Add(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if d := ev.Deadline.Sub(ec2Now.Add(skew)); d < 110*time.Second || d > 2*time.Minute+5*time.Second {
		t.Errorf("deadline %v is %v after the notice on this clock; want EC2's two minutes", ev.Deadline, d)
	}
	if len(ev.Jobs) != 1 || !ev.Jobs[0].Requeued {
		t.Errorf("event jobs = %+v; want the job requeued", ev.Jobs)
	}
}
