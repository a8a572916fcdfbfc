package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/sizer/budget"
)

func TestBuild(t *testing.T) {
	now := time.Date(2026, 3, 16, 0, 0, 0, 0, time.UTC) // 15 of 31 days elapsed
	jobs := []JobUsage{
		{JobID: "1", JobName: "eval", User: "dan", Account: "phys", GPUsPerNode: 8, GPUMemoryMiB: 40960, Reported: true, GPUsUsed: 2, PeakMemMiB: 30 * 1024, MeanUtilPct: 20},
		{JobID: "2", JobName: "eval", User: "dan", Account: "phys", GPUsPerNode: 8, GPUMemoryMiB: 40960, Reported: true, GPUsUsed: 1, PeakMemMiB: 20 * 1024, MeanUtilPct: 10},
		{JobID: "3", JobName: "train", User: "eve", Account: "phys", GPUsPerNode: 8, GPUMemoryMiB: 81920, Reported: true, GPUsUsed: 8, PeakMemMiB: 600 * 1024, MeanUtilPct: 90},
		{JobID: "4", JobName: "x", User: "fay", Account: "bio", GPUsPerNode: 1, GPUMemoryMiB: 22888},
	}
	start := now.Add(-10 * time.Hour)
	ivs := []budget.Interval{
		{InstanceID: "a", JobID: "1", Account: "phys", PriceUSD: 10, Start: start, End: start.Add(2 * time.Hour)},
		{InstanceID: "b", JobID: "2", Account: "phys", PriceUSD: 10, Start: start, End: start.Add(4 * time.Hour)},
		{InstanceID: "c", JobID: "3", Account: "phys", PriceUSD: 50, Start: start, End: start.Add(time.Hour)},
	}
	r := Build(jobs, ivs, map[string]float64{"phys": 100, "bio": 10}, now, Options{})
	if len(r.Accounts) != 2 || len(r.Users) != 3 {
		t.Fatalf("rows: %+v %+v", r.Accounts, r.Users)
	}
	phys := r.Accounts[1]
	if phys.Account != "phys" || phys.SpendUSD != 110 || !phys.Over || phys.Jobs != 3 || phys.GPUsRequested != 8 || phys.GPUsUsed != 3.7 {
		t.Errorf("phys row %+v", phys)
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
	for _, s := range []string{"OVER BUDGET", "dan", "ask for 2", "phys"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("text report lacks %q:\n%s", s, buf.String())
		}
	}
}
