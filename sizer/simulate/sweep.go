package simulate

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/burst-hpc/burst/sizer/trace"
)

// SweepSpec lists the values a sensitivity sweep tries. Every combination
// of BootMedians x Interruptions x Checkpoints x WarmCaps x WarmQuantiles
// is simulated for burst; idle-timeout (which has no spot, no checkpoints
// and no warm pool) once per boot median.
type SweepSpec struct {
	BootMedians   []time.Duration
	Interruptions []InterruptModel
	Checkpoints   []time.Duration // negative: no checkpointing
	// WarmCaps are warm-pool caps in USD per class per day; negative means
	// no pool. Empty: the base options' pool only.
	WarmCaps []float64
	// WarmQuantiles are warm-pool quantiles; empty: the base options'.
	WarmQuantiles []float64
	// Progress, when set, is called after each run (done of total), one
	// call at a time.
	Progress func(done, total int)
}

// SweepRow is one combination's outcome.
type SweepRow struct {
	BootMedianS        float64 `json:"boot_median_s"`
	Interruptions      string  `json:"interruptions"`
	CheckpointS        float64 `json:"checkpoint_s"`         // 0: none
	WarmCapUSDPerDay   float64 `json:"warm_cap_usd_per_day"` // -1: no warm pool
	WarmQuantile       float64 `json:"warm_quantile,omitempty"`
	BurstCostUSD       float64 `json:"burst_cost_usd"`
	IdleTimeoutCostUSD float64 `json:"idle_timeout_cost_usd"`
	SavingsPct         float64 `json:"savings_vs_idle_timeout_pct"`
	BurstWaitP50S      float64 `json:"burst_wait_p50_s"`
	IdleWaitP50S       float64 `json:"idle_timeout_wait_p50_s"`
	BurstWaitP95S      float64 `json:"burst_wait_p95_s"`
	IdleWaitP95S       float64 `json:"idle_timeout_wait_p95_s"`
	BurstWaitP99S      float64 `json:"burst_wait_p99_s"`
	IdleWaitP99S       float64 `json:"idle_timeout_wait_p99_s"`
	BurstWarmStarts    float64 `json:"burst_warm_start_share"`
	BurstPoolCostUSD   float64 `json:"burst_warm_pool_cost_usd"`
	BurstLostGPUHours  float64 `json:"burst_lost_gpu_hours"`
	BurstInterruptions int     `json:"burst_interruptions"`
	BurstSpotShare     float64 `json:"burst_spot_gpu_hour_share"` // of billed GPU-hours
	BurstWins          bool    `json:"burst_cheaper"`
	// BurstWaitsNoLonger: burst's p50, p95 and p99 waits are each at most
	// idle-timeout's.
	BurstWaitsNoLonger bool `json:"burst_waits_no_longer"`
}

// Sweep runs the sensitivity sweep on all CPUs. Rows come back in spec
// order (boot, then interruptions, then checkpoint, then warm cap, then
// warm quantile).
func Sweep(ctx context.Context, base Options, jobs []trace.Job, spec SweepSpec) ([]SweepRow, error) {
	base = base.withDefaults()
	base.Reserved = Reservation{} // the sweep compares burst with idle-timeout only
	if base.Sizer == nil {
		s, err := NewPolicySizer(base.Catalog)
		if err != nil {
			return nil, fmt.Errorf("setting up the sizing policy: %w", err)
		}
		base.Sizer = s
	}
	tasks, rows := sweepTasks(base, spec)
	nb := len(spec.BootMedians)
	idle := make([]PolicyResult, nb)
	if err := runSweep(ctx, jobs, tasks, rows, idle, spec.Progress); err != nil {
		return nil, fmt.Errorf("sweeping: %w", err)
	}
	per := len(rows) / max(1, nb)
	for i := range rows {
		rows[i].compare(idle[i/per])
	}
	return rows, nil
}

// sweepTask is one run of the sweep: idx is its row, or -1-i for the i-th
// boot median's idle-timeout run.
type sweepTask struct {
	idx  int
	opts Options
}

// sweepTasks lists the sweep's runs and its rows: idle-timeout once per
// boot median, then burst for every combination (one quantile only
// without a warm pool).
func sweepTasks(base Options, spec SweepSpec) ([]sweepTask, []SweepRow) {
	var tasks []sweepTask
	for bi, b := range spec.BootMedians {
		o := base
		o.BootMedian, o.Policies = b, []string{PolicyIdleTimeout}
		tasks = append(tasks, sweepTask{-1 - bi, o})
	}
	caps, qs := spec.WarmCaps, spec.WarmQuantiles
	if len(caps) == 0 {
		c := base.Warm.capUSD()
		if base.Warm.Disabled {
			c = -1
		}
		caps = []float64{c}
	}
	if len(qs) == 0 {
		qs = []float64{base.Warm.Quantile}
	}
	var rows []SweepRow
	for _, b := range spec.BootMedians {
		for _, im := range spec.Interruptions {
			for _, ck := range spec.Checkpoints {
				for _, wc := range caps {
					for qi, wq := range qs {
						if wc < 0 && qi > 0 {
							continue // no pool: the quantile does not matter
						}
						o := base
						o.BootMedian, o.Interruptions, o.Checkpoint, o.Policies = b, im, ck, []string{PolicyBurst}
						o.Warm.Disabled, o.Warm.CapUSDPerDay, o.Warm.Quantile = wc < 0, wc, wq
						if wc == 0 {
							o.Warm.CapUSDPerDay = -1 // a cap of 0 (zero would mean the default)
						}
						row := SweepRow{BootMedianS: b.Seconds(), Interruptions: im.String(), CheckpointS: max(ck, 0).Seconds(), WarmCapUSDPerDay: wc}
						if wc < 0 {
							row.WarmCapUSDPerDay = -1
						} else {
							row.WarmQuantile = o.Warm.params(o.withDefaults()).Quantile
						}
						tasks = append(tasks, sweepTask{len(rows), o})
						rows = append(rows, row)
					}
				}
			}
		}
	}
	return tasks, rows
}

