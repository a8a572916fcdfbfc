package reconcile

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/cloud/cloudfake"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
)

// cloudOf is the fake cloud holding insts (terminations fail with termErr).
func cloudOf(termErr error, insts ...cloud.Instance) *cloudfake.Provider {
	c := cloudfake.New("test")
	c.Add(insts...)
	c.TerminateErr = termErr
	return c
}

func TestRunOnce(t *testing.T) {
	fc := cloudOf(nil,
		inst("i-orphan", "gpu-2", "running", time.Hour, "10.0.0.2"),
		inst("i-gone", "gpu-1", "shutting-down", time.Hour, "10.0.0.1"),
	)
	fs := slurmfake.New(
		[]slurm.Job{{ID: 7, State: "RUNNING", Nodes: "gpu-[1,3]"}, {ID: 8, State: "PENDING"}, {ID: 9, State: "RUNNING", Nodes: "gpu-3"}},
		[]slurm.Node{node("gpu-1", "ALLOCATED"), node("gpu-2", "IDLE", "POWERED_DOWN")})
	reg := prometheus.NewRegistry()
	var recorded []string
	r, err := New(fc, fs, Options{Grace: time.Minute, Now: func() time.Time { return t0 }, Registerer: reg,
		Terminated: func(_ context.Context, id string, _ time.Time) error { recorded = append(recorded, id); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || rep.Instances != 2 || rep.Nodes != 2 {
		t.Fatalf("report %+v", rep)
	}
	if !reflect.DeepEqual(fc.Terminated(), []string{"i-orphan"}) || !reflect.DeepEqual(recorded, []string{"i-orphan"}) {
		t.Fatalf("terminated %v recorded %v", fc.Terminated(), recorded)
	}
	want := []string{"requeue 7", "update gpu-1 POWER_DOWN_FORCE burst: instance i-gone gone (shutting-down) | burst 2026-11-29T12:00:00Z: instance i-gone gone (shutting-down); requeued jobs [7]",
		"hold 7 burst 2026-11-29T12:00:00Z: requeued from gpu-1: instance i-gone gone (shutting-down)", "release 7", "startnow 7"}
	if !reflect.DeepEqual(fs.Calls(), want) {
		t.Fatalf("slurm calls\n got %q\nwant %q", fs.Calls(), want)
	}
	if j, _ := fs.Job(7); j.State != "PENDING" || j.AdminComment == "" {
		t.Fatalf("job 7 after the hand-back: %+v", j)
	}
	if !reflect.DeepEqual(rep.Results[1].Jobs, []uint32{7}) {
		t.Fatalf("hand-back jobs %v", rep.Results[1].Jobs)
	}
	got := counters(t, reg, "burst_reconcile_actions_total")
	if want := map[string]float64{"terminate/orphan": 1, "hand-back/instance-gone": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("burst_reconcile_actions_total %v, want %v", got, want)
	}
	// registering twice on one registry is an error
	if _, err := New(fc, fs, Options{Registerer: reg}); err == nil {
		t.Error("second registration accepted")
	}
}

func TestRunOnceDryRun(t *testing.T) {
	fc := cloudOf(nil, inst("i-gone", "gpu-1", "stopped", time.Hour, ""))
	fs := slurmfake.New([]slurm.Job{{ID: 7, State: "RUNNING", Nodes: "gpu-1"}}, []slurm.Node{node("gpu-1", "ALLOCATED")})
	r, _ := New(fc, fs, Options{DryRun: true, Now: func() time.Time { return t0 }})
	rep, err := r.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(fc.Terminated()) != 0 || len(fs.Calls()) != 0 {
		t.Fatalf("dry run changed things: terminated %v calls %v", fc.Terminated(), fs.Calls())
	}
	if len(rep.Results) != 2 || !reflect.DeepEqual(rep.Results[1].Jobs, []uint32{7}) || !rep.DryRun {
		t.Fatalf("report %+v", rep)
	}
}

// A sizer that no longer leads (Fence fails) plans but acts on nothing.
func TestRunOnceFenced(t *testing.T) {
	fc := cloudOf(nil, inst("i-orphan", "gpu-2", "running", time.Hour, "10.0.0.2"))
	fs := slurmfake.New(nil, []slurm.Node{node("gpu-2", "IDLE", "POWERED_DOWN")})
	deposed := errors.New("deposed")
	r, _ := New(fc, fs, Options{Grace: time.Minute, Now: func() time.Time { return t0 }, Fence: func(context.Context) error { return deposed }})
	rep, err := r.RunOnce(context.Background())
	if !errors.Is(err, deposed) {
		t.Fatalf("a fenced pass: %v, want the fence's error", err)
	}
	if len(fc.Terminated()) != 0 || len(fs.Calls()) != 0 || len(rep.Results) != 0 {
		t.Fatalf("a fenced pass acted: terminated %v calls %v results %+v", fc.Terminated(), fs.Calls(), rep.Results)
	}
}

func TestRunOnceErrors(t *testing.T) {
	fs := slurmfake.New(nil, []slurm.Node{node("gpu-1", "IDLE", "POWERED_DOWN")})
	broken := cloudOf(nil)
	broken.ListErr = errors.New("RequestLimitExceeded")
	r, _ := New(broken, fs, Options{})
	if _, err := r.RunOnce(context.Background()); err == nil || !strings.Contains(err.Error(), "listing the cluster's instances") {
		t.Fatalf("list error: %v", err)
	}
	down := slurmfake.New(nil, nil)
	down.NodesErr = errors.New("slurmctld down")
	r, _ = New(cloudOf(nil), down, Options{})
	if _, err := r.RunOnce(context.Background()); err == nil || !strings.Contains(err.Error(), "Slurm's nodes") {
		t.Fatalf("nodes error: %v", err)
	}
	// a failed termination is reported and the pass still does the rest
	fc := cloudOf(errors.New("throttled"), inst("i-1", "gpu-1", "running", time.Hour, ""))
	fs = slurmfake.New([]slurm.Job{{ID: 3, State: "RUNNING", Nodes: "gpu-2"}}, []slurm.Node{node("gpu-1", "IDLE", "POWERED_DOWN"), node("gpu-2", "ALLOCATED")})
	fs.RequeueErr = map[uint32]error{3: errors.New("job is not requeueable")}
	r, _ = New(fc, fs, Options{Grace: time.Minute, Now: func() time.Time { return t0 }})
	rep, err := r.RunOnce(context.Background())
	if err == nil || failed(rep) != 2 {
		t.Fatalf("err %v failed %d", err, failed(rep))
	}
	if calls := fs.Calls(); !strings.HasPrefix(calls[len(calls)-1], "update gpu-2 POWER_DOWN_FORCE") {
		t.Fatalf("node not handed back after a failed requeue: %v", calls)
	}
}

// TestRequeueRacesSlurm: Slurm requeued the job itself a moment before
// (its node failed), so burst's requeue finds it pending: the hand-back
// is no failure.
func TestRequeueRacesSlurm(t *testing.T) {
	fc := cloudOf(nil)
	fs := slurmfake.New([]slurm.Job{{ID: 3, State: "RUNNING", Nodes: "gpu-2"}}, []slurm.Node{node("gpu-2", "ALLOCATED")})
	fs.RequeueErr = map[uint32]error{3: fmt.Errorf("requeueing job 3: %w", slurm.Classify(0, "Job is pending execution"))}
	r, _ := New(fc, fs, Options{Grace: time.Minute, Now: func() time.Time { return t0 }})
	rep, err := r.RunOnce(context.Background())
	if err != nil || failed(rep) != 0 || len(rep.Results) != 1 {
		t.Fatalf("err %v report %+v", err, rep)
	}
	if calls := fs.Calls(); !strings.HasPrefix(calls[len(calls)-1], "update gpu-2 POWER_DOWN_FORCE") {
		t.Fatalf("node not handed back: %v", calls)
	}
}

// TestHandBackOnce: the passes right after a hand-back (EC2's state-change
// events kick them before Slurm's power-save pass acts) do not hand the
// node back again for the same lost instance; a later loss of another
// instance on the node is handed back.
func TestHandBackOnce(t *testing.T) {
	fc := cloudOf(nil, inst("i-1", "gpu-2", "running", time.Hour, "gpu-2"))
	fs := slurmfake.New(nil, []slurm.Node{node("gpu-2", "IDLE")})
	r, _ := New(fc, fs, Options{Grace: time.Minute, Now: func() time.Time { return t0 }})
	ctx := context.Background()
	if rep, err := r.RunOnce(ctx); err != nil || len(rep.Results) != 0 {
		t.Fatalf("agreeing pass: %+v %v", rep, err)
	}
	fc.TerminateIDs(ctx, []string{"i-1"}) // behind burst's back
	handBacks := func() int {
		n := 0
		for _, c := range fs.Calls() {
			if strings.HasPrefix(c, "update gpu-2 POWER_DOWN_FORCE") {
				n++
			}
		}
		return n
	}
	for range 3 {
		if _, err := r.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := handBacks(); n != 1 {
		t.Fatalf("%d hand-backs for one lost instance, want 1: %v", n, fs.Calls())
	}
	// the node comes back with a new instance, which is lost too
	fc.Add(inst("i-2", "gpu-2", "running", time.Minute, "gpu-2"))
	fs.SetNodes(node("gpu-2", "IDLE"))
	r.RunOnce(ctx)
	fc.TerminateIDs(ctx, []string{"i-2"})
	r.RunOnce(ctx)
	if n := handBacks(); n != 2 {
		t.Fatalf("%d hand-backs after a second lost instance, want 2: %v", n, fs.Calls())
	}
}

func TestResumeTimeoutAcrossPasses(t *testing.T) {
	now := t0
	fs := slurmfake.New(nil, []slurm.Node{node("gpu-1", "IDLE", "POWERED_DOWN", "POWERING_UP")})
	r, _ := New(cloudOf(nil), fs, Options{ResumeTimeout: 5 * time.Minute, Now: func() time.Time { return now }})
	for i := 0; i < 5; i++ {
		if _, err := r.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Minute)
	}
	if len(fs.Calls()) != 0 {
		t.Fatalf("acted before the resume timeout: %v", fs.Calls())
	}
	if _, err := r.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if calls := fs.Calls(); len(calls) != 1 || !strings.Contains(calls[0], "POWER_DOWN_FORCE burst: no instance after 5m0s powering up |") {
		t.Fatalf("calls %v", calls)
	}
}

// counters gathers a counter vector as "label1/label2" -> value.
func counters(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			var ls []string
			for _, l := range m.Label {
				ls = append(ls, l.GetValue())
			}
			out[strings.Join(ls, "/")] = metricValue(m)
		}
	}
	return out
}

func metricValue(m *dto.Metric) float64 {
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// failed counts the pass's results with an error.
func failed(r Report) int {
	n := 0
	for _, x := range r.Results {
		if x.Err != nil {
			n++
		}
	}
	return n
}
