package dash

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/report"
	"github.com/burst-hpc/burst/sizer/spend"
	"github.com/burst-hpc/burst/sizer/store"
)

// Report is the monthly usage report (GET /v1/report) for the scope.
func (s *Source) Report(ctx context.Context, sc Scope) (sizerapi.UsageReport, error) {
	rep, _, _, err := s.report(ctx, sc)
	return rep, err
}

func (s *Source) report(ctx context.Context, sc Scope) (sizerapi.UsageReport, []sizerapi.JobUsage, []store.Instance, error) {
	now := s.o.Now()
	from := billing.MonthStart(now)
	jobs, err := s.o.Store.JobUsages(ctx, store.JobQuery{Since: from, Account: sc.Account})
	if err != nil {
		return sizerapi.UsageReport{}, nil, nil, err
	}
	ins, _, err := s.monthInstances(ctx, sc, now)
	if err != nil {
		return sizerapi.UsageReport{}, nil, nil, err
	}
	m, err := s.month(ctx, now)
	if err != nil {
		return sizerapi.UsageReport{}, nil, nil, err
	}
	rep := report.Build(jobs, scoped(m.Charges, sc), s.budgets(m, sc), now, report.Options{})
	if rep.Accounts == nil {
		rep.Accounts = []sizerapi.UsageRow{}
	}
	if rep.Users == nil {
		rep.Users = []sizerapi.UsageRow{}
	}
	if rep.Advice == nil {
		rep.Advice = []sizerapi.Advice{}
	}
	return rep, jobs, ins, nil
}

// RightSizing is the report's advice (recurring jobs that used at most
// half of the GPUs they asked for), each with the cheapest configured
// class that holds what the jobs used and what moving there would save a
// month at this month's pace. The jobs' usage comes from the usage Reader
// (kept in memory), their spend and their instances' bills from the spend
// Reader's tally.
func (s *Source) RightSizing(ctx context.Context, sc Scope) (sizerapi.RightSizingView, error) {
	now := s.o.Now()
	from := billing.MonthStart(now)
	month, err := s.o.Usage.Month(ctx, now)
	if err != nil {
		return sizerapi.RightSizingView{}, err
	}
	jobs := month // newest first
	if !sc.All() {
		jobs = nil
		for _, j := range month {
			if j.Account == sc.Account {
				jobs = append(jobs, j)
			}
		}
	}
	t, err := s.o.Spend.Tally(ctx, s.o.IdleOwner, now, spend.TallyOptions{Jobs: true})
	if err != nil {
		return sizerapi.RightSizingView{}, err
	}
	jobSpend := make(map[string]float64, len(t.Jobs)) // the scope's charges, by job
	for k, usd := range t.Jobs {
		if sc.All() || k.Account == sc.Account {
			jobSpend[k.JobID] += usd
		}
	}
	v := sizerapi.RightSizingView{At: now, Account: sc.Account, From: from, UsedFraction: 0.5, Items: []sizerapi.RightSizingItem{}}
	prices := groupPrices(jobs, t, sc)
	// the month so far as of the last whole minute: every reader within a
	// minute gets the same monthly extrapolation (see Money's forecast)
	fnow := now.Truncate(time.Minute)
	if !fnow.After(from) {
		fnow = now
	}
	elapsed := fnow.Sub(from).Hours()
	monthHours := from.AddDate(0, 1, 0).Sub(from).Hours()
	for _, a := range report.Advise(jobs, jobSpend, now, report.Options{}) {
		k := groupKey{a.Account, a.User, a.JobName}
		p := prices[k]
		it := sizerapi.RightSizingItem{Advice: a, SuggestedGPUs: max(a.UsedGPUs, 1)}
		if p != nil {
			it.Class = p.class
		}
		capType := capacity.OnDemand
		if p != nil && p.hours > 0 {
			it.CurrentUSDH = round4(p.usd / p.hours)
			if p.spotHours*2 >= p.hours {
				capType = capacity.Spot
			}
		}
		if c, usd, ok := s.smallerClass(it.SuggestedGPUs, a.UsedMemGiB, capType); ok && (it.CurrentUSDH == 0 || usd < it.CurrentUSDH) {
			it.SuggestedClass, it.SuggestedUSDH = c.Name, round4(usd)
			if it.CurrentUSDH > 0 {
				save := a.SpendUSD * (1 - usd/it.CurrentUSDH)
				if elapsed > 0 {
					save *= monthHours / elapsed
				}
				it.SaveUSDPerMonth = round2(save)
			}
			it.Text = fmt.Sprintf("%s's jobs named %s asked for %d GPUs and used %d (peak %.0f of %.0f GiB GPU memory): run them on class %s (%d GPU%s, $%.4f/h against $%.4f/h) and save about $%.2f a month (%d jobs)",
				a.User, a.JobName, a.AskedGPUs, a.UsedGPUs, a.UsedMemGiB, a.AskedMemGiB, c.Name, c.GPUsPerNode, plural(c.GPUsPerNode), usd, it.CurrentUSDH, it.SaveUSDPerMonth, a.Jobs)
		}
		v.Items = append(v.Items, it)
	}
	return v, nil
}

// groupKey names a recurring job: an account's user's jobs of one name.
type groupKey struct{ account, user, name string }

// groupPrice is a group's newest class and what its instances cost, and
// on which capacity.
type groupPrice struct {
	class                 string
	usd, hours, spotHours float64
}

// groupPrices are each group's newest class and its instances' bills (the
// instances launched for its jobs, their charges in the scope: an
// account's own on its own instances).
func groupPrices(jobs []sizerapi.JobUsage, t spend.Tally, sc Scope) map[groupKey]*groupPrice {
	prices := map[groupKey]*groupPrice{}
	for i := range jobs { // newest first
		j := &jobs[i]
		k := groupKey{j.Account, j.User, j.JobName}
		p := prices[k]
		if p == nil {
			p = &groupPrice{class: j.Class}
			prices[k] = p
		}
		l, ok := t.Launched[j.JobID]
		if !ok || !sc.All() && l.Account != sc.Account {
			continue
		}
		usd, secs, spot := l.USD, l.Seconds, l.SpotSeconds
		if !sc.All() {
			usd, secs, spot = l.OwnUSD, l.OwnSeconds, l.OwnSpotSec
		}
		if secs <= 0 {
			continue
		}
		p.usd, p.hours, p.spotHours = p.usd+usd, p.hours+secs/3600, p.spotHours+spot/3600
	}
	return prices
}

// smallerClass is the configured class with the lowest hourly price (of
// its cheapest instance type at that capacity) whose nodes hold gpus GPUs
// and memGiB of GPU memory.
func (s *Source) smallerClass(gpus int, memGiB float64, capType capacity.Type) (sizing.Class, float64, bool) {
	cat := s.o.Policy.Catalog()
	var best sizing.Class
	bestUSD := math.Inf(1)
	for _, c := range s.o.Policy.Classes() {
		if c.GPUsPerNode < gpus {
			continue
		}
		for _, tn := range c.InstanceTypes {
			t, ok := cat.Lookup(tn)
			if !ok || float64(t.TotalGPUMemoryMiB())/1024 < memGiB {
				continue
			}
			cp := capType
			if c.Capacity == capacity.OnDemand {
				cp = capacity.OnDemand
			}
			usd, ok := s.o.Policy.HourlyPrice(tn, cp)
			if ok && usd < bestUSD {
				best, bestUSD = c, usd
			}
		}
	}
	return best, bestUSD, !math.IsInf(bestUSD, 1)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
