package dash

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/report"
	"github.com/burst-hpc/burst/sizer/spend"
	"github.com/burst-hpc/burst/sizer/store"
)

// rightSizingReference is the right-sizing items computed the way the
// dashboard did before it kept usage and sums in memory: the month's usage
// read whole, the usage report built over the month's charges (a fresh
// read), each group's instances (read whole) billed from those charges.
func rightSizingReference(t *testing.T, s *Source, st *store.Store, sc Scope, now time.Time, od spend.OnDemandPrice) map[string]sizerapi.RightSizingItem {
	t.Helper()
	ctx := context.Background()
	from := billing.MonthStart(now)
	jobs, err := st.JobUsages(ctx, store.JobQuery{Since: from, Account: sc.Account})
	if err != nil {
		t.Fatal(err)
	}
	ins, err := st.Instances(ctx, from, now, sc.Account, false)
	if err != nil {
		t.Fatal(err)
	}
	m, err := spend.ReadPriced(ctx, st, s.o.IdleOwner, now, od)
	if err != nil {
		t.Fatal(err)
	}
	charges := scoped(m.Charges, sc)
	rep := report.Build(jobs, charges, nil, now, report.Options{})
	billed := map[string][2]float64{}
	for _, c := range charges {
		b := billed[c.InstanceID]
		billed[c.InstanceID] = [2]float64{b[0] + c.USD, b[1] + c.Seconds/3600}
	}
	latest, group := map[groupKey]string{}, map[string]groupKey{}
	for _, j := range jobs {
		k := groupKey{j.Account, j.User, j.JobName}
		if _, ok := latest[k]; !ok {
			latest[k] = j.Class
		}
		group[j.JobID] = k
	}
	prices := map[groupKey]*groupPrice{}
	for _, in := range ins {
		k, ok := group[in.JobID]
		if b := billed[in.InstanceID]; ok && b[1] > 0 {
			if prices[k] == nil {
				prices[k] = &groupPrice{}
			}
			p := prices[k]
			p.usd, p.hours = p.usd+b[0], p.hours+b[1]
			if in.Capacity == string(capacity.Spot) {
				p.spotHours += b[1]
			}
		}
	}
	out := map[string]sizerapi.RightSizingItem{}
	for _, a := range rep.Advice {
		k := groupKey{a.Account, a.User, a.JobName}
		it := sizerapi.RightSizingItem{Advice: a, Class: latest[k]}
		capType := capacity.OnDemand
		if p := prices[k]; p != nil && p.hours > 0 {
			it.CurrentUSDH = p.usd / p.hours
			if p.spotHours*2 >= p.hours {
				capType = capacity.Spot
			}
		}
		if c, usd, ok := s.smallerClass(max(a.UsedGPUs, 1), a.UsedMemGiB, capType); ok && (it.CurrentUSDH == 0 || usd < it.CurrentUSDH) {
			it.SuggestedClass, it.SuggestedUSDH = c.Name, usd
			if it.CurrentUSDH > 0 { // at this month's pace, from the last whole minute
				elapsed := now.Truncate(time.Minute).Sub(from).Hours()
				it.SaveUSDPerMonth = a.SpendUSD * (1 - usd/it.CurrentUSDH) * from.AddDate(0, 1, 0).Sub(from).Hours() / elapsed
			}
		}
		out[a.Account+"/"+a.User+"/"+a.JobName] = it
	}
	return out
}

// TestRightSizingMatchesFreshReads: the right-sizing items, from the usage
// kept in memory and the spend Reader's tally, equal those computed from
// fresh reads of the month (usage, instances, charges), for the admin and
// an account, as agents report and the ledger changes.
func TestRightSizingMatchesFreshReads(t *testing.T) {
	ctx := context.Background()
	st, pol, clock, od := filledMonth(t)
	src, err := New(Options{Store: st, Policy: pol, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	seq := uint64(1 << 20)
	for step := range 3 {
		for _, sc := range []Scope{{}, {Account: "nlp"}} {
			v, err := src.RightSizing(ctx, sc)
			if err != nil {
				t.Fatal(err)
			}
			want := rightSizingReference(t, src, st, sc, clock, od)
			what := fmt.Sprintf("step %d, scope %q", step, sc.Account)
			if len(v.Items) != len(want) || len(want) == 0 {
				t.Fatalf("%s: %d items, fresh reads %d", what, len(v.Items), len(want))
			}
			for _, g := range v.Items {
				w, ok := want[g.Account+"/"+g.User+"/"+g.JobName]
				if !ok || g.Jobs != w.Jobs || g.AskedGPUs != w.AskedGPUs || g.UsedGPUs != w.UsedGPUs || g.AskedMemGiB != w.AskedMemGiB || g.UsedMemGiB != w.UsedMemGiB ||
					math.Abs(g.SpendUSD-w.SpendUSD) > 0.011 || math.Abs(g.Advice.SaveUSDPerMonth-w.Advice.SaveUSDPerMonth) > 0.011 || g.Class != w.Class ||
					math.Abs(g.CurrentUSDH-w.CurrentUSDH) > 1.5e-4 || g.SuggestedClass != w.SuggestedClass || math.Abs(g.SuggestedUSDH-w.SuggestedUSDH) > 1.5e-4 {
					g.Text, w.Text = "", ""
					t.Errorf("%s: item %+v, fresh reads give %+v", what, g, w)
				}
			}
		}
		// agents report a 4-GPU job using 3 of them now; a job launches
		clock = clock.Add(5 * time.Minute)
		b := sizerapi.ReportBatch{Node: "l4x4-3", InstanceID: "i-rs", GPUSource: sizerapi.GPUSourceNVML}
		for k := range 3 {
			seq++
			r := sizerapi.Record{Seq: seq, Time: clock.Add(time.Duration(k) * time.Second), Kind: sizerapi.KindGPU}
			for g := range 4 {
				r.GPUs = append(r.GPUs, sizerapi.GPUReading{Index: g, UtilPercent: uint32(50 * min(g, 1) * (3 - g/3)), MemoryUsedBytes: 8 << 30, MemoryTotalBytes: 22888 << 20, JobIDs: []uint32{uint32(1000 + 246 - 3*step)}})
			}
			b.Records = append(b.Records, r)
		}
		if _, err := st.AddBatch(ctx, b); err != nil {
			t.Fatal(err)
		}
		job := &sizerapi.Job{JobID: fmt.Sprint(80000 + step), JobName: "job1", User: "vision-u1", Account: "vision", Class: "l4x4", GPUModel: "l4", GPUsPerNode: 4, Nodes: 1, GPUMemoryMiB: 22888}
		if err := st.RecordLaunch(ctx, sizerapi.InstanceEvent{InstanceID: fmt.Sprintf("i-rs%d", step), Node: "l4x4-1", InstanceType: "g6.12xlarge", Capacity: "on-demand", Account: "vision",
			Time: clock.Add(-3 * time.Minute), Job: job}, 4.6016); err != nil {
			t.Fatal(err)
		}
	}
}
