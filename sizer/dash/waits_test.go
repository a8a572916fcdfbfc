package dash

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/store"
)

// TestSplitWait: each case's parts worked out by hand from its timeline
// (seconds after the submission).
func TestSplitWait(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	node := func(name string, launched, slurmd, registered int, report bool) store.WaitNode {
		n := store.WaitNode{Node: name, InstanceID: "i-" + name, Launched: at(launched)}
		if report {
			n.Boot = &store.Boot{Started: at(launched + 1), Slurmd: at(slurmd), Registered: at(registered)}
			if registered == 0 { // not seen
				n.Boot.Registered = time.Time{}
			}
		}
		return n
	}
	type want struct {
		total, queue, boot, reg float64
		node                    string
		report                  bool
	}
	cases := []struct {
		name  string
		start int
		nodes []store.WaitNode
		want  *want
	}{
		// queue 0-5 and 52-53, boot 5-50, registration 50-52
		{"fresh node", 53, []store.WaitNode{node("a", 5, 50, 52, true)}, &want{53, 6, 45, 2, "a", true}},
		// the node was up and registered before the submission
		{"warm node", 2, []store.WaitNode{node("a", -600, -550, -548, true)}, &want{2, 2, 0, 0, "a", true}},
		// powered up before the submission, still booting at it: boot 0-10, registration 10-12, queue 12-15
		{"node booting at submission", 15, []store.WaitNode{node("a", -20, 10, 12, true)}, &want{15, 3, 10, 2, "a", true}},
		// no boot report: boot is launch to start
		{"no boot report", 53, []store.WaitNode{node("a", 5, 0, 0, false)}, &want{53, 5, 48, 0, "a", false}},
		// two nodes: b registered last (60), so 5-50 boot, 50-60 registration, 0-5 and 60-61 queue
		{"two nodes", 61, []store.WaitNode{node("a", 5, 38, 40, true), node("b", 5, 50, 60, true)}, &want{61, 6, 45, 10, "b", true}},
		// slurmd started but never reported registered: registration to the start
		{"registration not seen", 40, []store.WaitNode{node("a", 5, 30, 0, true)}, &want{40, 5, 25, 10, "a", true}},
		// the node's clock behind the head node's: nothing before the launch counts as boot
		{"node clock behind", 10, []store.WaitNode{node("a", 5, 3, 4, true)}, &want{10, 10, 0, 0, "a", true}},
		// no instance recorded on its nodes: all queue
		{"no instance", 30, []store.WaitNode{{Node: "a"}}, &want{30, 30, 0, 0, "", false}},
		{"no nodes", 30, nil, &want{30, 30, 0, 0, "", false}},
		{"start before submission", -1, []store.WaitNode{node("a", 5, 50, 52, true)}, nil},
	}
	for _, c := range cases {
		got := splitWait(store.JobWait{JobID: "1", Submitted: at(0), Started: at(c.start), Nodes: c.nodes})
		if c.want == nil {
			if got != nil {
				t.Errorf("%s: got %+v, want none", c.name, got)
			}
			continue
		}
		w := c.want
		if got == nil || got.TotalS != w.total || got.QueueS != w.queue || got.BootS != w.boot || got.RegistrationS != w.reg || got.Node != w.node || got.BootReport != w.report ||
			!got.Submitted.Equal(at(0)) || !got.Started.Equal(at(c.start)) {
			t.Errorf("%s: got %+v, want %+v", c.name, got, *w)
		}
	}
	if got := splitWait(store.JobWait{JobID: "1", Started: at(5)}); got != nil {
		t.Errorf("no submit time: %+v", got)
	}
}

// TestWaitStats: nearest-rank percentiles, worked out by hand.
func TestWaitStats(t *testing.T) {
	var ds []time.Duration
	for i := 20; i >= 1; i-- { // 200, 190, ..., 10 s, unsorted
		ds = append(ds, time.Duration(i*10)*time.Second)
	}
	st := waitStats(ds, now)
	// rank ceil(0.5*20) = 10th: 100 s; ceil(0.95*20) = 19th: 190 s
	if st.Jobs != 20 || st.P50S != 100 || st.P95S != 190 {
		t.Errorf("20 waits: %+v", st)
	}
	if st := waitStats([]time.Duration{7 * time.Second}, now); st.P50S != 7 || st.P95S != 7 || st.Jobs != 1 {
		t.Errorf("one wait: %+v", st)
	}
	if st := waitStats(nil, now); st.Jobs != 0 || st.P50S != 0 {
		t.Errorf("none: %+v", st)
	}
}

