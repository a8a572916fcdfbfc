package interrupt

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/imds"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
)

// fakeOps records every call in order. onSignal runs (in its own
// goroutine) after a job is signalled, like the job reacting.
type fakeOps struct {
	mu         sync.Mutex
	calls      []string
	jobs       []Job
	onSignal   func(id uint32)
	failReq    map[uint32]bool
	afterDrain func()
}

func (f *fakeOps) log(s string) { f.mu.Lock(); f.calls = append(f.calls, s); f.mu.Unlock() }
func (f *fakeOps) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}
func (f *fakeOps) JobsOnNode(_ context.Context, node string) ([]Job, error) {
	f.log("jobs " + node)
	return f.jobs, nil
}
func (f *fakeOps) Signal(_ context.Context, id uint32, sig string, batch bool) error {
	f.log(fmt.Sprintf("signal %d %s batch=%v", id, sig, batch))
	if f.onSignal != nil {
		go f.onSignal(id)
	}
	return nil
}
func (f *fakeOps) Requeue(_ context.Context, id uint32) error {
	f.log(fmt.Sprintf("requeue %d", id))
	if f.failReq[id] {
		return errors.New("Requested operation is presently disabled")
	}
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

func indexOf(t *testing.T, calls []string, s string) int {
	t.Helper()
	i := slices.Index(calls, s)
	if i < 0 {
		t.Fatalf("call %q missing from %q", s, calls)
	}
	return i
}

func TestInterruptSequence(t *testing.T) {
	root := t.TempDir()
	ops := &fakeOps{jobs: []Job{{ID: 11, RestartCount: 0}, {ID: 12, RestartCount: 3, CheckpointSignal: "USR2"}}}
	// Job 11 checkpoints when signalled; job 12 never does, and a marker
	// left from an earlier attempt of restart 3 must not count.
	ops.onSignal = func(id uint32) {
		if id != 11 {
			return
		}
		dir := CheckpointDir(root, id)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(MarkerPath(dir, 0), []byte("step=40\n"), 0o644)
	}
	os.MkdirAll(CheckpointDir(root, 12), 0o755)
	os.WriteFile(MarkerPath(CheckpointDir(root, 12), 3), nil, 0o644)

	rec := &fakeRecorder{ops: ops}
	ann := &fakeAnnouncer{}
	h, err := New(ops, rec, Options{Node: "gpu-1", InstanceID: "i-0abc", CheckpointRoot: root,
		Grace: 2 * time.Second, PollMarker: 5 * time.Millisecond, Announcer: ann})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := h.Interrupt(context.Background(), imds.InstanceAction{Action: "terminate", Time: time.Now().Add(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	calls := ops.Calls()
	t.Logf("calls: %q", calls)
	reason := `"burst: spot interruption i-0abc"`
	drain := indexOf(t, calls, "drain gpu-1 "+reason)
	list := indexOf(t, calls, "jobs gpu-1")
	s11 := indexOf(t, calls, "signal 11 USR1 batch=true")
	s12 := indexOf(t, calls, "signal 12 USR2 batch=true")
	r11, u11 := indexOf(t, calls, "requeue 11"), indexOf(t, calls, "startnow 11")
	r12, u12 := indexOf(t, calls, "requeue 12"), indexOf(t, calls, "startnow 12")
	pd := indexOf(t, calls, "power_down_force gpu-1 "+reason)
	if !(drain < list && list < s11 && list < s12 && s11 < r11 && r11 < u11 && s12 < r12 && r12 < u12 && u11 < pd && u12 < pd) {
		t.Fatalf("calls out of order: %q", calls)
	}
	// Job 11 is requeued as soon as it checkpointed, not after job 12's wait.
	if r11 > r12 {
		t.Fatalf("job 11 requeued after job 12 gave up: %q", calls)
	}
	if pd != len(calls)-1 {
		t.Fatalf("POWER_DOWN_FORCE is not last: %q", calls)
	}
	// the report of what happened to the jobs leaves before the hand-back
	// terminates the instance (and its spool)
	if f := indexOf(t, calls, "report flushed"); !(u11 < f && u12 < f && f < pd) {
		t.Fatalf("the interruption report is not flushed between the requeues and the hand-back: %q", calls)
	}
	if len(ev.Jobs) != 2 || !ev.Jobs[0].Checkpointed || ev.Jobs[1].Checkpointed || !ev.Jobs[0].Released || !ev.Jobs[1].Requeued {
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

// TestWaitBoundedByDeadline: with the deadline closer than Grace+Reserve,
// the wait ends Reserve before the deadline (here: at once), and the job is
// still requeued.
func TestWaitBoundedByDeadline(t *testing.T) {
	ops := &fakeOps{jobs: []Job{{ID: 5}}}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	h, _ := New(ops, nil, Options{Node: "n", CheckpointRoot: t.TempDir(), Grace: time.Hour, Reserve: 30 * time.Second,
		Now: func() time.Time { return now }})
	ev, err := h.Interrupt(context.Background(), imds.InstanceAction{Action: "stop", Time: now.Add(20 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Jobs[0].Checkpointed || !ev.Jobs[0].Requeued || !ev.Jobs[0].Released {
		t.Fatalf("job = %+v, want not checkpointed but requeued and released", ev.Jobs[0])
	}
}

func TestStartingJobRequeuedWithoutSignal(t *testing.T) {
	ops := &fakeOps{jobs: []Job{{ID: 8, Starting: true}}}
	h, _ := New(ops, nil, Options{Node: "n", CheckpointRoot: t.TempDir(), Grace: time.Hour})
	ev, err := h.Interrupt(context.Background(), imds.InstanceAction{Action: "terminate"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`drain n "burst: spot interruption (instance id unknown)"`, "jobs n", "requeue 8", "startnow 8", `power_down_force n "burst: spot interruption (instance id unknown)"`}
	if got := ops.Calls(); !slices.Equal(got, want) {
		t.Fatalf("calls = %q, want %q", got, want)
	}
	if ev.Jobs[0].Checkpointed || !ev.Jobs[0].Released {
		t.Fatalf("job = %+v", ev.Jobs[0])
	}
}

func TestInterruptGoesOnPastFailures(t *testing.T) {
	ops := &fakeOps{jobs: []Job{{ID: 1}, {ID: 2}}, failReq: map[uint32]bool{1: true}}
	h, _ := New(ops, nil, Options{Node: "n", CheckpointRoot: t.TempDir(), Grace: time.Millisecond, PollMarker: time.Millisecond})
	ev, err := h.Interrupt(context.Background(), imds.InstanceAction{Action: "terminate"})
	if err == nil || !strings.Contains(err.Error(), "job 1") || !strings.Contains(err.Error(), "requeueing") {
		t.Fatalf("err = %v, want job 1's requeue failure", err)
	}
	calls := ops.Calls()
	if slices.Contains(calls, "startnow 1") || !slices.Contains(calls, "startnow 2") || !strings.HasPrefix(calls[len(calls)-1], "power_down_force") {
		t.Fatalf("calls = %q", calls)
	}
	if ev.Jobs[0].Requeued || !ev.Jobs[1].Released || ev.Error == "" {
		t.Fatalf("event = %+v", ev)
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
		dir := CheckpointDir(root, id)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(MarkerPath(dir, 1), nil, 0o644)
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
	if slices.Contains(ops.Calls(), "jobs gpu-9") {
		t.Fatal("rebalance touched jobs")
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

func TestSlurmClientAdapter(t *testing.T) {
	fs := slurmfake.New([]slurm.Job{
		{ID: 1, State: "RUNNING", Nodes: "gpu-[1-3]", RestartCount: 2, Comment: "burst: params=7B checkpoint_signal=SIGUSR2"},
		{ID: 2, State: "RUNNING", Nodes: "gpu-4"},
		{ID: 3, State: "PENDING"},
		{ID: 4, State: "RUNNING", Nodes: "gpu-2", Comment: "burst: bogus=1"},
		{ID: 5, State: "COMPLETING", Nodes: "gpu-2"},
		{ID: 6, State: "CONFIGURING", Nodes: "gpu-[1-2]"},
	}, nil)
	got, err := SlurmClient{C: fs}.JobsOnNode(context.Background(), "gpu-2")
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{{ID: 1, RestartCount: 2, CheckpointSignal: "USR2"}, {ID: 4}, {ID: 6, Starting: true}}
	if !slices.Equal(got, want) {
		t.Fatalf("JobsOnNode = %+v, want %+v", got, want)
	}
	SlurmClient{C: fs}.PowerDownForce(context.Background(), "gpu-2", "burst: spot interruption i-1")
	if ups := fs.Updates(); len(ups) != 1 || ups[0].State != "POWER_DOWN_FORCE" || ups[0].Names[0] != "gpu-2" {
		t.Fatalf("updates = %+v", ups)
	}
}

func TestMarkerPath(t *testing.T) {
	if got := MarkerPath(CheckpointDir("/fsx/ckpt", 42), 3); got != filepath.Join("/fsx/ckpt", "42", ".checkpointed-3") {
		t.Fatal(got)
	}
}
