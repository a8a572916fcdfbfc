package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// nodeCollector exports, at scrape time, each live instance's node and
// when its agent last reported (for a stale-agent alert), and the live
// fleet's size and price per class.
type nodeCollector struct{ s *Server }

var (
	lastReportDesc = prometheus.NewDesc("burst_sizer_node_last_report_timestamp_seconds",
		"Unix time of the last agent report from a node with a live instance (the sizer's clock), or of the instance's launch while none arrived.", []string{"node", "class"}, nil)
	liveDesc   = prometheus.NewDesc("burst_sizer_live_instances", "Instances not terminated, by node class.", []string{"class"}, nil)
	hourlyDesc = prometheus.NewDesc("burst_sizer_live_hourly_usd", "Summed hourly price of the live instances, by node class (USD/h).", []string{"class"}, nil)
)

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lastReportDesc
	ch <- liveDesc
	ch <- hourlyDesc
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := c.s.now()
	live, err := c.s.st.Instances(ctx, time.Time{}, now.Add(time.Hour), "", true)
	if err != nil {
		c.s.log.Warn("collecting node metrics", "err", err)
		return
	}
	seen, err := c.s.st.NodesSeen(ctx)
	if err != nil {
		c.s.log.Warn("collecting node metrics", "err", err)
		return
	}
	count, hourly := map[string]float64{}, map[string]float64{}
	for _, cl := range c.s.pol.Classes() {
		count[cl.Name], hourly[cl.Name] = 0, 0
	}
	last := map[string]time.Time{}
	class := map[string]string{}
	for _, in := range live {
		cl := classOfNode(in.Node)
		count[cl]++
		hourly[cl] += in.PriceUSD
		if in.Node == "" {
			continue
		}
		t := in.Launched
		if ns, ok := seen[in.Node]; ok && ns.Last.After(t) {
			t = ns.Last
		}
		if t.After(last[in.Node]) {
			last[in.Node], class[in.Node] = t, cl
		}
	}
	for n, t := range last {
		ch <- prometheus.MustNewConstMetric(lastReportDesc, prometheus.GaugeValue, float64(t.UnixMilli())/1000, n, class[n])
	}
	for cl, v := range count {
		ch <- prometheus.MustNewConstMetric(liveDesc, prometheus.GaugeValue, v, cl)
		ch <- prometheus.MustNewConstMetric(hourlyDesc, prometheus.GaugeValue, hourly[cl], cl)
	}
}
