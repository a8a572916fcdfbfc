package cmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/internal/warmpool"
)

// WarmStateFile is where serve keeps the warm pool's forecasts, in
// sizer.state_dir.
const WarmStateFile = "warm-forecast.json"

// classPricer prices what the pool launches for a class: the policy's best
// offering for a one-node job with no metadata (spot where the class
// allows), as burst-resume ranks a node powered up with no job.
func classPricer(pol *sizing.Policy) warmpool.Pricer {
	return func(_ context.Context, cl *config.Class) (float64, error) {
		offers, err := pol.Rank(sizing.RankInput{Class: cl.Name, Request: sizing.Request{GPUModel: cl.GPUModel, GPUsPerNode: cl.GPUsPerNode, Nodes: 1}, Zones: cl.Zones})
		if err != nil {
			return 0, fmt.Errorf("ranking class %s: %w", cl.Name, err)
		}
		if len(offers) == 0 {
			return 0, fmt.Errorf("class %s has no offering", cl.Name)
		}
		return offers[0].PriceUSD, nil
	}
}

// startWarmPool runs the warm pool of burst-sizer serve every warm.interval
// when warm.enabled, and exports its plans. A pool that cannot be built is
// logged and the daemon serves without it.
func startWarmPool(ctx context.Context, st *settings, reg prometheus.Registerer, fence func(context.Context) error, log *slog.Logger) *warmpool.Pool {
	if !st.cfg.Warm.Enabled {
		return nil
	}
	pol, err := st.policy()
	if err != nil {
		log.Error("warm pool not started", "err", err)
		return nil
	}
	waits := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "burst_job_start_wait_seconds",
		Help:    "Submit to start of the jobs the warm pool saw start, by class and start (warm: every node was up and idle before, so the wait is Slurm's scheduling; cold: a boot).",
		Buckets: []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800}}, []string{"class", "start"})
	started := func(class string, warmStart bool, wait time.Duration) {
		kind := "cold"
		if warmStart {
			kind = "warm"
		}
		waits.WithLabelValues(class, kind).Observe(wait.Seconds())
		log.Info("job started", "class", class, "start", kind, "wait_s", wait.Seconds())
	}
	sl, err := compose.Slurm(st.cfg, os.Getenv, log)
	if err != nil {
		log.Error("warm pool not started", "err", err)
		return nil
	}
	p, err := warmpool.New(warmpool.Options{Config: st.cfg, Slurm: sl, Price: classPricer(pol),
		StateFile: filepath.Join(st.cfg.Sizer.StateDir, WarmStateFile), Log: log, Started: started, Fence: fence})
	if err != nil {
		log.Error("warm pool not started", "err", err)
		return nil
	}
	if reg != nil {
		if err := errors.Join(reg.Register(warmCollector{p}), reg.Register(waits)); err != nil {
			log.Warn("exporting warm pool metrics", "err", err)
		}
	}
	log.Info("warm pool started", "interval", st.cfg.Warm.Interval.Duration, "quantile", st.cfg.Warm.Quantile, "lead_time", st.cfg.Warm.LeadTime.Duration)
	go p.Run(ctx, st.cfg.Warm.Interval.Duration)
	return p
}

var (
	warmTargetDesc = prometheus.NewDesc("burst_warm_target_nodes", "Nodes the warm pool keeps warm for the class (the forecast's quantile, capped).", []string{"class"}, nil)
	warmWantDesc   = prometheus.NewDesc("burst_warm_wanted_nodes", "The forecast's quantile before the daily cap.", []string{"class"}, nil)
	warmCapDesc    = prometheus.NewDesc("burst_warm_cap_nodes", "Most nodes the class's warm_usd_per_day allows at the pool's price.", []string{"class"}, nil)
	warmIdleDesc   = prometheus.NewDesc("burst_warm_idle_nodes", "Class nodes up and idle with no job.", []string{"class"}, nil)
	warmBootDesc   = prometheus.NewDesc("burst_warm_booting_nodes", "Class nodes powering up with no job (launched ahead).", []string{"class"}, nil)
	warmRateDesc   = prometheus.NewDesc("burst_warm_forecast_nodes_per_hour", "The class's forecast arrival rate of node requests.", []string{"class"}, nil)
	warmPriceDesc  = prometheus.NewDesc("burst_warm_price_usd_per_hour", "Hourly price of the node the pool launches for the class.", []string{"class"}, nil)
	warmSpendDesc  = prometheus.NewDesc("burst_warm_spend_rate_usd_per_day", "What the class's idle warm nodes cost a day at the pool's price (at most warm_usd_per_day).", []string{"class"}, nil)
	warmCapUSDDesc = prometheus.NewDesc("burst_warm_cap_usd_per_day", "The class's warm_usd_per_day.", []string{"class"}, nil)
	warmErrorsDesc = prometheus.NewDesc("burst_warm_plan_error", "1 when the class's last pass failed (see the log).", []string{"class"}, nil)
	warmQDesc      = prometheus.NewDesc("burst_warm_quantile", "The quantile of one boot's demand the class's target keeps (warm.quantile, raised while more of its jobs than 1-quantile find no warm node).", []string{"class"}, nil)
	warmMissDesc   = prometheus.NewDesc("burst_warm_miss_rate", "The class's recent share of jobs that found no warm node (EWMA over about 10/(1-quantile) jobs).", []string{"class"}, nil)
	warmAllDescs   = []*prometheus.Desc{warmTargetDesc, warmWantDesc, warmCapDesc, warmIdleDesc, warmBootDesc, warmRateDesc, warmPriceDesc, warmSpendDesc, warmCapUSDDesc, warmErrorsDesc, warmQDesc, warmMissDesc}
)

type warmCollector struct{ p *warmpool.Pool }

func (c warmCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range warmAllDescs {
		ch <- d
	}
}

func (c warmCollector) Collect(ch chan<- prometheus.Metric) {
	for _, cp := range c.p.Plans() {
		g := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, cp.Class)
		}
		g(warmTargetDesc, float64(cp.Plan.Target))
		g(warmWantDesc, float64(cp.Plan.Want))
		g(warmCapDesc, float64(cp.Plan.CapNodes))
		g(warmIdleDesc, float64(len(cp.Warm)))
		g(warmBootDesc, float64(len(cp.Booting)))
		g(warmRateDesc, cp.Plan.RatePerHour)
		g(warmQDesc, cp.Plan.Quantile)
		g(warmMissDesc, cp.Plan.MissRate)
		g(warmPriceDesc, cp.PriceUSD)
		g(warmSpendDesc, 24*cp.PriceUSD*float64(len(cp.Warm)+len(cp.Booting)))
		g(warmCapUSDDesc, cp.CapUSDPerDay)
		e := 0.0
		if cp.Err != "" {
			e = 1
		}
		g(warmErrorsDesc, e)
	}
}
