package dash

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/store"
)

// What users feel: each job's wait from submission to start, split by
// what it waited for (the Jobs page), and each class's waits (the Fleet
// page).

// WaitWindow is how far back the Fleet page's waits per class look.
const WaitWindow = 24 * time.Hour

// splitWait splits a job's wait (sizerapi.JobWait says how); nil when the
// store lacks its submit time or the start precedes it.
func splitWait(w store.JobWait) *sizerapi.JobWait {
	sub, start := w.Submitted, w.Started
	if sub.IsZero() || start.IsZero() || start.Before(sub) {
		return nil
	}
	out := &sizerapi.JobWait{Submitted: sub, Started: start}
	total := start.Sub(sub)
	var boot, reg time.Duration
	if n, ok := lastReady(w.Nodes); ok {
		out.Node = n.Node
		l := n.Launched
		bootEnd, regEnd := start, start // without a boot report: launch to start
		if b := n.Boot; b != nil && !b.Slurmd.IsZero() {
			out.BootReport = true
			bootEnd = billing.Later(b.Slurmd, l) // the node's clock may run behind the head node's
			if !b.Registered.IsZero() {
				regEnd = billing.Later(b.Registered, bootEnd)
			}
		}
		boot = overlap(l, bootEnd, sub, start)
		if out.BootReport {
			reg = overlap(bootEnd, regEnd, sub, start)
		}
	}
	out.TotalS, out.BootS, out.RegistrationS = total.Seconds(), boot.Seconds(), reg.Seconds()
	out.QueueS = (total - boot - reg).Seconds()
	return out
}

// lastReady is the node the job waited for last: of those with an
// instance, the one registered last (by its boot report, else by its
// launch).
func lastReady(ns []store.WaitNode) (store.WaitNode, bool) {
	var best store.WaitNode
	var bestAt time.Time
	found := false
	for _, n := range ns {
		if n.InstanceID == "" {
			continue
		}
		at := n.Launched
		if n.Boot != nil && !n.Boot.Registered.IsZero() {
			at = n.Boot.Registered
		}
		if !found || at.After(bestAt) {
			best, bestAt, found = n, at, true
		}
	}
	return best, found
}

// overlap is how much of [a, b) lies in [from, to).
func overlap(a, b, from, to time.Time) time.Duration {
	a, b = billing.Later(a, from), billing.Earlier(b, to)
	if !b.After(a) {
		return 0
	}
	return b.Sub(a)
}

// jobWaits are the split waits of the jobs (by id) that have one.
func (s *Source) jobWaits(ctx context.Context, ids []string) (map[string]*sizerapi.JobWait, error) {
	ws, err := s.o.Store.JobWaits(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*sizerapi.JobWait, len(ws))
	for id, w := range ws {
		if sw := splitWait(w); sw != nil {
			out[id] = sw
		}
	}
	return out, nil
}

// addWaits sets each class's waits: those of the scope's jobs that
// started in the last WaitWindow.
func (s *Source) addWaits(ctx context.Context, sc Scope, now time.Time, v *sizerapi.FleetView) error {
	since := now.Add(-WaitWindow)
	ws, err := s.o.Store.StartedWaits(ctx, since, sc.Account)
	if err != nil {
		return err
	}
	byClass := map[string][]time.Duration{}
	for _, w := range ws {
		byClass[w.Class] = append(byClass[w.Class], w.Wait)
	}
	for i := range v.Classes {
		v.Classes[i].Waits = waitStats(byClass[v.Classes[i].Class], since)
	}
	return nil
}

// waitStats are the nearest-rank median and 95th percentile of ds.
func waitStats(ds []time.Duration, since time.Time) sizerapi.WaitStats {
	st := sizerapi.WaitStats{Since: since, Jobs: len(ds)}
	if len(ds) == 0 {
		return st
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	st.P50S, st.P95S = rank(ds, 50).Seconds(), rank(ds, 95).Seconds()
	return st
}

// rank is the p-th percentile of sorted ds, nearest rank: the smallest
// value at least p% of them do not exceed.
func rank(ds []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(ds)))) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}
