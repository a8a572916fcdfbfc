package simulate

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/shareddatatest"
	"github.com/burst-hpc/burst/sizer/trace"
)

func loadPhilly(tb testing.TB) []trace.Job {
	tb.Helper()
	f, err := os.Open(shareddatatest.Require(tb, "traces/philly.csv"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	jobs, _, err := trace.ReadPhilly(f, trace.ReadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return jobs
}

// TestPhillySlice runs the first 5,000 Philly jobs through the real policy
// and checks accounting identities and determinism.
func TestPhillySlice(t *testing.T) {
	jobs := loadPhilly(t)[:5000]
	used := 0.0
	for _, j := range jobs {
		used += float64(j.GPUs) * j.Duration.Hours()
	}
	o := Options{Seed: 7, Interruptions: PoissonRate{PerNodeHour: 0.61}}
	a, err := Run(context.Background(), o, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range a.Policies {
		if math.Abs(p.GPUHoursUsed-used) > 1e-6*used {
			t.Errorf("%s used %g GPU-h, the trace has %g", p.Name, p.GPUHoursUsed, used)
		}
		if p.IdleGPUHours < -1e-6 || p.LostGPUHours < 0 || p.CostUSD <= 0 {
			t.Errorf("%s: idle %g, lost %g, cost %g", p.Name, p.IdleGPUHours, p.LostGPUHours, p.CostUSD)
		}
		if !(p.WaitP50S <= p.WaitP95S && p.WaitP95S <= p.WaitP99S) {
			t.Errorf("%s waits not ordered: %g %g %g", p.Name, p.WaitP50S, p.WaitP95S, p.WaitP99S)
		}
		last := p.Series[len(p.Series)-1]
		if p.Name != PolicyStatic && math.Abs(last.CostUSD-p.CostUSD) > 1e-6*p.CostUSD {
			t.Errorf("%s: chart ends at $%g, total is $%g", p.Name, last.CostUSD, p.CostUSD)
		}
		if last.GPUs != 0 && p.Name != PolicyStatic {
			t.Errorf("%s: %d GPUs still billed at the end", p.Name, last.GPUs)
		}
	}
	burst := a.Policies[2]
	if burst.Interruptions == 0 || burst.LostGPUHours == 0 || burst.SpotLaunches == 0 {
		t.Errorf("burst at 0.61 interruptions/node-h: %d interruptions, %g lost GPU-h, %d spot launches", burst.Interruptions, burst.LostGPUHours, burst.SpotLaunches)
	}
	b, err := Run(context.Background(), o, jobs)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Error("two runs with the same seed differ")
	}
	o.Seed = 8
	c, err := Run(context.Background(), o, jobs)
	if err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(a.Policies[2])
	jc, _ := json.Marshal(c.Policies[2])
	if string(ja) == string(jc) {
		t.Error("seeds 7 and 8 give identical burst results")
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, handOptions(t), []trace.Job{job(0, 1, 1)}); err == nil {
		t.Error("cancelled context: no error")
	}
}

// BenchmarkPhilly simulates the whole Philly trace per policy and reports
// jobs simulated per second; the static policy is the baseline measured in
// the same run (ratio_vs_static).
func BenchmarkPhilly(b *testing.B) {
	jobs := loadPhilly(b)
	if testing.Short() && len(jobs) > 2000 { // make test's smoke run: the smallest size, once
		jobs = jobs[:2000]
	}
	rates := map[string]float64{}
	for _, p := range AllPolicies {
		b.Run(p, func(b *testing.B) {
			o := Options{Seed: 1, Policies: []string{p}}
			start := time.Now()
			for range b.N {
				if _, err := Run(context.Background(), o, jobs); err != nil {
					b.Fatal(err)
				}
			}
			r := float64(len(jobs)*b.N) / time.Since(start).Seconds()
			rates[p] = r
			b.ReportMetric(r, "jobs/s")
			if s := rates[PolicyStatic]; s > 0 {
				b.ReportMetric(r/s, "ratio_vs_static")
			}
		})
	}
}
