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

// budgeted is a month's figures (spend.Month, spend.Tally) that give the
// budgets' standing.
type budgeted interface {
	Budgets(spend.BudgetOptions) []sizerapi.BudgetStatus
}

// budgets is the standing of the accounts the scope may see.
func (s *Source) budgets(m budgeted, sc Scope) []sizerapi.BudgetStatus {
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
// instances on demand and against the idle-timeout counterfactual. Its
// figures come from the Reader's tally (spend.Tally): sums kept by day,
// the running instances priced at now.
func (s *Source) Money(ctx context.Context, sc Scope) (sizerapi.MoneyView, error) {
	now := s.o.Now()
	from := billing.MonthStart(now)
	// the forecast extrapolates from the last whole minute, so that every
	// reader within a minute (the page, the API, a script) gets the same
	// forecast instead of one that moves with each second of the window
	fnow := now.Truncate(time.Minute)
	if fnow.Before(from) {
		fnow = now
	}
	winFrom := billing.Later(fnow.Add(-ForecastWindow), from)
	days := dayWindows(from, now)
	t, err := s.o.Spend.Tally(ctx, s.o.IdleOwner, now, spend.TallyOptions{Windows: append(days, spend.Window{From: winFrom, To: fnow}, spend.Window{From: from, To: fnow})})
	if err != nil {
		return sizerapi.MoneyView{}, err
	}
	v := sizerapi.MoneyView{At: now, Account: sc.Account, From: from, Accounts: []sizerapi.AccountMoney{}, Users: []sizerapi.UserMoney{}, Days: []sizerapi.DayMoney{},
		IdleTimeout: s.o.IdleTimeout,
		ForecastMethod: fmt.Sprintf("spent so far + the average hourly spend of the last %s (or of the month, if shorter) x the hours left in the month",
			shortDur(ForecastWindow))}
	recent, upToF := t.Windows[len(days)], t.Windows[len(days)+1]
	v.Accounts = s.accountMoney(t, sc, fnow, winFrom, recent, upToF)
	v.Users = userMoney(t, sc)
	for i, w := range days {
		day := sizerapi.DayMoney{Day: w.From.Format("2006-01-02"), ByAccount: map[string]float64{}}
		for a, c := range t.Windows[i] {
			if c > 0 && (sc.All() || a == sc.Account) {
				day.ByAccount[a] = round4(c)
				day.SpentUSD += c
			}
		}
		day.SpentUSD = round4(day.SpentUSD)
		v.Days = append(v.Days, day)
	}
	s.savings(&v, t, sc)
	if v.Reservations, err = s.reservationMoney(ctx, sc, t); err != nil {
		return sizerapi.MoneyView{}, err
	}
	return v, nil
}

// dayWindows are the UTC days from the month's first to now's, the last
// up to now.
func dayWindows(from, now time.Time) []spend.Window {
	var out []spend.Window
	for d := from; d.Before(now); d = d.AddDate(0, 0, 1) {
		out = append(out, spend.Window{From: d, To: billing.Earlier(d.AddDate(0, 0, 1), now)})
	}
	return out
}

// accountMoney is each account's spend against its cap (the budgets' own
// figures) with the forecast: what was spent by fnow plus the average rate
// since winFrom (recent) over the hours left.
func (s *Source) accountMoney(t spend.Tally, sc Scope, fnow, winFrom time.Time, recent, upToF map[string]float64) []sizerapi.AccountMoney {
	out := []sizerapi.AccountMoney{}
	monthEnd := t.From.AddDate(0, 1, 0)
	left := monthEnd.Sub(fnow).Hours()
	for _, st := range s.budgets(t, sc) {
		a := sizerapi.AccountMoney{Account: st.Account, SpentUSD: round4(st.SpentUSD), BudgetUSD: st.MonthlyUSD, RemainingUSD: round4(st.RemainingUSD),
			Over: st.Over, HourlyUSD: round4(t.Burn[st.Account])}
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

// userMoney is each user's spend and jobs in the scope, the largest first.
func userMoney(t spend.Tally, sc Scope) []sizerapi.UserMoney {
	out := []sizerapi.UserMoney{}
	for k, u := range t.Users {
		if sc.All() || k.Account == sc.Account {
			out = append(out, sizerapi.UserMoney{Account: k.Account, User: k.User, SpentUSD: round4(u.USD), Jobs: u.Jobs})
		}
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

// savings are the same billed seconds on demand, and the idle-timeout
// counterfactual (each instance on demand for the time charged plus the
// idle timeout after it, once it ended).
func (s *Source) savings(v *sizerapi.MoneyView, t spend.Tally, sc Scope) {
	var sum spend.AccountTally
	for a, x := range t.Accounts {
		if sc.All() || a == sc.Account {
			sum.USD += x.USD
			sum.OnDemandUSD += x.OnDemandUSD
			sum.Seconds += x.Seconds
			sum.InstanceOnDemandUSD += x.InstanceOnDemandUSD
			sum.InstanceTally = x.InstanceTally
		}
	}
	if sc.All() {
		sum.InstanceTally = t.All
	}
	total, od := sum.USD, sum.OnDemandUSD
	idle := sum.InstanceOnDemandUSD + sum.EndedOnDemandUSD*s.o.IdleTimeout.Hours()
	v.Instances = sum.Instances
	v.InstanceHours = round4(sum.Seconds / 3600)
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
