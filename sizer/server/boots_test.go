package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/store"
)

func TestBootReport(t *testing.T) {
	f := start(t, nil)
	ctx := context.Background()
	cred, _ := f.node(t, "a10g-3", "g5.xlarge", "us-east-1a", false)
	c := f.client(t, cred)
	rep := sizerapi.BootReport{Node: "a10g-3", OK: true, Phases: []sizerapi.BootPhase{
		{Name: sizerapi.PhaseEC2, Seconds: 31.5}, {Name: "mount", Seconds: 2.25}, {Name: "register", Seconds: 0.3},
		{Name: "munge", Seconds: 0.001, Skipped: true}, {Name: sizerapi.PhaseTotal, Seconds: 4}}}
	if err := c.Boot(ctx, rep); err != nil {
		t.Fatal(err)
	}
	m := f.metrics(t)
	for _, want := range []string{
		`burst_boot_phase_seconds_sum{class="a10g",phase="ec2-pending-to-bootstrap"} 31.5`,
		`burst_boot_phase_seconds_sum{class="a10g",phase="mount"} 2.25`,
		`burst_boot_phase_seconds_count{class="a10g",phase="register"} 1`,
		`burst_boot_phase_seconds_sum{class="a10g",phase="bootstrap-total"} 4`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(m, `phase="munge"`) {
		t.Error("a skipped step was observed")
	}
	// another node's report, bad phases: refused
	bad := rep
	bad.Node = "a10g-4"
	if err := c.Boot(ctx, bad); !isStatus(err, 403) {
		t.Errorf("another node's report: %v", err)
	}
	for _, ph := range []sizerapi.BootPhase{{Name: "Mount; rm", Seconds: 1}, {Name: "mount", Seconds: -1}, {Name: "mount", Seconds: 1e9}} {
		bad = rep
		bad.Phases = []sizerapi.BootPhase{ph}
		if err := c.Boot(ctx, bad); !isStatus(err, 400) {
			t.Errorf("phase %+v: %v", ph, err)
		}
	}
	bad = rep
	bad.Phases = nil
	if err := c.Boot(ctx, bad); !isStatus(err, 400) {
		t.Errorf("no phases: %v", err)
	}
}

// TestBootReportStoresTimes: a node's boot report stores when slurmd
// started and the node registered (the bootstrap's start plus its steps in
// order, worked out here by hand), which the job's wait then reads; a start
// far ahead of the sizer's clock is refused.
func TestBootReportStoresTimes(t *testing.T) {
	f := start(t, nil)
	ctx := context.Background()
	cred, id := f.node(t, "a10g-3", "g5.xlarge", "us-east-1a", false)
	c := f.client(t, cred)
	began := f.clk.Now().Add(-time.Minute)
	rep := sizerapi.BootReport{Node: "a10g-3", Started: began, OK: true, Phases: []sizerapi.BootPhase{
		{Name: sizerapi.PhaseEC2, Seconds: 31.5}, {Name: "userdata", Seconds: 1}, {Name: "munge", Seconds: 0, Skipped: true}, {Name: "mount", Seconds: 2},
		{Name: sizerapi.PhaseSlurmd, Seconds: 3}, {Name: "agent", Seconds: 0.5}, {Name: sizerapi.PhaseRegister, Seconds: 0.25}, {Name: sizerapi.PhaseTotal, Seconds: 6.75}}}
	if err := c.Boot(ctx, rep); err != nil {
		t.Fatal(err)
	}
	st := f.srv.Store()
	job := sizerapi.Job{JobID: "9", JobName: "x", User: "ann", Account: "nlp", Class: "a10g", GPUsPerNode: 1}
	launched := began.Add(-40 * time.Second)
	if err := st.RecordLaunch(ctx, sizerapi.InstanceEvent{InstanceID: id, Node: "a10g-3", InstanceType: "g5.xlarge", Time: launched, Job: &job}, 1); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordRun(ctx, sizerapi.JobRun{JobID: "9", Nodes: []string{"a10g-3"}, Start: began.Add(7 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := st.StartRun(ctx, "k", sizerapi.JobStart{Job: job, Start: began.Add(7 * time.Second), Submit: launched.Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	ws, err := st.JobWaits(ctx, []string{"9"})
	if err != nil {
		t.Fatal(err)
	}
	// slurmd started after userdata, munge, mount and slurmd: 6 s; the
	// node registered after agent and register: 6.75 s
	want := store.Boot{InstanceID: id, Node: "a10g-3", Started: began, Slurmd: began.Add(6 * time.Second), Registered: began.Add(6750 * time.Millisecond)}
	if w := ws["9"]; len(w.Nodes) != 1 || w.Nodes[0].Boot == nil || *w.Nodes[0].Boot != want {
		t.Errorf("stored boot %+v, want %+v", ws["9"], want)
	}
	ahead := rep
	ahead.Started = f.clk.Now().Add(time.Hour)
	if err := c.Boot(ctx, ahead); !isStatus(err, 400) {
		t.Errorf("a boot started an hour ahead of the sizer's clock: %v", err)
	}
}