// TestWaitsOnJobsAndFleet: the Jobs view shows each job's split wait from
// what the store recorded (launch, boot report, run, start with Slurm's
// submit time), and the Fleet view each class's p50/p95 of the waits of
// the day, in the caller's scope.
func TestWaitsOnJobsAndFleet(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// one job: launched, booted, started; the node then ends
	run := func(id, account, class, node string, submit, launch, slurmd, registered, start time.Time, boot bool) {
		t.Helper()
		j := sizerapi.Job{JobID: id, JobName: "w", User: "u-" + account, Account: account, Class: class, GPUModel: "l4", GPUsPerNode: 1, Nodes: 1}
		must(st.RecordLaunch(ctx, sizerapi.InstanceEvent{InstanceID: "i-" + id, Node: node, InstanceType: "g6.xlarge", Capacity: "spot", Account: account, Time: launch, Job: &j}, 0.5))
		must(st.StartRun(ctx, "k-"+id, sizerapi.JobStart{Job: j, Start: launch}))
		if boot {
			must(st.RecordBoot(ctx, store.Boot{InstanceID: "i-" + id, Node: node, Started: launch.Add(time.Second), Slurmd: slurmd, Registered: registered}))
		}
		must(st.RecordRun(ctx, sizerapi.JobRun{JobID: id, Account: account, User: j.User, Nodes: []string{node}, GPUsPerNode: 1, Start: start}))
		must(st.StartRun(ctx, "k-"+id, sizerapi.JobStart{Job: j, Start: start, Submit: submit}))
		_, err := st.RecordTerminate(ctx, "i-"+id, start.Add(10*time.Minute))
		must(err)
	}
	// class l4, account nlp: 20 jobs waiting 10, 20, ..., 200 s, each
	// queued 3 s, then booting, then 2 s registering, 1 s to the start
	for i := 1; i <= 20; i++ {
		sub := now.Add(-time.Duration(i) * time.Hour)
		wait := time.Duration(i*10) * time.Second
		start := sub.Add(wait)
		run(fmt.Sprint(100+i), "nlp", "l4", fmt.Sprintf("l4-%d", 1+i%2), sub, sub.Add(3*time.Second), start.Add(-3*time.Second), start.Add(-time.Second), start, true)
	}
	// class l4x4, account vision: one job of the day (53 s, no boot
	// report), one of yesterday (left out)
	s1 := now.Add(-2 * time.Hour)
	run("200", "vision", "l4x4", "l4x4-1", s1, s1.Add(5*time.Second), time.Time{}, time.Time{}, s1.Add(53*time.Second), false)
	s2 := now.Add(-30 * time.Hour)
	run("201", "vision", "l4x4", "l4x4-1", s2, s2.Add(5*time.Second), time.Time{}, time.Time{}, s2.Add(999*time.Second), false)

	classes := []sizing.Class{
		{Name: "l4", GPUModel: "l4", GPUsPerNode: 1, MaxNodes: 2, InstanceTypes: []string{"g6.xlarge"}},
		{Name: "l4x4", GPUModel: "l4", GPUsPerNode: 4, MaxNodes: 1, InstanceTypes: []string{"g6.12xlarge"}},
	}
	pol, err := sizing.New(catalog.Default(), "us-east-1", classes, sizing.Params{})
	must(err)
	src, err := New(Options{Store: st, Policy: pol, Now: func() time.Time { return now }, JobsWindow: 3 * 24 * time.Hour})
	must(err)

	jv, err := src.Jobs(ctx, Scope{}, JobsQuery{})
	must(err)
	got := map[string]*sizerapi.JobWait{}
	for _, r := range jv.Jobs {
		got[r.JobID] = r.Wait
	}
	// job 107: waited 70 s: queue 0-3 and 69-70, boot 3-67, registration 67-69
	if w := got["107"]; w == nil || w.TotalS != 70 || w.QueueS != 4 || w.BootS != 64 || w.RegistrationS != 2 || !w.BootReport || w.Node != "l4-2" {
		t.Errorf("job 107's wait: %+v", w)
	}
	// job 200: 53 s, queue 5, boot (with registration) 48
	if w := got["200"]; w == nil || w.TotalS != 53 || w.QueueS != 5 || w.BootS != 48 || w.RegistrationS != 0 || w.BootReport {
		t.Errorf("job 200's wait: %+v", w)
	}
	if one, err := src.Job(ctx, Scope{}, "107"); err != nil || one.Wait == nil || one.Wait.TotalS != 70 {
		t.Errorf("job 107 alone: %+v %v", one.Wait, err)
	}

	stats := func(sc Scope) map[string]sizerapi.WaitStats {
		t.Helper()
		fv, err := src.Fleet(ctx, sc)
		must(err)
		out := map[string]sizerapi.WaitStats{}
		for _, c := range fv.Classes {
			out[c.Class] = c.Waits
		}
		return out
	}
	since := now.Add(-24 * time.Hour)
	all := stats(Scope{})
	// l4: 20 waits 10..200 s: p50 the 10th (100 s), p95 the 19th (190 s)
	if w := all["l4"]; w.Jobs != 20 || w.P50S != 100 || w.P95S != 190 || !w.Since.Equal(since) {
		t.Errorf("l4's waits: %+v", w)
	}
	if w := all["l4x4"]; w.Jobs != 1 || w.P50S != 53 || w.P95S != 53 {
		t.Errorf("l4x4's waits (yesterday's job left out): %+v", w)
	}
	vision := stats(Scope{Account: "vision"})
	if w := vision["l4"]; w.Jobs != 0 {
		t.Errorf("account vision sees nlp's waits: %+v", w)
	}
	if w := vision["l4x4"]; w.Jobs != 1 || w.P50S != 53 {
		t.Errorf("account vision's l4x4 waits: %+v", w)
	}
}
