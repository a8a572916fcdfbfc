package interruption

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
)

// hooked is the real adapter over the stateful Slurm fake, with onSignal
// run (in its own goroutine) after a job is signalled, like the job
// reacting, and beforeRequeue run before each requeue.
type hooked struct {
	SlurmClient
	fake          *slurmfake.Slurm
	onSignal      func(id uint32)
	beforeRequeue func(id uint32)
	failRequeue   map[uint32]bool
}

func (h *hooked) Signal(ctx context.Context, id uint32, sig string, batch bool) error {
	err := h.SlurmClient.Signal(ctx, id, sig, batch)
	if h.onSignal != nil {
		go h.onSignal(id)
	}
	return err
}

func (h *hooked) Requeue(ctx context.Context, id uint32) error {
	if h.beforeRequeue != nil {
		h.beforeRequeue(id)
	}
	if h.failRequeue[id] {
		return errors.New("Requested operation is presently disabled")
	}
	return h.SlurmClient.Requeue(ctx, id)
}

var runStart = time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)

func newHooked(jobs ...slurm.Job) *hooked {
	f := slurmfake.New(jobs, []slurm.Node{{Name: "gpu-1", State: "MIXED"}, {Name: "gpu-2", State: "MIXED"}})
	return &hooked{SlurmClient: SlurmClient{C: f}, fake: f}
}

func writeMarker(t *testing.T, root string, id, restart uint32, at time.Time) {
	t.Helper()
	dir := CheckpointDir(root, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Error(err)
		return
	}
	p := MarkerPath(dir, restart)
	if err := os.WriteFile(p, []byte("step=40\n"), 0o644); err != nil {
		t.Error(err)
		return
	}
	if !at.IsZero() {
		os.Chtimes(p, at, at)
	}
}

func index(t *testing.T, calls []string, prefix string) int {
	t.Helper()
	i := slices.IndexFunc(calls, func(c string) bool { return strings.HasPrefix(c, prefix) })
	if i < 0 {
		t.Fatalf("no call %q in %q", prefix, calls)
	}
	return i
}

