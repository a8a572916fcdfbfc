package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/billing"
)

func TestBuild(t *testing.T) {
	now := time.Date(2026, 3, 16, 0, 0, 0, 0, time.UTC) // 15 of 31 days elapsed
	jobs := []sizerapi.JobUsage{
		{JobID: "1", JobName: "eval", User: "dan", Account: "phys", GPUsPerNode: 8, GPUMemoryMiB: 40960, Reported: true, GPUsUsed: 2, PeakMemMiB: 30 * 1024, MeanUtilPct: 20},
		{JobID: "2", JobName: "eval", User: "dan", Account: "phys", GPUsPerNode: 8, GPUMemoryMiB: 40960, Reported: true, GPUsUsed: 1, PeakMemMiB: 20 * 1024, MeanUtilPct: 10},
		{JobID: "3", JobName: "train", User: "eve", Account: "phys", GPUsPerNode: 8, GPUMemoryMiB: 81920, Reported: true, GPUsUsed: 8, PeakMemMiB: 600 * 1024, MeanUtilPct: 90},
		{JobID: "4", JobName: "x", User: "fay", Account: "bio", GPUsPerNode: 1, GPUMemoryMiB: 22888},
	}
	charges := []billing.Charge{
		{InstanceID: "a", JobID: "1", Account: "phys", User: "dan", Seconds: 7000, USD: 19, OnDemandUSD: 50},
		{InstanceID: "a", JobID: "1", Account: "phys", User: "dan", Idle: true, Seconds: 200, USD: 1, OnDemandUSD: 2},
		{InstanceID: "b", JobID: "2", Account: "phys", User: "dan", Seconds: 14400, USD: 40, OnDemandUSD: 100},
		{InstanceID: "c", JobID: "3", Account: "phys", User: "eve", Seconds: 3600, USD: 50, OnDemandUSD: 60},
		{InstanceID: "d", Account: "pool:l4", Idle: true, Seconds: 60, USD: 0.5, OnDemandUSD: 1},
	}
	forecast := now.Add(time.Hour)
	budgets := []sizerapi.BudgetStatus{{Account: "phys", MonthlyUSD: 100, SpentUSD: 110, Over: true}, {Account: "bio", MonthlyUSD: 10, ReservedUSD: 2, ForecastCapAt: &forecast}}
	r := Build(jobs, charges, budgets, now, Options{})
	if len(r.Accounts) != 3 || len(r.Users) != 3 || len(r.Jobs) != 3 {
		t.Fatalf("rows: %+v %+v", r.Accounts, r.Users)
	}
	phys := r.Accounts[1]
	if phys.Account != "phys" || phys.SpendUSD != 110 || phys.OnDemandUSD != 212 || phys.SavingUSD != 102 || !phys.Over || phys.Jobs != 3 || phys.GPUsRequested != 8 || phys.GPUsUsed != 3.7 {
		t.Errorf("phys row %+v", phys)
	}
	if pool := r.Accounts[2]; pool.Account != "pool:l4" || pool.SpendUSD != 0.5 {
		t.Errorf("pool row %+v", pool)
	}
	if j := r.Jobs[0]; j.JobID != "3" || j.SpendUSD != 50 || j.SavingUSD != 10 {
		t.Errorf("jobs %+v", r.Jobs)
	}
	if j := r.Jobs[2]; j.JobID != "1" || j.SpendUSD != 20 || j.RunSeconds != 7000 || j.IdleSeconds != 200 || j.Instances != 1 {
		t.Errorf("job 1 %+v", j)
	}
	if r.SpendUSD != 110.5 || r.OnDemandUSD != 213 || r.SavingUSD != 102.5 {
		t.Errorf("totals %v %v %v", r.SpendUSD, r.OnDemandUSD, r.SavingUSD)
	}
	if len(r.Advice) != 1 {
		t.Fatalf("advice %+v", r.Advice)
	}
	a := r.Advice[0]
	// $60 spent on eval; asking 2 of 8 saves 6/8 of it: $45 over 15 days -> x 31/15 for the month.
	want := 60.0 * 6 / 8 * 31 / 15
	if a.JobName != "eval" || a.AskedGPUs != 8 || a.UsedGPUs != 2 || a.SaveUSDPerMonth < want-0.01 || a.SaveUSDPerMonth > want+0.01 {
		t.Errorf("advice %+v want save %.2f", a, want)
	}
	if !strings.Contains(a.Text, "jobs named eval asked for 8 GPUs and used 2: ask for 2 and save about $93.00 a month") {
		t.Errorf("text %q", a.Text)
	}
	var buf bytes.Buffer
	if err := WriteText(&buf, r); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"OVER BUDGET", "dan", "ask for 2", "phys", "cap at 03-16 01:00 UTC", "saved $102.5000"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("text report lacks %q:\n%s", s, buf.String())
		}
	}
}
