package dash

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/burst-hpc/burst/internal/jobmeta"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/budget"
	"github.com/burst-hpc/burst/sizer/store"
)

// This file is the dashboard's one source of money figures. Today it
// prices the store's instance intervals (launch to termination at the
// recorded hourly price, the same rule as the budgets); it is the part to
// re-point at a spend ledger with per-job attribution.

// ForecastWindow is the span whose average spend rate the forecast
// extends to the month's end.
const ForecastWindow = 7 * 24 * time.Hour

// monthInstances are the scope's instances alive this month.
func (s *Source) monthInstances(ctx context.Context, sc Scope, now time.Time) ([]store.Instance, time.Time, error) {
	from := budget.MonthStart(now)
	ins, err := s.o.Store.Instances(ctx, from, now, sc.Account, false)
	return ins, from, err
}

// caps are the budgets the scope may see.
func (s *Source) caps(sc Scope) map[string]float64 {
	if sc.All() {
		return s.o.Budgets
	}
	out := map[string]float64{}
	if c, ok := s.o.Budgets[sc.Account]; ok {
		out[sc.Account] = c
	}
	return out
}

// Money is this month's spend per account against its budget (with a
// forecast), per user and per UTC day, and what it saved against the same
// instances on demand and against the idle-timeout counterfactual.
func (s *Source) Money(ctx context.Context, sc Scope) (sizerapi.MoneyView, error) {
	now := s.o.Now()
	ins, from, err := s.monthInstances(ctx, sc, now)
	if err != nil {
		return sizerapi.MoneyView{}, err
	}
	v := sizerapi.MoneyView{At: now, Account: sc.Account, From: from, Accounts: []sizerapi.AccountMoney{}, Users: []sizerapi.UserMoney{}, Days: []sizerapi.DayMoney{},
		IdleTimeout: s.o.IdleTimeout,
		ForecastMethod: fmt.Sprintf("spent so far + the average hourly spend of the last %s (or of the month, if shorter) x the hours left in the month",
			shortDur(ForecastWindow))}
	ivs := make([]budget.Interval, len(ins))
	for i, in := range ins {
		ivs[i] = in.Interval()
	}
	// per account, against its cap (the budgets' own rule)
	winFrom := now.Add(-ForecastWindow)
	if winFrom.Before(from) {
		winFrom = from
	}
	recent := budget.SpendByAccount(ivs, winFrom, now)
	hourly := map[string]float64{}
	for _, in := range ins {
		if in.Terminated.IsZero() {
			hourly[in.Account] += in.PriceUSD
		}
	}
	monthEnd := from.AddDate(0, 1, 0)
	left := monthEnd.Sub(now).Hours()
	for _, st := range budget.Statuses(s.caps(sc), ivs, now) {
		a := sizerapi.AccountMoney{Account: st.Account, SpentUSD: round4(st.SpentUSD), BudgetUSD: st.MonthlyUSD, RemainingUSD: round4(st.RemainingUSD),
			Over: st.Over, HourlyUSD: round4(hourly[st.Account])}
		rate := 0.0
		if h := now.Sub(winFrom).Hours(); h > 0 {
			rate = recent[st.Account] / h
		}
		a.ForecastUSD = round4(st.SpentUSD + rate*left)
		if st.MonthlyUSD > 0 {
			a.UsedPct = round1(100 * st.SpentUSD / st.MonthlyUSD)
			if !st.Over && rate > 0 {
				at := now.Add(time.Duration((st.MonthlyUSD - st.SpentUSD) / rate * float64(time.Hour)))
				if at.Before(monthEnd) {
					at = at.UTC().Truncate(time.Second)
					a.CapReachedAt = &at
				}
			}
		}
		v.Accounts = append(v.Accounts, a)
	}
	// per user
	type uk struct{ account, user string }
	users := map[uk]*sizerapi.UserMoney{}
	jobs := map[uk]map[string]bool{}
	for _, iv := range ivs {
		k := uk{iv.Account, iv.User}
		u := users[k]
		if u == nil {
			u = &sizerapi.UserMoney{Account: iv.Account, User: iv.User}
			users[k] = u
			jobs[k] = map[string]bool{}
		}
		u.SpentUSD += iv.Cost(from, now)
		if iv.JobID != "" {
			jobs[k][iv.JobID] = true
		}
	}
	for k, u := range users {
		u.SpentUSD = round4(u.SpentUSD)
		u.Jobs = len(jobs[k])
		v.Users = append(v.Users, *u)
	}
	sort.Slice(v.Users, func(i, j int) bool {
		if v.Users[i].SpentUSD != v.Users[j].SpentUSD {
			return v.Users[i].SpentUSD > v.Users[j].SpentUSD
		}
		if v.Users[i].Account != v.Users[j].Account {
			return v.Users[i].Account < v.Users[j].Account
		}
		return v.Users[i].User < v.Users[j].User
	})
	// per UTC day, from the month's first day to today
	for d := from; d.Before(now); d = d.AddDate(0, 0, 1) {
		end := d.AddDate(0, 0, 1)
		if end.After(now) {
			end = now
		}
		day := sizerapi.DayMoney{Day: d.Format("2006-01-02"), ByAccount: map[string]float64{}}
		for _, iv := range ivs {
			if c := iv.Cost(d, end); c > 0 {
				day.ByAccount[iv.Account] += c
				day.SpentUSD += c
			}
		}
		for a, c := range day.ByAccount {
			day.ByAccount[a] = round4(c)
		}
		day.SpentUSD = round4(day.SpentUSD)
		v.Days = append(v.Days, day)
	}
	// savings
	var total, od, idle, hours float64
	for _, in := range ins {
		iv := in.Interval()
		c := iv.Cost(from, now)
		h := 0.0
		if iv.PriceUSD > 0 {
			h = c / iv.PriceUSD
		}
		odp, ok := s.o.Policy.HourlyPrice(in.InstanceType, jobmeta.CapacityOnDemand)
		if !ok {
			odp = in.PriceUSD // unknown to the catalog: no saving claimed
		}
		total += c
		hours += h
		od += odp * h
		// the counterfactual keeps the same instance on demand for its
		// life plus the idle timeout after it (the demo's comparison)
		tail := 0.0
		if !in.Terminated.IsZero() && in.Terminated.Before(now) {
			tail = s.o.IdleTimeout.Hours()
		}
		idle += odp * (h + tail)
	}
	v.Instances = len(ins)
	v.InstanceHours = round4(hours)
	v.TotalUSD = round4(total)
	v.OnDemandUSD = round4(od)
	v.SavedVsOnDemandUSD = round4(od - total)
	v.IdleTimeoutUSD = round4(idle)
	v.SavedVsIdleUSD = round4(idle - total)
	if od > 0 {
		v.SavedVsOnDemandPct = round1(100 * (od - total) / od)
	}
	if idle > 0 {
		v.SavedVsIdlePct = round1(100 * (idle - total) / idle)
	}
	return v, nil
}

func shortDur(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
	}
	return d.String()
}