// TestInterruptSequence: drain, signal every job on the node (the batch
// shell by default, the steps with checkpoint_to=steps), wait for markers
// written after the signal (a stale one does not count), note and requeue
// each job as soon as it confirmed, then hand the node back.
func TestInterruptSequence(t *testing.T) {
	root := t.TempDir()
	ops := newHooked(
		slurm.Job{ID: 11, State: "RUNNING", Nodes: "gpu-[1-2]", StartTime: runStart, Comment: "burst: checkpoint=5m"},
		slurm.Job{ID: 12, State: "RUNNING", Nodes: "gpu-1", RestartCount: 3, StartTime: runStart, Comment: "burst: checkpoint_signal=USR2"},
		slurm.Job{ID: 13, State: "RUNNING", Nodes: "gpu-[1-2]", StartTime: runStart, Comment: "burst: checkpoint_to=steps"},
		slurm.Job{ID: 14, State: "RUNNING", Nodes: "gpu-2"},
	)
	// jobs 11 and 13 checkpoint when signalled; job 12 never does, and its
	// marker from an earlier attempt of restart 3 must not count
	ops.onSignal = func(id uint32) {
		if id != 12 {
			writeMarker(t, root, id, 0, time.Time{})
		}
	}
	writeMarker(t, root, 12, 3, time.Now().Add(-time.Hour))
	h, err := New(ops, Options{CheckpointRoot: root, Grace: 2 * time.Second, PollMarker: 5 * time.Millisecond, By: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := h.Interrupt(context.Background(), Notice{Node: "gpu-1", InstanceID: "i-0abc", Action: "terminate", Deadline: time.Now().Add(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	calls := ops.fake.Calls()
	t.Logf("calls: %q", calls)
	drain := index(t, calls, "update gpu-1 DRAIN burst: spot interruption i-0abc")
	s11, s12, s13 := index(t, calls, "signal 11 USR1 batch"), index(t, calls, "signal 12 USR2 batch"), index(t, calls, "signal 13 USR1")
	if calls[s13] != "signal 13 USR1" {
		t.Errorf("checkpoint_to=steps: %q, want the steps signalled (no --batch)", calls[s13])
	}
	n11, r11 := index(t, calls, "admincomment 11 "), index(t, calls, "requeue 11")
	r12, r13 := index(t, calls, "requeue 12"), index(t, calls, "requeue 13")
	pd := index(t, calls, "update gpu-1 POWER_DOWN_FORCE burst: spot interruption i-0abc")
	if !(drain < s11 && drain < s12 && s11 < n11 && n11 < r11 && s12 < r12 && s13 < r13 && r11 < pd && r12 < pd && pd == len(calls)-1) {
		t.Fatalf("calls out of order: %q", calls)
	}
	if r11 > r12 || r13 > r12 {
		t.Errorf("jobs 11 and 13 were requeued after job 12 gave up: %q", calls)
	}
	if slices.ContainsFunc(calls, func(c string) bool { return strings.Contains(c, " 14") }) {
		t.Errorf("job 14 (not on gpu-1) was touched: %q", calls)
	}
	if len(ev.Jobs) != 3 || !ev.Jobs[0].Checkpointed || ev.Jobs[1].Checkpointed || !ev.Jobs[2].Checkpointed || !ev.Jobs[1].Released {
		t.Fatalf("event jobs = %+v", ev.Jobs)
	}
	j, _ := ops.fake.Job(11)
	n, ok := ParseNote(j.AdminComment)
	if !ok || !slices.Equal(n.Lost, []string{"gpu-1"}) || n.Instance != "i-0abc" || !n.Run.Equal(runStart) || n.Restart != 0 || n.By != "agent" {
		t.Errorf("job 11's note %q = %+v, %v", j.AdminComment, n, ok)
	}
	if j.State != "PENDING" || j.Reason != "None" || j.RestartCount != 1 || !n.Ends(slurm.Job{StartTime: runStart, RestartCount: 1}) {
		t.Errorf("job 11 after the sequence: %+v", j)
	}
}

// TestAlreadyRequeuedIsLeftAlone: when the other notice path requeued the
// job while this one waited (its run left the node), it is not requeued
// again: a second requeue would kill the relaunched run.
func TestAlreadyRequeuedIsLeftAlone(t *testing.T) {
	ops := newHooked(slurm.Job{ID: 5, State: "RUNNING", Nodes: "gpu-[1-2]", StartTime: runStart})
	ops.onSignal = func(id uint32) { ops.SlurmClient.Requeue(context.Background(), id) }
	h, _ := New(ops, Options{CheckpointRoot: t.TempDir(), Grace: 50 * time.Millisecond, PollMarker: time.Millisecond, By: "sizer"})
	ev, err := h.Interrupt(context.Background(), Notice{Node: "gpu-2", Action: "terminate"})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.Join(ops.fake.Calls(), "\n"), "requeue 5"); n != 1 {
		t.Fatalf("job requeued %d times: %q", n, ops.fake.Calls())
	}
	if ev.Jobs[0].Requeued || ev.Jobs[0].Note == "" {
		t.Fatalf("job event %+v, want a note and no requeue of its own", ev.Jobs[0])
	}
	if j, _ := ops.fake.Job(5); j.RestartCount != 1 {
		t.Fatalf("restart count %d, want 1", j.RestartCount)
	}
}

// TestTwoNodesOfOneJob: two nodes of one job interrupted together: one
// requeue, both nodes drained (the epilog holds neither for the relaunch).
func TestTwoNodesOfOneJob(t *testing.T) {
	ops := newHooked(slurm.Job{ID: 9, State: "RUNNING", Nodes: "gpu-[1-2]", StartTime: runStart})
	root := t.TempDir()
	h, _ := New(ops, Options{CheckpointRoot: root, Grace: time.Second, PollMarker: time.Millisecond, By: "agent"})
	var wg sync.WaitGroup
	var mu sync.Mutex
	signals := 0
	ops.onSignal = func(id uint32) {
		mu.Lock()
		signals++
		if signals == 2 {
			writeMarker(t, root, id, 0, time.Time{})
		}
		mu.Unlock()
	}
	for _, n := range []string{"gpu-1", "gpu-2"} {
		wg.Add(1)
		go func() { defer wg.Done(); h.Interrupt(context.Background(), Notice{Node: n, Action: "terminate"}) }()
	}
	wg.Wait()
	j, _ := ops.fake.Job(9)
	if _, ok := ParseNote(j.AdminComment); !ok || j.RestartCount != 1 {
		t.Fatalf("job %+v: want one requeue and a note", j)
	}
	calls := strings.Join(ops.fake.Calls(), "\n")
	for _, n := range []string{"gpu-1", "gpu-2"} {
		if !strings.Contains(calls, "update "+n+" DRAIN") {
			t.Errorf("%s not drained: %s", n, calls)
		}
	}
}

// TestWaitBoundedByDeadline: with the deadline closer than Grace+Reserve,
// the wait ends Reserve before the deadline (here: at once), and the job is
// still requeued.
func TestWaitBoundedByDeadline(t *testing.T) {
	ops := newHooked(slurm.Job{ID: 5, State: "RUNNING", Nodes: "gpu-1"})
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	h, _ := New(ops, Options{CheckpointRoot: t.TempDir(), Grace: time.Hour, Reserve: 30 * time.Second, By: "agent", Now: func() time.Time { return now }})
	ev, err := h.Interrupt(context.Background(), Notice{Node: "gpu-1", Action: "stop", Deadline: now.Add(20 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Jobs[0].Checkpointed || !ev.Jobs[0].Requeued || !ev.Jobs[0].Released {
		t.Fatalf("job = %+v, want not checkpointed but requeued and released", ev.Jobs[0])
	}
}

func TestStartingJobRequeuedWithoutSignal(t *testing.T) {
	ops := newHooked(slurm.Job{ID: 8, State: "CONFIGURING", Nodes: "gpu-1"})
	h, _ := New(ops, Options{CheckpointRoot: t.TempDir(), Grace: time.Hour, By: "agent"})
	ev, err := h.Interrupt(context.Background(), Notice{Node: "gpu-1", Action: "terminate"})
	if err != nil {
		t.Fatal(err)
	}
	calls := ops.fake.Calls()
	if slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "signal") }) || !slices.Contains(calls, "requeue 8") {
		t.Fatalf("calls = %q", calls)
	}
	if ev.Jobs[0].Checkpointed || !ev.Jobs[0].Released || ev.Jobs[0].Signal != "" {
		t.Fatalf("job = %+v", ev.Jobs[0])
	}
}

// TestRequeueNow: no signal, no wait; the jobs are requeued with a note
// saying why, and the node handed back.
func TestRequeueNow(t *testing.T) {
	ops := newHooked(slurm.Job{ID: 3, State: "RUNNING", Nodes: "gpu-1", StartTime: runStart})
	h, _ := New(ops, Options{CheckpointRoot: t.TempDir(), Grace: time.Hour, By: "sizer"})
	ev, err := h.RequeueNow(context.Background(), Notice{Node: "gpu-1", InstanceID: "i-0123456789abcdef0", Action: "terminate"}, "node not responding")
	if err != nil {
		t.Fatal(err)
	}
	calls := ops.fake.Calls()
	if slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "signal") }) || !ev.Jobs[0].Released {
		t.Fatalf("calls %q, event %+v", calls, ev)
	}
	j, _ := ops.fake.Job(3)
	if n, ok := ParseNote(j.AdminComment); !ok || n.Why != "node not responding" || n.By != "sizer" {
		t.Fatalf("note %q", j.AdminComment)
	}
}

// TestRequeueRuns: only the runs given, and only while they are the run
// on the node: a job relaunched since (restart count up) is left alone.
func TestRequeueRuns(t *testing.T) {
	ops := newHooked(slurm.Job{ID: 3, State: "RUNNING", Nodes: "gpu-1", RestartCount: 1}, slurm.Job{ID: 4, State: "RUNNING", Nodes: "gpu-1"})
	h, _ := New(ops, Options{CheckpointRoot: t.TempDir(), By: "sizer"})
	seen := []Job{{ID: 3, RestartCount: 0}}
	ev, err := h.RequeueRuns(context.Background(), Notice{Node: "gpu-1", Action: "terminate"}, seen, "watchdog")
	if err != nil {
		t.Fatal(err)
	}
	calls := ops.fake.Calls()
	if slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "requeue") }) || len(ev.Jobs) != 1 || ev.Jobs[0].Note == "" {
		t.Fatalf("calls %q event %+v", calls, ev)
	}
}

