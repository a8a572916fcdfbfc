package dash

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/spend"
	"github.com/burst-hpc/burst/sizer/store"
)

// This file is the dashboard's one source of money figures: the spend
// ledger (sizer/spend), the same charges the budgets API, the report and
// admission control read: what EC2 bills each instance, split between the
// jobs that ran on it and its idle owner (accounting.idle_owner).

// ForecastWindow is the span whose average spend rate the forecast
// extends to the month's end.
const ForecastWindow = 7 * 24 * time.Hour

// monthInstances are the scope's instances alive this month.
func (s *Source) monthInstances(ctx context.Context, sc Scope, now time.Time) ([]store.Instance, time.Time, error) {
	from := billing.MonthStart(now)
	ins, err := s.o.Store.Instances(ctx, from, now, sc.Account, false)
	return ins, from, err
}

// month is the ledger's month, on-demand prices from the policy's catalog
// where the ledger has none.
func (s *Source) month(ctx context.Context, now time.Time) (spend.Month, error) {
	return s.o.Spend.Month(ctx, s.o.IdleOwner, now)
}

// scoped keeps the charges the scope may see.
func scoped(cs []billing.Charge, sc Scope) []billing.Charge {
	if sc.All() {
		return cs
	}
	var out []billing.Charge
	for _, c := range cs {
		if c.Account == sc.Account {
			out = append(out, c)
		}
	}
	return out
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

// budgets is the standing of the accounts the scope may see.
func (s *Source) budgets(m spend.Month, sc Scope) []sizerapi.BudgetStatus {
	var out []sizerapi.BudgetStatus
	for _, b := range m.Budgets(spend.BudgetOptions{Caps: s.caps(sc), OnUnknown: s.o.OnUnknown, IdleOwner: s.o.IdleOwner, StateDir: s.o.StateDir, Cluster: s.o.Cluster}.On(s.o.Store)) {
		if sc.All() || b.Account == sc.Account {
			out = append(out, b)
		}
	}
	return out
}

// Money is this month's spend per account against its budget (with a
// forecast), per user and per UTC day, and what it saved against the same
// instances on demand and against the idle-timeout counterfactual.
func (s *Source) Money(ctx context.Context, sc Scope) (sizerapi.MoneyView, error) {
	now := s.o.Now()
	m, err := s.month(ctx, now)
	if err != nil {
		return sizerapi.MoneyView{}, err
	}
	from := m.From
	v := sizerapi.MoneyView{At: now, Account: sc.Account, From: from, Accounts: []sizerapi.AccountMoney{}, Users: []sizerapi.UserMoney{}, Days: []sizerapi.DayMoney{},
		IdleTimeout: s.o.IdleTimeout,
		ForecastMethod: fmt.Sprintf("spent so far + the average hourly spend of the last %s (or of the month, if shorter) x the hours left in the month",
			shortDur(ForecastWindow))}
	charges := scoped(m.Charges, sc)
	v.Accounts = s.moneyAccounts(m, sc, now)
	v.Users = moneyUsers(charges)
	v.Days = moneyDays(m, sc, now)
	s.savings(&v, m, charges, now)
	if v.Reservations, err = s.reservationMoney(ctx, sc, m); err != nil {
		return sizerapi.MoneyView{}, err
	}
	return v, nil
}

// moneyAccounts is each account's spend against its cap (the budgets' own
// figures), with its forecast for the month.
func (s *Source) moneyAccounts(m spend.Month, sc Scope, now time.Time) []sizerapi.AccountMoney {
	from := m.From
	out := []sizerapi.AccountMoney{}
	// The forecast extrapolates from the last whole minute, so that every
	// reader within a minute (the page, the API, a script) gets the same
	// forecast instead of one that moves with each second of the window.
	fnow := now.Truncate(time.Minute)
	if fnow.Before(from) {
		fnow = now
	}
	winFrom := fnow.Add(-ForecastWindow)
	if winFrom.Before(from) {
		winFrom = from
	}
	recent := m.Within(winFrom, fnow)
	upToF := m.Within(from, fnow)
	monthEnd := from.AddDate(0, 1, 0)
	left := monthEnd.Sub(fnow).Hours()
	for _, st := range s.budgets(m, sc) {
		a := sizerapi.AccountMoney{Account: st.Account, SpentUSD: round4(st.SpentUSD), BudgetUSD: st.MonthlyUSD, RemainingUSD: round4(st.RemainingUSD),
			Over: st.Over, HourlyUSD: round4(m.Burn[st.Account])}
		rate := 0.0
		if h := fnow.Sub(winFrom).Hours(); h > 0 {
			rate = recent[st.Account] / h
		}
		a.ForecastUSD = round4(upToF[st.Account] + rate*left)
		if st.MonthlyUSD > 0 {
			a.UsedPct = round1(100 * st.SpentUSD / st.MonthlyUSD)
			if !st.Over && rate > 0 {
				at := fnow.Add(time.Duration((st.MonthlyUSD - upToF[st.Account]) / rate * float64(time.Hour)))
				if at.Before(monthEnd) {
					at = at.UTC().Truncate(time.Second)
					a.CapReachedAt = &at
				}
			}
		}
		out = append(out, a)
	}
	return out
}

// moneyUsers is each user's spend and jobs, the largest spend first.
func moneyUsers(charges []billing.Charge) []sizerapi.UserMoney {
	out := []sizerapi.UserMoney{}
	type uk struct{ account, user string }
	users := map[uk]*sizerapi.UserMoney{}
	jobs := map[uk]map[string]bool{}
	for _, c := range charges {
		k := uk{c.Account, c.User}
		u := users[k]
		if u == nil {
			u = &sizerapi.UserMoney{Account: c.Account, User: c.User}
			users[k] = u
			jobs[k] = map[string]bool{}
		}
		u.SpentUSD += c.USD
		if c.JobID != "" {
			jobs[k][c.JobID] = true
		}
	}
	for k, u := range users {
		u.SpentUSD = round4(u.SpentUSD)
		u.Jobs = len(jobs[k])
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].SpentUSD != out[j].SpentUSD {
			return out[i].SpentUSD > out[j].SpentUSD
		}
		if out[i].Account != out[j].Account {
			return out[i].Account < out[j].Account
		}
		return out[i].User < out[j].User
	})
	return out
}

