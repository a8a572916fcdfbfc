package simulate

import (
	"context"
	"os"
	"testing"

	"github.com/burst-hpc/burst/internal/shareddatatest"
	"github.com/burst-hpc/burst/sizer/trace"
)

// TestTailNoLongerThanIdleTimeout replays every trace of shared/data/traces
// (Philly, Alibaba openb 2023, Alibaba DLRM 2025) whole at the defaults
// (seed 1) and checks issue 30's bar for the slow tail: burst's p50, p95
// and p99 waits are each at most idle-timeout's, and burst still saves at
// least 50% against it (sizer/simulate/RESULTS.md: 58-65% before the miss
// feedback; the bar allows 10 points of that). Skipped with -short (about
// 15 s on two cores).
func TestTailNoLongerThanIdleTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("replays three whole traces; run without -short")
	}
	for _, name := range []string{"philly.csv", "openb_pod_list_default.csv", "disaggregated_DLRM_trace.csv"} {
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(shareddatatest.Require(t, "traces/"+name))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			jobs, _, err := trace.ReadAny(f, "auto", trace.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(context.Background(), Options{Seed: 1, Policies: []string{PolicyIdleTimeout, PolicyBurst}}, jobs)
			if err != nil {
				t.Fatal(err)
			}
			it, b := res.Policies[0], res.Policies[1]
			t.Logf("%s: burst p50/p95/p99 %.0f/%.0f/%.0f s, idle-timeout %.0f/%.0f/%.0f s, burst saves %.1f%%",
				name, b.WaitP50S, b.WaitP95S, b.WaitP99S, it.WaitP50S, it.WaitP95S, it.WaitP99S, *b.SavingsVsIdleTimeoutPct)
			for _, q := range []struct {
				what       string
				burst, idl float64
			}{{"p50", b.WaitP50S, it.WaitP50S}, {"p95", b.WaitP95S, it.WaitP95S}, {"p99", b.WaitP99S, it.WaitP99S}} {
				if q.burst > q.idl {
					t.Errorf("burst's %s wait %.0f s is longer than idle-timeout's %.0f s", q.what, q.burst, q.idl)
				}
			}
			if s := *b.SavingsVsIdleTimeoutPct; s < 50 {
				t.Errorf("burst saves %.1f%% against idle-timeout, want at least 50%%", s)
			}
		})
	}
}
