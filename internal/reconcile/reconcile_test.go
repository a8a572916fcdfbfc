package reconcile

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/slurm"
)

type fakeCloud struct {
	insts      []cloud.Instance
	listErr    error
	terminated []string
	termErr    error
}

func (f *fakeCloud) List(context.Context) ([]cloud.Instance, error) { return f.insts, f.listErr }
func (f *fakeCloud) TerminateIDs(_ context.Context, ids []string) error {
	if f.termErr != nil {
		return f.termErr
	}
	f.terminated = append(f.terminated, ids...)
	return nil
}

type fakeSlurm struct {
	nodes   []slurm.Node
	jobs    []slurm.Job
	calls   []string
	rqErr   map[uint32]error
	nodeErr error
}

func (f *fakeSlurm) Nodes(context.Context, ...string) ([]slurm.Node, error) {
	return f.nodes, f.nodeErr
}

// JobStates reports the jobs q selects; requeued jobs are pending.
func (f *fakeSlurm) JobStates(_ context.Context, q slurm.JobFilter) ([]slurm.JobState, error) {
	var out []slurm.JobState
	for _, j := range f.jobs {
		for _, c := range f.calls {
			if c == "requeue "+itoa(j.ID) {
				j.State, j.Nodes = "PENDING", ""
			}
		}
		if q.Matches(j) {
			out = append(out, j.Brief())
		}
	}
	return out, nil
}
func (f *fakeSlurm) UpdateNodes(_ context.Context, us ...slurm.NodeUpdate) error {
	for _, u := range us {
		f.calls = append(f.calls, "update "+strings.Join(u.Names, ",")+" "+u.State+" "+u.Reason+" | "+u.Comment)
	}
	return nil
}
func (f *fakeSlurm) Requeue(_ context.Context, id uint32) error {
	f.calls = append(f.calls, "requeue "+itoa(id))
	return f.rqErr[id]
}
func (f *fakeSlurm) Hold(_ context.Context, id uint32, reason string) error {
	f.calls = append(f.calls, "hold "+itoa(id)+" "+reason)
	return nil
}
func (f *fakeSlurm) Release(_ context.Context, id uint32) error {
	f.calls = append(f.calls, "release "+itoa(id))
	return nil
}
func (f *fakeSlurm) StartNow(_ context.Context, id uint32) error {
	f.calls = append(f.calls, "startnow "+itoa(id))
	return nil
}

func itoa(id uint32) string { return fmtUint(id) }
func fmtUint(v uint32) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for v > 0 {
		b = append([]byte{byte('0' + v%10)}, b...)
		v /= 10
	}
	return string(b)
}

