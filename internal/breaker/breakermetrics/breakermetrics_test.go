package breakermetrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/burst-hpc/burst/internal/breaker"
)

func TestCollector(t *testing.T) {
	now := time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC)
	b := breaker.New(breaker.Options{Dir: t.TempDir(), Threshold: 1, Now: func() time.Time { return now }})
	b.Failure("l4", "x")
	b.Failure("a10g", "y")
	b.Success("a10g")
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(b))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			k := mf.GetName()
			for _, l := range m.Label {
				k += "/" + l.GetValue()
			}
			if m.Gauge != nil {
				got[k] = m.Gauge.GetValue()
			} else {
				got[k] = m.Counter.GetValue()
			}
		}
	}
	want := map[string]float64{
		"burst_launch_breaker_open/l4": 1, "burst_launch_breaker_open/a10g": 0,
		"burst_launch_breaker_state/l4/open": 1, "burst_launch_breaker_state/a10g/closed": 1,
		"burst_launch_breaker_trips_total/l4": 1, "burst_launch_breaker_trips_total/a10g": 1,
		"burst_launch_breaker_consecutive_failures/l4":         1,
		"burst_launch_failures_total/l4":                       1,
		"burst_launch_failures_total/a10g":                     1, // a success resets the consecutive count, not the total
		"burst_launch_breaker_open_until_timestamp_seconds/l4": float64(now.Add(breaker.DefaultCooldown).Unix()),
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}
