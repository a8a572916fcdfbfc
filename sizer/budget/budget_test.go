package budget

import (
	"math"
	"testing"
	"time"
)

func TestSpend(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	ms := MonthStart(now)
	if !ms.Equal(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("month start %v", ms)
	}
	ivs := []Interval{
		{InstanceID: "a", Account: "phys", PriceUSD: 10, Start: now.Add(-3 * time.Hour), End: now.Add(-1 * time.Hour)}, // 2 h = $20
		{InstanceID: "b", Account: "phys", PriceUSD: 4, Start: now.Add(-30 * time.Minute)},                             // running: 0.5 h = $2
		{InstanceID: "c", Account: "bio", PriceUSD: 100, Start: ms.Add(-2 * time.Hour), End: ms.Add(time.Hour)},        // 1 h this month = $100
		{InstanceID: "d", Account: "bio", PriceUSD: 100, Start: ms.Add(-5 * time.Hour), End: ms.Add(-time.Hour)},       // last month
		{InstanceID: "e", Account: "chem", PriceUSD: 1, Start: now.Add(time.Hour), End: now.Add(2 * time.Hour)},        // future: 0
	}
	st := Statuses(map[string]float64{"phys": 21, "bio": 500, "math": 50}, ivs, now)
	want := map[string]struct {
		spent float64
		over  bool
	}{"bio": {100, false}, "math": {0, false}, "phys": {22, true}}
	if len(st) != 3 {
		t.Fatalf("got %+v", st)
	}
	for _, s := range st {
		w := want[s.Account]
		if math.Abs(s.SpentUSD-w.spent) > 1e-9 || s.Over != w.over {
			t.Errorf("%s: got spent %.4f over %v, want %.2f %v", s.Account, s.SpentUSD, s.Over, w.spent, w.over)
		}
	}
}
