// Package simulate replays a job trace through three ways of buying GPUs
// and reports what each costs and how long jobs wait:
//
//   - static: a fixed on-demand cluster sized to the trace's 95th-percentile
//     demand (see static.go for the sizing and scheduling rules);
//   - idle-timeout: on-demand nodes launched per job and released after an
//     idle timeout (ParallelCluster's default 10 minutes);
//   - burst: nodes released when their job ends (after a short warm reuse
//     window), instance type and spot/on-demand chosen by burst's sizing
//     policy, spot interruptions with checkpoint and requeue, and on-demand
//     fallback when a spot pool is dry.
//
// It is a discrete-event simulation over a container/heap event queue,
// deterministic for a given Options.Seed.
package simulate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/sizer/trace"
)

// Sample is one point of a policy's cost and capacity over time.
type Sample struct {
	At      time.Duration // since the first submission
	CostUSD float64       // cumulative spend (EC2 per-second billing; 60 s minimums land at release)
	GPUs    int           // GPUs billed at that moment
}

// PolicyResult is one policy's figures. GPU-hours: billed = paid for;
// used = the trace's GPUs x run time; lost = work redone after spot
// interruptions plus the boot of the replacement nodes; idle = billed -
// used - lost (boots, idle and warm windows, GPUs a job's node has beyond
// what it asked for, an idle static cluster).
type PolicyResult struct {
	Name           string  `json:"name"`
	CostUSD        float64 `json:"cost_usd"`
	GPUHoursBilled float64 `json:"gpu_hours_billed"`
	GPUHoursUsed   float64 `json:"gpu_hours_used"`
	IdleGPUHours   float64 `json:"idle_gpu_hours"`
	LostGPUHours   float64 `json:"lost_gpu_hours"`
	SpotGPUHours   float64 `json:"spot_gpu_hours"` // billed GPU-hours on spot
	WaitP50S       float64 `json:"wait_p50_s"`
	WaitP95S       float64 `json:"wait_p95_s"`
	WaitP99S       float64 `json:"wait_p99_s"`
	WaitMeanS      float64 `json:"wait_mean_s"`
	Launches       int     `json:"launches"`
	SpotLaunches   int     `json:"spot_launches"`
	DryFallbacks   int     `json:"spot_dry_fallbacks"`
	Interruptions  int     `json:"interruptions"`
	// First starts on nodes that were up (a warm hit: the wait is Slurm's
	// scheduling only), on nodes the warm pool launched ahead (part of a
	// boot), and on nodes launched for the job (a cold start).
	WarmStarts  int `json:"warm_starts"`
	AheadStarts int `json:"ahead_starts"`
	ColdStarts  int `json:"cold_starts"`
	// The warm pool (burst only): node-hours and cost of pool nodes with no
	// job (idle in the pool or booting ahead), and its launches.
	PoolNodeHours float64 `json:"warm_pool_node_hours"`
	PoolCostUSD   float64 `json:"warm_pool_cost_usd"`
	PoolLaunches  int     `json:"warm_pool_launches"`
	StaticNodes   int     `json:"static_nodes,omitempty"`
	StaticType    string  `json:"static_type,omitempty"`
	// Savings in percent of the baseline's cost; nil when the baseline was
	// not simulated.
	SavingsVsStaticPct      *float64 `json:"savings_vs_static_pct,omitempty"`
	SavingsVsIdleTimeoutPct *float64 `json:"savings_vs_idle_timeout_pct,omitempty"`
	Series                  []Sample `json:"-"`
}

// Result is a whole simulation.
type Result struct {
	Jobs      int            `json:"jobs"`
	Start     time.Time      `json:"start"`
	SpanHours float64        `json:"span_hours"` // first submission to last ideal completion
	Policies  []PolicyResult `json:"policies"`
	// Reservation is set when Options.Reserved is: the burst+reserved row
	// against burst's with no reservation.
	Reservation *ReservationResult `json:"reservation,omitempty"`
	Assumptions Assumptions        `json:"assumptions"`
}

