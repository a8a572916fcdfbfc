package forecast

import (
	"testing"
	"time"
)

// BenchmarkPlan: one class's forecast update and plan, as the simulator
// and burst-sizer serve run them on every arrival; the recent-rate-only
// forecast in the same run is the baseline (ratio_vs_recent_only).
func BenchmarkPlan(b *testing.B) {
	var base float64
	for _, c := range []struct {
		name string
		w    float64
	}{{"recent-only", -1}, {"with-profile", 0.5}} {
		b.Run(c.name, func(b *testing.B) {
			f := NewForecast(Params{ProfileWeight: c.w})
			idle := []Idle{{Name: "a", Since: monday, Up: monday}, {Name: "b", Since: monday, Up: monday}}
			start := time.Now()
			for i := range b.N {
				at := monday.Add(time.Duration(i) * 7 * time.Second)
				f.Observe(at, 1)
				Decide(f, at, 8, State{Idle: idle, Booting: 1})
			}
			ns := float64(time.Since(start).Nanoseconds()) / float64(b.N)
			b.ReportMetric(ns, "ns/plan")
			if c.name == "recent-only" {
				base = ns
			} else if base > 0 {
				b.ReportMetric(ns/base, "ratio_vs_recent_only")
			}
		})
	}
}
