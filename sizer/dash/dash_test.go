package dash

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/breaker"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
	"github.com/burst-hpc/burst/sizer/store"
)

var now = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

func at(day, hour, min int) time.Time { return time.Date(2026, 3, day, hour, min, 0, 0, time.UTC) }

const gib = 1 << 30

// fixture: two accounts, four jobs on two classes, by hand:
//
//	i-1 l4-1    g6.xlarge   spot      $0.40/h  nlp/ann    job 11 "ft"     Mar 10 09:00-11:00  $0.80
//	i-4 l4-2    g6.xlarge   on-demand $0.8048  nlp/ann    job 12 "ft"     Mar 10 08:00-08:30  $0.4024
//	i-3 l4x4-1  g6.12xlarge spot      $2.00/h  vision/bob job 20 "train"  Mar 9 14:00-16:00   $4.00 (spot notice, checkpointed, requeued)
//	i-2 l4x4-1  g6.12xlarge spot      $2.00/h  vision/bob job 21 "train"  Mar 10 10:00-       $4.00 to now, live
//
// The "train" jobs ask for 4 GPUs and use 1 (80% util, 10 GiB peak).
func fixture(t *testing.T, sl SlurmReader) (*Source, string) {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state")
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	classes := []sizing.Class{
		{Name: "l4", GPUModel: "l4", GPUsPerNode: 1, MaxNodes: 2, InstanceTypes: []string{"g6.xlarge"}},
		{Name: "l4x4", GPUModel: "l4", GPUsPerNode: 4, MaxNodes: 1, InstanceTypes: []string{"g6.12xlarge"}},
	}
	pol, err := sizing.New(catalog.Default(), "us-east-1", classes, sizing.Params{})
	if err != nil {
		t.Fatal(err)
	}
	launch := func(id, node, typ, capacity string, price float64, job, name, user, account string, gpus, attempt int, from, to time.Time) {
		t.Helper()
		err := st.RecordLaunch(ctx, sizerapi.InstanceEvent{InstanceID: id, Node: node, InstanceType: typ, Zone: "us-east-1a", Capacity: capacity, Account: account, Time: from,
			Job: &sizerapi.Job{JobID: job, JobName: name, User: user, Account: account, Class: node[:len(node)-2], GPUModel: "l4", GPUsPerNode: gpus, Nodes: 1, GPUMemoryMiB: 22888, Attempt: attempt}}, price)
		if err != nil {
			t.Fatal(err)
		}
		if !to.IsZero() {
			if _, err := st.RecordTerminate(ctx, id, to); err != nil {
				t.Fatal(err)
			}
		}
	}
	launch("i-3", "l4x4-1", "g6.12xlarge", "spot", 2, "20", "train", "bob", "vision", 4, 1, at(9, 14, 0), at(9, 16, 0))
	launch("i-4", "l4-2", "g6.xlarge", "on-demand", 0.8048, "12", "ft", "ann", "nlp", 1, 1, at(10, 8, 0), at(10, 8, 30))
	launch("i-1", "l4-1", "g6.xlarge", "spot", 0.40, "11", "ft", "ann", "nlp", 1, 1, at(10, 9, 0), at(10, 11, 0))
	launch("i-2", "l4x4-1", "g6.12xlarge", "spot", 2, "21", "train", "bob", "vision", 4, 1, at(10, 10, 0), time.Time{})
	rec := func(seq uint64, tm time.Time, job uint32) sizerapi.Record {
		r := sizerapi.Record{Seq: seq, Time: tm, Kind: sizerapi.KindGPU}
		for i := 0; i < 4; i++ {
			g := sizerapi.GPUReading{Index: i, MemoryTotalBytes: 22888 << 20}
			if i == 0 {
				g.UtilPercent, g.MemoryUsedBytes, g.JobIDs = 80, 10*gib, []uint32{job}
			}
			r.GPUs = append(r.GPUs, g)
		}
		return r
	}
	b := sizerapi.ReportBatch{Node: "l4x4-1", InstanceID: "i-3", Records: []sizerapi.Record{rec(1, at(9, 14, 5), 20), rec(2, at(9, 15, 0), 20),
		{Seq: 3, Time: at(9, 15, 58), Kind: sizerapi.KindInterruption, Event: &sizerapi.Event{InstanceID: "i-3", Action: "terminate", NoticeTime: at(9, 15, 58),
			Jobs: []sizerapi.JobEvent{{JobID: 20, Signal: "USR1", Checkpointed: true, Requeued: true, Waited: 3 * time.Second}}}}}}
	if _, err := st.AddBatch(ctx, b); err != nil {
		t.Fatal(err)
	}
	b = sizerapi.ReportBatch{Node: "l4x4-1", InstanceID: "i-2", Records: []sizerapi.Record{rec(4, at(10, 10, 5), 21), rec(5, at(10, 11, 0), 21)}}
	if _, err := st.AddBatch(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordDecision(ctx, sizerapi.JobDecision{JobID: "21", Time: at(10, 9, 59), Class: "l4x4", InstanceType: "g6.12xlarge", Zone: "us-east-1a",
		Capacity: "spot", PriceUSD: 2, ExpectedUSD: 2.1, Reason: "cheapest spot <b>pool</b>", Offerings: 4, Avoided: 1, Comment: "burst: params=1B"}); err != nil {
		t.Fatal(err)
	}
	b2 := breaker.New(breaker.Options{Dir: dir, Threshold: 2, Now: func() time.Time { return now }})
	b2.Failure("l4", "InsufficientInstanceCapacity: no g6.xlarge")
	b2.Failure("l4", "InsufficientInstanceCapacity: no g6.xlarge")
	src, err := New(Options{Store: st, Policy: pol, Budgets: map[string]float64{"nlp": 10, "vision": 5}, StateDir: dir, Slurm: sl, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return src, dir
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-3 }

func TestFleet(t *testing.T) {
	sl := slurmfake.New([]slurm.Job{{ID: 21, Name: "train", User: "bob", Account: "vision", State: "RUNNING", Nodes: "l4x4-1"}},
		[]slurm.Node{{Name: "l4x4-1", State: "ALLOCATED", Flags: []string{"CLOUD"}}, {Name: "l4-1", State: "IDLE", Flags: []string{"POWERED_DOWN", "CLOUD"}}})
	src, _ := fixture(t, sl)
	v, err := src.Fleet(context.Background(), Scope{})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Slurm || v.Instances != 1 || !near(v.HourlyUSD, 2) || len(v.Classes) != 2 {
		t.Fatalf("fleet %+v", v)
	}
	l4, l4x4 := v.Classes[0], v.Classes[1]
	if len(l4.Nodes) != 2 || l4.Nodes[0].SlurmState != "IDLE+POWERED_DOWN" || l4.Nodes[0].InstanceID != "" || l4.Breaker.State != "open" || l4.Breaker.TotalFails != 2 {
		t.Errorf("class l4: %+v", l4)
	}
	n := l4x4.Nodes[0]
	if n.InstanceID != "i-2" || n.Type != "g6.12xlarge" || n.Capacity != "spot" || !n.UpSince.Equal(at(10, 10, 0)) || n.JobID != "21" || n.JobName != "train" ||
		n.Account != "vision" || n.SlurmState != "ALLOCATED" || l4x4.Instances != 1 || !n.LastReport.After(n.UpSince) {
		t.Errorf("node l4x4-1: %+v", n)
	}
	if len(v.Interruptions) != 1 || v.Interruptions[0].InstanceID != "i-3" || v.Interruptions[0].JobID != "20" || v.Interruptions[0].Account != "vision" {
		t.Errorf("interruptions: %+v", v.Interruptions)
	}
	// an account sees only its own nodes and notices
	nv, err := src.Fleet(context.Background(), Scope{Account: "nlp"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range nv.Classes {
		if len(c.Nodes) != 0 {
			t.Errorf("nlp sees class %s nodes %+v", c.Class, c.Nodes)
		}
	}
	if nv.Instances != 0 || len(nv.Interruptions) != 0 {
		t.Errorf("nlp fleet %+v", nv)
	}
	// the jobs view takes Slurm's state, unless the store knows of a newer end
	jv, _ := src.Jobs(context.Background(), Scope{}, JobsQuery{})
	if jv.Jobs[0].JobID != "21" || jv.Jobs[0].State != "RUNNING" {
		t.Errorf("job 21 with Slurm: %+v", jv.Jobs[0])
	}
	if _, err := src.o.Store.RecordTerminate(context.Background(), "i-2", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	jv, _ = src.Jobs(context.Background(), Scope{}, JobsQuery{})
	for _, j := range jv.Jobs {
		if j.JobID == "21" && (j.State != "ended" || j.Running) {
			t.Errorf("job 21 ended after Slurm's (cached) reading still shows %s", j.State)
		}
	}
}

func TestFleetWithoutSlurm(t *testing.T) {
	src, _ := fixture(t, &slurmfake.Slurm{NodesErr: errors.New("sinfo: slurmctld down")})
	v, err := src.Fleet(context.Background(), Scope{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Slurm || v.SlurmError == "" || v.Classes[1].Nodes[0].JobID != "21" || v.Classes[1].Nodes[0].JobName != "train" {
		t.Errorf("without Slurm the fleet shows what the sizer recorded: %+v", v)
	}
}

func TestJobs(t *testing.T) {
	src, _ := fixture(t, nil)
	ctx := context.Background()
	v, err := src.Jobs(ctx, Scope{}, JobsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Total != 4 || v.Running != 1 || len(v.Jobs) != 4 || v.Jobs[0].JobID != "21" || !v.Jobs[0].Running {
		t.Fatalf("jobs %+v", v)
	}
	byID := map[string]sizerapi.JobRow{}
	for _, j := range v.Jobs {
		byID[j.JobID] = j
	}
	j20 := byID["20"]
	if j20.GPUsPerNode != 4 || j20.GPUsUsed != 1 || !j20.Reported || !near(j20.GPUMemUsedGiB, 10) || !near(j20.GPUMemReqGiB, 89.4) ||
		!near(j20.SpendUSD, 4) || j20.Interruptions != 1 || j20.Checkpoints != 1 || j20.State != "ended" || j20.Ended != at(9, 16, 0) {
		t.Errorf("job 20: %+v", j20)
	}
	if j := byID["21"]; j.Decision == nil || j.Decision.Reason != "cheapest spot <b>pool</b>" || !near(j.SpendUSD, 4) || j.State != "running" {
		t.Errorf("job 21: %+v", j)
	}
	if j := byID["12"]; j.Reported || !near(j.SpendUSD, 0.4024) {
		t.Errorf("job 12: %+v", j)
	}
	one, err := src.Job(ctx, Scope{Account: "vision"}, "20")
	if err != nil || len(one.InterruptionList) != 1 || !one.InterruptionList[0].Requeued || one.InterruptionList[0].Waited != 3*time.Second {
		t.Errorf("job 20 detail: %+v %v", one, err)
	}
	if _, err := src.Job(ctx, Scope{Account: "nlp"}, "20"); !errors.Is(err, ErrNotFound) {
		t.Errorf("nlp read vision's job 20: %v", err)
	}
	nv, err := src.Jobs(ctx, Scope{Account: "nlp"}, JobsQuery{})
	if err != nil || nv.Total != 2 || nv.Running != 0 || len(nv.Jobs) != 2 {
		t.Fatalf("nlp jobs %+v %v", nv, err)
	}
	for _, j := range nv.Jobs {
		if j.Account != "nlp" {
			t.Errorf("nlp sees %+v", j)
		}
	}
	lim, err := src.Jobs(ctx, Scope{}, JobsQuery{Limit: 1})
	if err != nil || lim.Total != 4 || len(lim.Jobs) != 1 || lim.Jobs[0].JobID != "21" {
		t.Errorf("limit 1: %+v %v", lim, err)
	}
	lim, err = src.Jobs(ctx, Scope{}, JobsQuery{Limit: 1, User: "ann"})
	if err != nil || lim.Total != 2 || len(lim.Jobs) != 1 || lim.Jobs[0].JobID != "11" {
		t.Errorf("ann, limit 1: %+v %v", lim, err)
	}
}

func TestMoney(t *testing.T) {
	src, _ := fixture(t, nil)
	v, err := src.Money(context.Background(), Scope{})
	if err != nil {
		t.Fatal(err)
	}
	if !near(v.TotalUSD, 9.2024) || v.Instances != 4 || !near(v.InstanceHours, 6.5) {
		t.Errorf("total %v over %d instances, %v h", v.TotalUSD, v.Instances, v.InstanceHours)
	}
	// on demand: g6.xlarge $0.8048 x 2.5 h, g6.12xlarge $4.6016 x 4 h
	od := 0.8048*2.5 + 4.6016*4
	if !near(v.OnDemandUSD, od) || !near(v.SavedVsOnDemandUSD, od-9.2024) {
		t.Errorf("on demand %v saved %v, want %v", v.OnDemandUSD, v.SavedVsOnDemandUSD, od)
	}
	idle := od + (2*0.8048+4.6016)/6 // three ended instances, 10 minutes each
	if !near(v.IdleTimeoutUSD, idle) || !near(v.SavedVsIdleUSD, idle-9.2024) || !near(v.SavedVsIdlePct, math.Round(1000*(idle-9.2024)/idle)/10) {
		t.Errorf("idle-timeout %v saved %v (%v%%), want %v", v.IdleTimeoutUSD, v.SavedVsIdleUSD, v.SavedVsIdlePct, idle)
	}
	if len(v.Accounts) != 2 {
		t.Fatalf("accounts %+v", v.Accounts)
	}
	nlp, vis := v.Accounts[0], v.Accounts[1]
	left := 21.5 * 24
	if nlp.Account != "nlp" || !near(nlp.SpentUSD, 1.2024) || nlp.BudgetUSD != 10 || !near(nlp.UsedPct, 12) || nlp.Over ||
		!near(nlp.ForecastUSD, 1.2024+1.2024/168*left) || nlp.CapReachedAt != nil {
		t.Errorf("nlp %+v", nlp)
	}
	if vis.Account != "vision" || !near(vis.SpentUSD, 8) || !vis.Over || !near(vis.UsedPct, 160) || !near(vis.HourlyUSD, 2) {
		t.Errorf("vision %+v", vis)
	}
	if len(v.Users) != 2 || v.Users[0].User != "bob" || !near(v.Users[0].SpentUSD, 8) || v.Users[0].Jobs != 2 || v.Users[1].User != "ann" || !near(v.Users[1].SpentUSD, 1.2024) {
		t.Errorf("users %+v", v.Users)
	}
	if len(v.Days) != 10 || v.Days[0].Day != "2026-03-01" || !near(v.Days[8].SpentUSD, 4) || !near(v.Days[9].SpentUSD, 5.2024) || !near(v.Days[9].ByAccount["nlp"], 1.2024) {
		t.Errorf("days %+v", v.Days)
	}
	// a cap the month's pace reaches: nlp at $2
	src.o.Budgets = map[string]float64{"nlp": 2}
	v, err = src.Money(context.Background(), Scope{Account: "nlp"})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Accounts) != 1 || v.Accounts[0].CapReachedAt == nil || len(v.Users) != 1 || !near(v.TotalUSD, 1.2024) {
		t.Fatalf("nlp scope %+v", v)
	}
	hours := (2 - 1.2024) / (1.2024 / 168)
	want := now.Add(time.Duration(hours * float64(time.Hour)))
	if d := v.Accounts[0].CapReachedAt.Sub(want); d < -time.Second || d > time.Second {
		t.Errorf("cap reached at %v, want %v", v.Accounts[0].CapReachedAt, want)
	}
}

func TestRightSizing(t *testing.T) {
	src, _ := fixture(t, nil)
	v, err := src.RightSizing(context.Background(), Scope{})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Items) != 1 {
		t.Fatalf("items %+v", v.Items)
	}
	it := v.Items[0]
	spot, _ := src.o.Policy.HourlyPrice("g6.xlarge", "spot")
	save := 8 * (1 - spot/2) * 744 / 228
	if it.User != "bob" || it.JobName != "train" || it.AskedGPUs != 4 || it.UsedGPUs != 1 || it.Class != "l4x4" || it.SuggestedClass != "l4" ||
		it.SuggestedGPUs != 1 || !near(it.CurrentUSDH, 2) || !near(it.SuggestedUSDH, spot) || math.Abs(it.SaveUSDPerMonth-save) > 0.01 {
		t.Errorf("item %+v; want l4 at %v saving %v", it, spot, save)
	}
	nv, err := src.RightSizing(context.Background(), Scope{Account: "nlp"})
	if err != nil || len(nv.Items) != 0 {
		t.Errorf("nlp sees %+v %v", nv, err)
	}
}

func TestScopeFor(t *testing.T) {
	for _, c := range []struct {
		p       auth.Principal
		ask     string
		want    string
		refused bool
	}{
		{auth.Principal{Admin: true}, "", "", false},
		{auth.Principal{Admin: true}, "nlp", "nlp", false},
		{auth.Principal{Account: "nlp"}, "", "nlp", false},
		{auth.Principal{Account: "nlp"}, "nlp", "nlp", false},
		{auth.Principal{Account: "nlp"}, "vision", "", true},
		{auth.Principal{Node: "l4-1"}, "", "", true},
		{auth.Principal{Route: true}, "", "", true},
		{auth.Principal{}, "", "", true},
	} {
		sc, err := ScopeFor(c.p, c.ask)
		if c.refused != errors.Is(err, ErrForbidden) || (!c.refused && sc.Account != c.want) {
			t.Errorf("ScopeFor(%+v, %q) = %+v, %v", c.p, c.ask, sc, err)
		}
	}
}