// runSweep runs the tasks on all CPUs, filling burst's rows and each boot
// median's idle-timeout result; the first error is returned.
func runSweep(ctx context.Context, jobs []trace.Job, tasks []sweepTask, rows []SweepRow, idle []PolicyResult, progress func(done, total int)) error {
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		done     int
	)
	ch := make(chan sweepTask)
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range ch {
				r, err := Run(ctx, t.opts, jobs)
				mu.Lock()
				done++
				if progress != nil {
					progress(done, len(tasks))
				}
				switch {
				case err != nil:
					if firstErr == nil {
						firstErr = err
					}
				case t.idx < 0:
					idle[-1-t.idx] = r.Policies[0]
				default:
					rows[t.idx].fill(r.Policies[0])
				}
				mu.Unlock()
			}
		}()
	}
	for _, t := range tasks {
		ch <- t
	}
	close(ch)
	wg.Wait()
	return firstErr
}

// fill sets the row's burst figures from its run.
func (row *SweepRow) fill(p PolicyResult) {
	row.BurstCostUSD, row.BurstLostGPUHours, row.BurstInterruptions = p.CostUSD, p.LostGPUHours, p.Interruptions
	row.BurstWaitP50S, row.BurstWaitP95S, row.BurstWaitP99S = p.WaitP50S, p.WaitP95S, p.WaitP99S
	if p.GPUHoursBilled > 0 {
		row.BurstSpotShare = p.SpotGPUHours / p.GPUHoursBilled
	}
	if n := p.WarmStarts + p.AheadStarts + p.ColdStarts; n > 0 {
		row.BurstWarmStarts = float64(p.WarmStarts) / float64(n)
	}
	row.BurstPoolCostUSD = p.PoolCostUSD
}

// compare sets the row's idle-timeout figures (its boot median's run) and
// how burst compares.
func (row *SweepRow) compare(it PolicyResult) {
	row.IdleTimeoutCostUSD = it.CostUSD
	row.IdleWaitP50S, row.IdleWaitP95S, row.IdleWaitP99S = it.WaitP50S, it.WaitP95S, it.WaitP99S
	if it.CostUSD > 0 {
		row.SavingsPct = 100 * (it.CostUSD - row.BurstCostUSD) / it.CostUSD
	}
	row.BurstWins = row.BurstCostUSD < it.CostUSD
	row.BurstWaitsNoLonger = row.BurstWaitP50S <= it.WaitP50S && row.BurstWaitP95S <= it.WaitP95S && row.BurstWaitP99S <= it.WaitP99S
}

// WriteSweep prints the sweep as a table.
func WriteSweep(w io.Writer, rows []SweepRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "boot\tinterruptions\tcheckpoint\twarm cap/day\twarm q\tburst USD\tidle-timeout USD\tsavings\tburst wait p50\tp95\tp99\tidle-timeout p50\tp95\tp99\twarm starts\twarm pool USD\tlost GPU-h\tinterrupts\tspot GPU-h\tcheaper\twaits\t")
	for _, r := range rows {
		win := "burst"
		if !r.BurstWins {
			win = "IDLE-TIMEOUT"
		}
		waits := "burst <="
		if !r.BurstWaitsNoLonger {
			waits = "LONGER"
		}
		wc, wq := "off", "-"
		if r.WarmCapUSDPerDay >= 0 {
			wc, wq = money(r.WarmCapUSDPerDay), fmt.Sprintf("%.2f", r.WarmQuantile)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%+.1f%%\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f%%\t%s\t%s\t%d\t%.0f%%\t%s\t%s\t\n", dur(r.BootMedianS), r.Interruptions, ckptText(r.CheckpointS), wc, wq,
			money(r.BurstCostUSD), money(r.IdleTimeoutCostUSD), r.SavingsPct, dur(r.BurstWaitP50S), dur(r.BurstWaitP95S), dur(r.BurstWaitP99S), dur(r.IdleWaitP50S), dur(r.IdleWaitP95S), dur(r.IdleWaitP99S),
			100*r.BurstWarmStarts, money(r.BurstPoolCostUSD), num(r.BurstLostGPUHours), r.BurstInterruptions, 100*r.BurstSpotShare, win, waits)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the sweep: %w", err)
	}
	return nil
}