func TestRunOnce(t *testing.T) {
	fc := &fakeCloud{insts: []cloud.Instance{
		inst("i-orphan", "gpu-2", "running", time.Hour, "10.0.0.2"),
		inst("i-gone", "gpu-1", "shutting-down", time.Hour, "10.0.0.1"),
	}}
	fs := &fakeSlurm{
		nodes: []slurm.Node{node("gpu-1", "ALLOCATED"), node("gpu-2", "IDLE", "POWERED_DOWN")},
		jobs: []slurm.Job{{ID: 7, State: "RUNNING", Nodes: "gpu-[1,3]"}, {ID: 8, State: "PENDING"},
			{ID: 9, State: "RUNNING", Nodes: "gpu-3"}},
	}
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
	if !reflect.DeepEqual(fc.terminated, []string{"i-orphan"}) || !reflect.DeepEqual(recorded, []string{"i-orphan"}) {
		t.Fatalf("terminated %v recorded %v", fc.terminated, recorded)
	}
	want := []string{"requeue 7", "update gpu-1 POWER_DOWN_FORCE burst: instance i-gone gone (shutting-down) | burst 2026-11-29T12:00:00Z: instance i-gone gone (shutting-down); requeued jobs [7]",
		"hold 7 burst 2026-11-29T12:00:00Z: requeued from gpu-1: instance i-gone gone (shutting-down)", "release 7", "startnow 7"}
	if !reflect.DeepEqual(fs.calls, want) {
		t.Fatalf("slurm calls\n got %q\nwant %q", fs.calls, want)
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
	fc := &fakeCloud{insts: []cloud.Instance{inst("i-gone", "gpu-1", "stopped", time.Hour, "")}}
	fs := &fakeSlurm{nodes: []slurm.Node{node("gpu-1", "ALLOCATED")}, jobs: []slurm.Job{{ID: 7, State: "RUNNING", Nodes: "gpu-1"}}}
	r, _ := New(fc, fs, Options{DryRun: true, Now: func() time.Time { return t0 }})
	rep, err := r.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(fc.terminated) != 0 || len(fs.calls) != 0 {
		t.Fatalf("dry run changed things: terminated %v calls %v", fc.terminated, fs.calls)
	}
	if len(rep.Results) != 2 || !reflect.DeepEqual(rep.Results[1].Jobs, []uint32{7}) || !rep.DryRun {
		t.Fatalf("report %+v", rep)
	}
}

func TestRunOnceErrors(t *testing.T) {
	fs := &fakeSlurm{nodes: []slurm.Node{node("gpu-1", "IDLE", "POWERED_DOWN")}}
	r, _ := New(&fakeCloud{listErr: errors.New("RequestLimitExceeded")}, fs, Options{})
	if _, err := r.RunOnce(context.Background()); err == nil || !strings.Contains(err.Error(), "listing the cluster's instances") {
		t.Fatalf("list error: %v", err)
	}
	r, _ = New(&fakeCloud{}, &fakeSlurm{nodeErr: errors.New("slurmctld down")}, Options{})
	if _, err := r.RunOnce(context.Background()); err == nil || !strings.Contains(err.Error(), "Slurm's nodes") {
		t.Fatalf("nodes error: %v", err)
	}
	// a failed termination is reported and the pass still does the rest
	fc := &fakeCloud{insts: []cloud.Instance{inst("i-1", "gpu-1", "running", time.Hour, "")}, termErr: errors.New("throttled")}
	fs = &fakeSlurm{nodes: []slurm.Node{node("gpu-1", "IDLE", "POWERED_DOWN"), node("gpu-2", "ALLOCATED")},
		jobs: []slurm.Job{{ID: 3, State: "RUNNING", Nodes: "gpu-2"}}, rqErr: map[uint32]error{3: errors.New("job is not requeueable")}}
	r, _ = New(fc, fs, Options{Grace: time.Minute, Now: func() time.Time { return t0 }})
	rep, err := r.RunOnce(context.Background())
	if err == nil || rep.Failed() != 2 {
		t.Fatalf("err %v failed %d", err, rep.Failed())
	}
	if got := fs.calls[len(fs.calls)-1]; !strings.HasPrefix(got, "update gpu-2 POWER_DOWN_FORCE") {
		t.Fatalf("node not handed back after a failed requeue: %v", fs.calls)
	}
}

func TestResumeTimeoutAcrossPasses(t *testing.T) {
	now := t0
	fs := &fakeSlurm{nodes: []slurm.Node{node("gpu-1", "IDLE", "POWERED_DOWN", "POWERING_UP")}}
	r, _ := New(&fakeCloud{}, fs, Options{ResumeTimeout: 5 * time.Minute, Now: func() time.Time { return now }})
	for i := 0; i < 5; i++ {
		if _, err := r.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Minute)
	}
	if len(fs.calls) != 0 {
		t.Fatalf("acted before the resume timeout: %v", fs.calls)
	}
	if _, err := r.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(fs.calls) != 1 || !strings.Contains(fs.calls[0], "POWER_DOWN_FORCE burst: no instance after 5m0s powering up |") {
		t.Fatalf("calls %v", fs.calls)
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