// Assumptions echoes the model's inputs.
type Assumptions struct {
	Seed                 uint64  `json:"seed"`
	GPUModel             string  `json:"gpu_model"`
	BootMedianS          float64 `json:"boot_median_s"`
	BootSigma            float64 `json:"boot_sigma"`
	IdleTimeoutS         float64 `json:"idle_timeout_s"`
	WarmWindowS          float64 `json:"warm_window_s"`
	SchedDelayS          float64 `json:"sched_delay_s"`
	WarmPool             bool    `json:"warm_pool"`
	WarmQuantile         float64 `json:"warm_quantile"`
	WarmMissFeedback     bool    `json:"warm_miss_feedback"` // the quantile is raised while a class's misses exceed 1-q
	WarmHalfLifeS        float64 `json:"warm_half_life_s"`
	WarmProfileWeight    float64 `json:"warm_profile_weight"`
	WarmLeadTimeS        float64 `json:"warm_lead_time_s"`
	WarmCapUSDPerDay     float64 `json:"warm_cap_usd_per_day"`
	CheckpointS          float64 `json:"checkpoint_s"`
	CheckpointOnNotice   bool    `json:"checkpoint_on_notice"`
	Interruptions        string  `json:"interruptions"`
	AvoidInterruptedPool bool    `json:"avoid_interrupted_pool"`
	Zones                int     `json:"zones"` // spot pools per type
	SpotDryProb          float64 `json:"spot_dry_prob"`
	MaxSpotInterruptions int     `json:"max_spot_interruptions"`
	StaticPercentile     float64 `json:"static_percentile"`
}

// Run simulates jobs (any order; they are sorted by submit time on a copy)
// under every policy in opts.
func Run(ctx context.Context, opts Options, jobs []trace.Job) (Result, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return Result{}, fmt.Errorf("checking simulation options: %w", err)
	}
	if o.Sizer == nil {
		s, err := NewPolicySizer(o.Catalog)
		if err != nil {
			return Result{}, fmt.Errorf("setting up the sizing policy: %w", err)
		}
		o.Sizer = s
	}
	if len(jobs) == 0 {
		return Result{}, errors.New("simulating: the trace has no jobs")
	}
	js := append([]trace.Job(nil), jobs...)
	trace.SortBySubmit(js)
	for i, j := range js {
		if j.GPUs < 1 || j.Duration < 0 {
			return Result{}, fmt.Errorf("simulating: job %d (%s) has %d GPUs and duration %v; want GPUs >= 1, duration >= 0", i, j.ID, j.GPUs, j.Duration)
		}
	}
	t0 := js[0].Submit
	span := 0.0
	for _, j := range js {
		span = max(span, j.Submit.Sub(t0).Seconds()+j.Duration.Seconds())
	}
	res := Result{Jobs: len(js), Start: t0, SpanHours: span / 3600, Assumptions: Assumptions{
		Seed: o.Seed, GPUModel: o.GPUModel, BootMedianS: o.BootMedian.Seconds(), BootSigma: max(o.BootSigma, 0),
		IdleTimeoutS: o.IdleTimeout.Seconds(), WarmWindowS: max(o.WarmWindow, 0).Seconds(), SchedDelayS: o.schedDelay(),
		CheckpointS: max(o.Checkpoint, 0).Seconds(), CheckpointOnNotice: o.CheckpointOnNotice,
		Interruptions: o.Interruptions.String(), AvoidInterruptedPool: o.AvoidInterruptedPool, Zones: max(1, len(o.Zones)), SpotDryProb: max(o.SpotDryProb, 0),
		MaxSpotInterruptions: o.MaxSpotInterruptions, StaticPercentile: o.StaticPercentile,
	}}
	if !o.Warm.Disabled {
		wp := o.Warm.params(o)
		res.Assumptions.WarmPool, res.Assumptions.WarmQuantile, res.Assumptions.WarmHalfLifeS = true, wp.Quantile, wp.HalfLife.Seconds()
		res.Assumptions.WarmMissFeedback = !wp.FixedQuantile
		res.Assumptions.WarmProfileWeight, res.Assumptions.WarmLeadTimeS, res.Assumptions.WarmCapUSDPerDay = wp.ProfileWeight, wp.LeadTime.Seconds(), o.Warm.capUSD()
	}
	policies := o.Policies
	if o.Reserved.Nodes > 0 {
		i := slices.Index(policies, PolicyBurst) // validate saw it
		policies = slices.Insert(slices.Clone(policies), i+1, PolicyBurstReserved)
	}
	var rsv *reserved
	for _, p := range policies {
		if err := ctx.Err(); err != nil {
			return Result{}, fmt.Errorf("simulating %s: %w", p, err)
		}
		var (
			tl  *tally
			err error
			pr  = PolicyResult{Name: p}
		)
		switch p {
		case PolicyStatic:
			var nodes int
			var typ catalog.InstanceType
			tl, nodes, typ, err = runStatic(o, js, t0, span)
			pr.StaticNodes, pr.StaticType = nodes, typ.Name
		default:
			tl, err = runElastic(ctx, o, p, js, t0, span)
		}
		if err != nil {
			return Result{}, err
		}
		fill(&pr, tl)
		res.Policies = append(res.Policies, pr)
		if tl.res != nil {
			rsv = tl.res
		}
	}
	compareCosts(&res, rsv, o.Reserved.Kind)
	return res, nil
}