func TestInterruptGoesOnPastFailures(t *testing.T) {
	ops := newHooked(slurm.Job{ID: 1, State: "RUNNING", Nodes: "gpu-1"}, slurm.Job{ID: 2, State: "RUNNING", Nodes: "gpu-1"})
	ops.failRequeue = map[uint32]bool{1: true}
	h, _ := New(ops, Options{CheckpointRoot: t.TempDir(), Grace: time.Millisecond, PollMarker: time.Millisecond, By: "agent"})
	ev, err := h.Interrupt(context.Background(), Notice{Node: "gpu-1", Action: "terminate"})
	if err == nil || !strings.Contains(err.Error(), "job 1") || !strings.Contains(err.Error(), "requeueing") {
		t.Fatalf("err = %v, want job 1's requeue failure", err)
	}
	calls := ops.fake.Calls()
	if slices.Contains(calls, "startnow 1") || !slices.Contains(calls, "startnow 2") || !strings.Contains(calls[len(calls)-1], "POWER_DOWN_FORCE") {
		t.Fatalf("calls = %q", calls)
	}
	if ev.Jobs[0].Requeued || !ev.Jobs[1].Released || ev.Error == "" {
		t.Fatalf("event = %+v", ev)
	}
}

// TestRebalance: drained; only a job with rebalance=checkpoint gets SIGUSR2
// on its batch shell; nothing is requeued.
func TestRebalance(t *testing.T) {
	ops := newHooked(slurm.Job{ID: 1, State: "RUNNING", Nodes: "gpu-1", Comment: "burst: rebalance=checkpoint"},
		slurm.Job{ID: 2, State: "RUNNING", Nodes: "gpu-1"})
	h, _ := New(ops, Options{CheckpointRoot: t.TempDir(), By: "agent"})
	ev, err := h.Rebalance(context.Background(), Notice{Node: "gpu-1", InstanceID: "i-9"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"update gpu-1 DRAIN burst: rebalance recommendation i-9 | ", "signal 1 USR2 batch"}
	if got := ops.fake.Calls(); !slices.Equal(got, want) {
		t.Fatalf("calls = %q, want %q", got, want)
	}
	if len(ev.Jobs) != 1 || ev.Jobs[0].JobID != 1 || ev.Action != "rebalance" {
		t.Fatalf("event %+v", ev)
	}
}

func TestSlurmClientAdapter(t *testing.T) {
	fs := slurmfake.New([]slurm.Job{
		{ID: 1, State: "RUNNING", Nodes: "gpu-[1-3]", RestartCount: 2, Comment: "burst: params=7B checkpoint_signal=SIGUSR2 checkpoint_to=steps rebalance=checkpoint"},
		{ID: 2, State: "RUNNING", Nodes: "gpu-4"},
		{ID: 3, State: "PENDING"},
		{ID: 4, State: "RUNNING", Nodes: "gpu-2", Comment: "burst: bogus=1"},
		{ID: 5, State: "COMPLETING", Nodes: "gpu-2"},
		{ID: 6, State: "CONFIGURING", Nodes: "gpu-[1-2]"},
	}, []slurm.Node{{Name: "gpu-2", State: "IDLE"}})
	got, err := SlurmClient{C: fs}.JobsOnNode(context.Background(), "gpu-2")
	if err != nil {
		t.Fatal(err)
	}
	ids := []uint32{}
	for _, j := range got {
		ids = append(ids, j.ID)
	}
	if !slices.Equal(ids, []uint32{1, 4, 6}) || got[0].CheckpointSignal != "USR2" || got[0].CheckpointTo != "steps" || got[0].Rebalance != "checkpoint" ||
		got[0].RestartCount != 2 || !slices.Equal(got[0].Nodes, []string{"gpu-1", "gpu-2", "gpu-3"}) || got[1].CheckpointSignal != "" || !got[2].Starting {
		t.Fatalf("JobsOnNode = %+v", got)
	}
	if n, ok, err := (SlurmClient{C: fs}).Node(context.Background(), "gpu-2"); err != nil || !ok || n.State != "IDLE" {
		t.Fatalf("Node = %+v %v %v", n, ok, err)
	}
	if _, ok, _ := (SlurmClient{C: fs}).Node(context.Background(), "gpu-9"); ok {
		t.Fatal("unknown node found")
	}
	SlurmClient{C: fs}.PowerDownForce(context.Background(), "gpu-2", "burst: spot interruption i-1")
	if ups := fs.Updates(); len(ups) != 1 || ups[0].State != "POWER_DOWN_FORCE" || ups[0].Names[0] != "gpu-2" {
		t.Fatalf("updates = %+v", ups)
	}
}

func TestMarkerWritten(t *testing.T) {
	dir := t.TempDir()
	p := MarkerPath(dir, 3)
	if p != dir+"/.checkpointed-3" {
		t.Fatal(p)
	}
	now := time.Now()
	if MarkerWritten(p, now.Add(-time.Hour)) {
		t.Fatal("a missing marker counts")
	}
	os.WriteFile(p, nil, 0o644)
	if !MarkerWritten(p, now.Add(-time.Second)) || MarkerWritten(p, now.Add(time.Hour)) {
		t.Fatal("marker mtime rule")
	}
	os.Remove(p)
	os.Symlink("/etc/passwd", p)
	if MarkerWritten(p, time.Time{}) {
		t.Fatal("a symlink counts as a marker")
	}
}

// TestEvacuate: a GPU fault runs the same sequence with its own node
// reason (drain and hand-back) and says why in the job's note.
func TestEvacuate(t *testing.T) {
	root := t.TempDir()
	ops := newHooked(slurm.Job{ID: 5, State: "RUNNING", Nodes: "gpu-1", StartTime: runStart})
	ops.onSignal = func(id uint32) { writeMarker(t, root, id, 0, time.Time{}) }
	h, _ := New(ops, Options{CheckpointRoot: root, Grace: 5 * time.Second, PollMarker: 5 * time.Millisecond, By: "agent"})
	reason := "gpu: Xid 79 on GPU 3 (0000:b3:00.0)"
	ev, err := h.Evacuate(context.Background(), Notice{Node: "gpu-1", InstanceID: "i-0abc", Action: "gpu_fault", Reason: reason}, reason)
	if err != nil {
		t.Fatal(err)
	}
	calls := ops.fake.Calls()
	d, s, r := index(t, calls, "update gpu-1 DRAIN "+reason), index(t, calls, "signal 5 USR1 batch"), index(t, calls, "requeue 5")
	pd := index(t, calls, "update gpu-1 POWER_DOWN_FORCE "+reason)
	if !(d < s && s < r && r < pd) || len(ev.Jobs) != 1 || !ev.Jobs[0].Checkpointed {
		t.Fatalf("calls %q, event %+v", calls, ev)
	}
	j, _ := ops.fake.Job(5)
	if n, ok := ParseNote(j.AdminComment); !ok || n.Why != reason {
		t.Fatalf("note %q", j.AdminComment)
	}
}