// moneyDays is each UTC day's spend, from the month's first day to today.
func moneyDays(m spend.Month, sc Scope, now time.Time) []sizerapi.DayMoney {
	out := []sizerapi.DayMoney{}
	for d := m.From; d.Before(now); d = d.AddDate(0, 0, 1) {
		end := d.AddDate(0, 0, 1)
		if end.After(now) {
			end = now
		}
		day := sizerapi.DayMoney{Day: d.Format("2006-01-02"), ByAccount: map[string]float64{}}
		for a, c := range m.Within(d, end) {
			if c > 0 && (sc.All() || a == sc.Account) {
				day.ByAccount[a] = round4(c)
				day.SpentUSD += c
			}
		}
		day.SpentUSD = round4(day.SpentUSD)
		out = append(out, day)
	}
	return out
}

// savings sets the view's instance figures and what they saved: the same
// billed seconds on demand, and the idle-timeout counterfactual (each
// instance on demand for its life plus the idle timeout after it).
func (s *Source) savings(v *sizerapi.MoneyView, m spend.Month, charges []billing.Charge, now time.Time) {
	type perInstance struct{ usd, od, secs float64 }
	byInst := map[string]*perInstance{}
	for _, c := range charges {
		p := byInst[c.InstanceID]
		if p == nil {
			p = &perInstance{}
			byInst[c.InstanceID] = p
		}
		p.usd += c.USD
		p.od += c.OnDemandUSD
		p.secs += c.Seconds
	}
	var total, od, idle, hours float64
	for _, r := range m.Rows {
		p := byInst[r.ID]
		if p == nil {
			continue
		}
		v.Instances++
		h := p.secs / 3600
		total += p.usd
		hours += h
		od += p.od
		tail := 0.0
		if !r.End.IsZero() && r.End.Before(now) {
			tail = s.o.IdleTimeout.Hours()
		}
		idle += r.OnDemandUSD * (h + tail)
	}
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
}

func shortDur(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
	}
	return d.String()
}
