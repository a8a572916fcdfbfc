package simulate

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
)

func TestExpWarm(t *testing.T) {
	if os.Getenv("EXP") == "" {
		t.Skip()
	}
	jobs := loadPhilly(t)
	o := Options{Seed: 1}
	if v := os.Getenv("CAP"); v != "" {
		o.Warm.CapUSDPerDay, _ = strconv.ParseFloat(v, 64)
	}
	if v := os.Getenv("Q"); v != "" {
		o.Warm.Quantile, _ = strconv.ParseFloat(v, 64)
	}
	if v := os.Getenv("W"); v != "" {
		o.Warm.ProfileWeight, _ = strconv.ParseFloat(v, 64)
	}
	if os.Getenv("OFF") != "" {
		o.Warm.Disabled = true
	}
	o.Policies = []string{PolicyIdleTimeout, PolicyBurst}
	r, err := Run(context.Background(), o, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Policies {
		fmt.Printf("%s cost %.0f p50 %.0f p95 %.0f p99 %.0f launches %d\n", p.Name, p.CostUSD, p.WaitP50S, p.WaitP95S, p.WaitP99S, p.Launches)
		if p.SavingsVsIdleTimeoutPct != nil {
			fmt.Printf("  saves %.1f%%\n", *p.SavingsVsIdleTimeoutPct)
		}
	}
}
