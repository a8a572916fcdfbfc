package cmd

import (
	"context"
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/burst-hpc/burst/internal/catalog"
)

// The pool's price of a demo class is its cheapest spot offering: the
// catalog's on-demand price x (1 - Spot Advisor savings).
func TestClassPricer(t *testing.T) {
	st := testSettings(t)
	pol, err := st.policy()
	if err != nil {
		t.Fatal(err)
	}
	cl := &st.cfg.Classes[0]
	price, err := classPricer(pol)(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	cheapest := math.Inf(1)
	for _, c := range cl.Candidates(catalog.Default()) {
		if c.Spot.SavingsPct > 0 {
			cheapest = min(cheapest, c.SpotUSD())
		}
	}
	if math.Abs(price-cheapest) > 1e-9 {
		t.Errorf("class %s priced at $%g/h, want the cheapest spot candidate $%g/h", cl.Name, price, cheapest)
	}
	bad := *cl
	bad.Name = "nope"
	if _, err := classPricer(pol)(context.Background(), &bad); err == nil {
		t.Error("unknown class priced")
	}
}

func TestWarmPoolOffByDefault(t *testing.T) {
	st := testSettings(t)
	st.cfg.Warm.Enabled = false
	reg := prometheus.NewRegistry()
	if p := startWarmPool(context.Background(), st, reg, nil, nil); p != nil {
		t.Fatal("warm pool started while warm.enabled is false")
	}
	if mfs, err := reg.Gather(); err != nil || len(mfs) != 0 {
		t.Errorf("%d metric families exported without a pool (%v)", len(mfs), err)
	}
}
