// Package breakermetrics exports the launch breaker's state to Prometheus.
// It is apart from internal/breaker so that burst-resume, which trips the
// breaker, does not link the Prometheus client; burst-sizer serve exports it.
package breakermetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/burst-hpc/burst/internal/breaker"
)

// Collector exports the breaker's state at scrape time (it reads the
// shared state file, so burst-sizer serve shows what the short-lived
// burst-resume processes recorded):
//
//	burst_launch_breaker_open{class}                  1 while open or half-open
//	burst_launch_breaker_state{class,state}           1 for the current state
//	burst_launch_breaker_consecutive_failures{class}
//	burst_launch_breaker_open_until_timestamp_seconds{class}
//	burst_launch_breaker_trips_total{class}
//	burst_launch_failures_total{class}                launch failures ever recorded
type Collector struct {
	b                                             *breaker.Breaker
	open, state, failures, until, trips, launchFx *prometheus.Desc
	errors                                        prometheus.Counter
}

// NewCollector returns a collector for b.
func NewCollector(b *breaker.Breaker) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("burst_launch_breaker_"+name, help, labels, nil)
	}
	return &Collector{b: b,
		open:     d("open", "1 while launches for the class are paused (open or half-open).", "class"),
		state:    d("state", "The class's breaker state (closed, open, half-open): 1 for the current one.", "class", "state"),
		failures: d("consecutive_failures", "Consecutive launch failures of the class.", "class"),
		until:    d("open_until_timestamp_seconds", "Unix time the cool-down (open) or trial (half-open) ends; 0 when closed.", "class"),
		trips:    d("trips_total", "Times the class's breaker opened.", "class"),
		launchFx: prometheus.NewDesc("burst_launch_failures_total", "Launch failures of the class that count against its breaker (capacity, quota, authorization, invalid request, unknown; not throttling).", []string{"class"}, nil),
		errors:   prometheus.NewCounter(prometheus.CounterOpts{Name: "burst_launch_breaker_read_errors_total", Help: "Scrapes that could not read the breaker state file."}),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.open, c.state, c.failures, c.until, c.trips, c.launchFx} {
		ch <- d
	}
	c.errors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	sts, err := c.b.Snapshot()
	if err != nil {
		c.errors.Inc()
	}
	for _, s := range sts {
		open := 0.0
		if s.State == breaker.Open || s.State == breaker.HalfOpen {
			open = 1
		}
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, open, s.Class)
		for _, st := range []breaker.State{breaker.Closed, breaker.Open, breaker.HalfOpen} {
			v := 0.0
			if s.State == st || (st == breaker.Closed && s.State == "") {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, s.Class, string(st))
		}
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.GaugeValue, float64(s.Failures), s.Class)
		u := 0.0
		if open == 1 {
			u = float64(s.Until.Unix())
		}
		ch <- prometheus.MustNewConstMetric(c.until, prometheus.GaugeValue, u, s.Class)
		ch <- prometheus.MustNewConstMetric(c.trips, prometheus.CounterValue, float64(s.TotalTrips), s.Class)
		ch <- prometheus.MustNewConstMetric(c.launchFx, prometheus.CounterValue, float64(s.TotalFailures), s.Class)
	}
	c.errors.Collect(ch)
}
