package simulate

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// WriteTable prints one row per policy: cost, GPU-hours billed, used, idle
// and lost, queue wait percentiles, launches, and savings against the
// static and idle-timeout baselines.
func WriteTable(w io.Writer, r Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tcost USD\tGPU-h billed\tGPU-h used\tidle GPU-h\tlost GPU-h\twait p50\tp95\tp99\twarm starts\tlaunches\tspot GPU-h\tinterrupts\twarm pool USD\tvs static\tvs idle-timeout\t")
	for _, p := range r.Policies {
		pool := "-"
		if p.PoolLaunches > 0 || p.PoolCostUSD > 0 {
			pool = money(p.PoolCostUSD)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t\n",
			p.Name, money(p.CostUSD), num(p.GPUHoursBilled), num(p.GPUHoursUsed), num(p.IdleGPUHours), num(p.LostGPUHours),
			dur(p.WaitP50S), dur(p.WaitP95S), dur(p.WaitP99S), warmShare(p), p.Launches, spotShare(p), p.Interruptions, pool,
			pct(p.SavingsVsStaticPct), pct(p.SavingsVsIdleTimeoutPct))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the table: %w", err)
	}
	a := r.Assumptions
	boot := "fixed " + dur(a.BootMedianS)
	if a.BootSigma > 0 {
		boot = fmt.Sprintf("lognormal median %s sigma %.2f", dur(a.BootMedianS), a.BootSigma)
	}
	_, err := fmt.Fprintf(w, "\n%d jobs over %.1f days; GPU model %s; boot %s; idle timeout %s; warm window %s; checkpoint %s (on notice: %v); interruptions %s; spot dry %.0f%% per pool, %d zone(s); on-demand after %d interruptions without progress; avoid interrupted pool %v; seed %d\n",
		r.Jobs, r.SpanHours/24, a.GPUModel, boot, dur(a.IdleTimeoutS), dur(a.WarmWindowS), ckptText(a.CheckpointS), a.CheckpointOnNotice,
		a.Interruptions, 100*a.SpotDryProb, a.Zones, a.MaxSpotInterruptions, a.AvoidInterruptedPool, a.Seed)
	if a.WarmPool {
		fb := "fixed"
		if a.WarmMissFeedback {
			fb = "raised while a class's misses exceed " + fmt.Sprintf("%.2f", 1-a.WarmQuantile)
		}
		fmt.Fprintf(w, "burst warm pool: %.2f-quantile (%s) of Poisson node demand in one %s lead time; rate = %.2f x hour-of-week profile + %.2f x recent rate (half-life %s); cap $%s per class per day; scheduling delay %s\n",
			a.WarmQuantile, fb, dur(a.WarmLeadTimeS), a.WarmProfileWeight, 1-a.WarmProfileWeight, dur(a.WarmHalfLifeS), num(a.WarmCapUSDPerDay), dur(a.SchedDelayS))
	} else {
		fmt.Fprintf(w, "burst warm pool: off; scheduling delay %s\n", dur(a.SchedDelayS))
	}
	for _, p := range r.Policies {
		if p.StaticNodes > 0 {
			fmt.Fprintf(w, "static cluster: %d x %s (%d%%-ile of concurrent GPU demand), FIFO with greedy backfill\n", p.StaticNodes, p.StaticType, int(math.Round(100*a.StaticPercentile)))
		}
	}
	if rr := r.Reservation; rr != nil {
		fmt.Fprintf(w, "reservation: %d x %s (%s, %s per instance-hour, held %s from the first submission): bill %s whether used or not; used %s node-h (%.1f%%), idle cost %s, %d job placements\n",
			rr.Nodes, rr.Type, rr.Kind, money(rr.USDPerHour), dur(rr.HeldHours*3600), money(rr.BillUSD), num(rr.UsedNodeHours), rr.UtilisationPct, money(rr.IdleCostUSD), rr.Jobs)
		fmt.Fprintf(w, "burst with the reservation: %s (its bill included) against %s with none: saved %s (%+.1f%%); break-even price %s per instance-hour\n",
			money(rr.CostWithUSD), money(rr.CostWithoutUSD), money(rr.SavedUSD), rr.SavedPct, money(rr.BreakEvenUSDPerHour))
	}
	if err != nil {
		return fmt.Errorf("writing the table: %w", err)
	}
	return nil
}

// warmShare is the share of jobs whose first start found every node up.
func warmShare(p PolicyResult) string {
	n := p.WarmStarts + p.AheadStarts + p.ColdStarts
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(p.WarmStarts)/float64(n))
}

func spotShare(p PolicyResult) string {
	if p.GPUHoursBilled <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*p.SpotGPUHours/p.GPUHoursBilled)
}

func ckptText(s float64) string {
	if s <= 0 {
		return "none"
	}
	return dur(s)
}

func money(v float64) string { return "$" + num(v) }

// num formats with thousands separators and no decimals (two below 100).
func num(v float64) string {
	if math.Abs(v) < 100 {
		return fmt.Sprintf("%.2f", v)
	}
	s := fmt.Sprintf("%.0f", math.Abs(v))
	var b strings.Builder
	if v < 0 {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func pct(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", *p)
}

// dur formats seconds compactly: 45s, 3.2m, 5.1h, 2.3d.
func dur(s float64) string {
	switch {
	case s < 90:
		return fmt.Sprintf("%.0fs", s)
	case s < 90*60:
		return fmt.Sprintf("%.1fm", s/60)
	case s < 48*3600:
		return fmt.Sprintf("%.1fh", s/3600)
	default:
		return fmt.Sprintf("%.1fd", s/86400)
	}
}
