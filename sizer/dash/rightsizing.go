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
// month at this month's pace.
func (s *Source) RightSizing(ctx context.Context, sc Scope) (sizerapi.RightSizingView, error) {
	now := s.o.Now()
	rep, jobs, ins, err := s.report(ctx, sc)
	if err != nil {
		return sizerapi.RightSizingView{}, err
	}
	m, err := s.month(ctx, now)
	if err != nil {
		return sizerapi.RightSizingView{}, err
	}
	v := sizerapi.RightSizingView{At: now, Account: sc.Account, From: rep.From, UsedFraction: 0.5, Items: []sizerapi.RightSizingItem{}}
	latestClass, prices := groupPrices(jobs, ins, scoped(m.Charges, sc))
	// the month so far as of the last whole minute: every reader within a
	// minute gets the same monthly extrapolation (see Money's forecast)
	fnow := now.Truncate(time.Minute)
	if !fnow.After(rep.From) {
		fnow = now
	}
	elapsed := fnow.Sub(rep.From).Hours()
	monthHours := rep.From.AddDate(0, 1, 0).Sub(rep.From).Hours()
	for _, a := range rep.Advice {
		k := adviceGroup{a.Account, a.User, a.JobName}
		it := sizerapi.RightSizingItem{Advice: a, Class: latestClass[k], SuggestedGPUs: max(a.UsedGPUs, 1)}
		p := prices[k]
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

// adviceGroup is a user's jobs of one name in an account: what advice is
// given for.
type adviceGroup struct{ account, user, name string }

// groupPrice is what a group's instances were billed this month, and for
// how many hours (on spot).
type groupPrice struct{ usd, hours, spotHours float64 }

// groupPrices is each group's latest class (jobs come newest first) and
// what its instances cost per hour, and on which capacity.
func groupPrices(jobs []sizerapi.JobUsage, ins []store.Instance, charges []billing.Charge) (map[adviceGroup]string, map[adviceGroup]*groupPrice) {
	billed := map[string][2]float64{} // instance -> USD, billed hours this month
	for _, c := range charges {
		b := billed[c.InstanceID]
		billed[c.InstanceID] = [2]float64{b[0] + c.USD, b[1] + c.Seconds/3600}
	}
	latestClass := map[adviceGroup]string{}
	jobGroup := map[string]adviceGroup{}
	for _, j := range jobs { // newest first
		k := adviceGroup{j.Account, j.User, j.JobName}
		if _, ok := latestClass[k]; !ok {
			latestClass[k] = j.Class
		}
		jobGroup[j.JobID] = k
	}
	prices := map[adviceGroup]*groupPrice{}
	for _, in := range ins {
		k, ok := jobGroup[in.JobID]
		if !ok {
			continue
		}
		p := prices[k]
		if p == nil {
			p = &groupPrice{}
			prices[k] = p
		}
		if b := billed[in.InstanceID]; b[1] > 0 {
			h := b[1]
			p.usd += b[0]
			p.hours += h
			if in.Capacity == string(capacity.Spot) {
				p.spotHours += h
			}
		}
	}
	return latestClass, prices
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