// compareCosts sets each policy's saving against the static and
// idle-timeout baselines, and the reservation's against burst with none.
func compareCosts(res *Result, rsv *reserved, kind string) {
	base := map[string]float64{}
	for _, p := range res.Policies {
		base[p.Name] = p.CostUSD
	}
	if rsv != nil {
		r := rsv.result(kind, base[PolicyBurstReserved], base[PolicyBurst])
		res.Reservation = &r
	}
	for i := range res.Policies {
		p := &res.Policies[i]
		if c, ok := base[PolicyStatic]; ok && c > 0 {
			v := 100 * (c - p.CostUSD) / c
			p.SavingsVsStaticPct = &v
		}
		if c, ok := base[PolicyIdleTimeout]; ok && c > 0 {
			v := 100 * (c - p.CostUSD) / c
			p.SavingsVsIdleTimeoutPct = &v
		}
	}
}

func fill(p *PolicyResult, tl *tally) {
	p.CostUSD = tl.cost
	p.GPUHoursBilled = tl.gpuSecBilled / 3600
	p.GPUHoursUsed = tl.gpuSecUsed / 3600
	p.LostGPUHours = tl.gpuSecLost / 3600
	p.SpotGPUHours = tl.gpuSecSpot / 3600
	p.IdleGPUHours = p.GPUHoursBilled - p.GPUHoursUsed - p.LostGPUHours
	p.Launches, p.SpotLaunches, p.DryFallbacks, p.Interruptions = tl.launches, tl.spotLaunches, tl.dry, tl.interruptions
	p.WarmStarts, p.AheadStarts, p.ColdStarts = tl.warmStarts, tl.aheadStarts, tl.coldStarts
	p.PoolNodeHours, p.PoolCostUSD, p.PoolLaunches = tl.poolSec/3600, tl.poolCost, tl.poolLaunches
	w := tl.waits
	sort.Float64s(w)
	p.WaitP50S, p.WaitP95S, p.WaitP99S = quantile(w, 0.50), quantile(w, 0.95), quantile(w, 0.99)
	sum := 0.0
	for _, x := range w {
		sum += x
	}
	if len(w) > 0 {
		p.WaitMeanS = sum / float64(len(w))
	}
	p.Series = tl.series
}

// quantile is the nearest-rank quantile of sorted xs.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(float64(len(xs))*q+0.999999999) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}
