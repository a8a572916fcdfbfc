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
// of BootMedians x Interruptions x Checkpoints is simulated for burst;
// idle-timeout (which has no spot and no checkpoints) once per boot median.
type SweepSpec struct {
	BootMedians   []time.Duration
	Interruptions []InterruptModel
	Checkpoints   []time.Duration // negative: no checkpointing
}

// SweepRow is one combination's outcome.
type SweepRow struct {
	BootMedianS        float64 `json:"boot_median_s"`
	Interruptions      string  `json:"interruptions"`
	CheckpointS        float64 `json:"checkpoint_s"` // 0: none
	BurstCostUSD       float64 `json:"burst_cost_usd"`
	IdleTimeoutCostUSD float64 `json:"idle_timeout_cost_usd"`
	SavingsPct         float64 `json:"savings_vs_idle_timeout_pct"`
	BurstWaitP95S      float64 `json:"burst_wait_p95_s"`
	IdleWaitP95S       float64 `json:"idle_timeout_wait_p95_s"`
	BurstLostGPUHours  float64 `json:"burst_lost_gpu_hours"`
	BurstInterruptions int     `json:"burst_interruptions"`
	BurstSpotShare     float64 `json:"burst_spot_gpu_hour_share"` // of billed GPU-hours
	BurstWins          bool    `json:"burst_cheaper"`
}

// Sweep runs the sensitivity sweep on all CPUs. Rows come back in spec
// order (boot, then interruptions, then checkpoint).
func Sweep(ctx context.Context, base Options, jobs []trace.Job, spec SweepSpec) ([]SweepRow, error) {
	base = base.withDefaults()
	if base.Sizer == nil {
		s, err := NewPolicySizer(base.Catalog)
		if err != nil {
			return nil, fmt.Errorf("setting up the sizing policy: %w", err)
		}
		base.Sizer = s
	}
	type task struct {
		idx  int
		opts Options
	}
	var tasks []task
	nb := len(spec.BootMedians)
	for bi, b := range spec.BootMedians {
		o := base
		o.BootMedian, o.Policies = b, []string{PolicyIdleTimeout}
		tasks = append(tasks, task{-1 - bi, o})
	}
	var rows []SweepRow
	for _, b := range spec.BootMedians {
		for _, im := range spec.Interruptions {
			for _, ck := range spec.Checkpoints {
				o := base
				o.BootMedian, o.Interruptions, o.Checkpoint, o.Policies = b, im, ck, []string{PolicyBurst}
				tasks = append(tasks, task{len(rows), o})
				rows = append(rows, SweepRow{BootMedianS: b.Seconds(), Interruptions: im.String(), CheckpointS: max(ck, 0).Seconds()})
			}
		}
	}
	idle := make([]PolicyResult, nb)
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	ch := make(chan task)
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range ch {
				r, err := Run(ctx, t.opts, jobs)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					p := r.Policies[0]
					if t.idx < 0 {
						idle[-1-t.idx] = p
					} else {
						row := &rows[t.idx]
						row.BurstCostUSD, row.BurstWaitP95S, row.BurstLostGPUHours, row.BurstInterruptions = p.CostUSD, p.WaitP95S, p.LostGPUHours, p.Interruptions
						if p.GPUHoursBilled > 0 {
							row.BurstSpotShare = p.SpotGPUHours / p.GPUHoursBilled
						}
					}
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
	if firstErr != nil {
		return nil, fmt.Errorf("sweeping: %w", firstErr)
	}
	per := len(spec.Interruptions) * len(spec.Checkpoints)
	for i := range rows {
		it := idle[i/per]
		rows[i].IdleTimeoutCostUSD, rows[i].IdleWaitP95S = it.CostUSD, it.WaitP95S
		if it.CostUSD > 0 {
			rows[i].SavingsPct = 100 * (it.CostUSD - rows[i].BurstCostUSD) / it.CostUSD
		}
		rows[i].BurstWins = rows[i].BurstCostUSD < it.CostUSD
	}
	return rows, nil
}

// WriteSweep prints the sweep as a table.
func WriteSweep(w io.Writer, rows []SweepRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "boot\tinterruptions\tcheckpoint\tburst USD\tidle-timeout USD\tsavings\tburst wait p95\tidle-timeout p95\tlost GPU-h\tinterrupts\tspot GPU-h\tcheaper\t")
	for _, r := range rows {
		win := "burst"
		if !r.BurstWins {
			win = "IDLE-TIMEOUT"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%+.1f%%\t%s\t%s\t%s\t%d\t%.0f%%\t%s\t\n", dur(r.BootMedianS), r.Interruptions, ckptText(r.CheckpointS),
			money(r.BurstCostUSD), money(r.IdleTimeoutCostUSD), r.SavingsPct, dur(r.BurstWaitP95S), dur(r.IdleWaitP95S), num(r.BurstLostGPUHours), r.BurstInterruptions, 100*r.BurstSpotShare, win)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the sweep: %w", err)
	}
	return nil
}
