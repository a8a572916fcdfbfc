package dash

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/dash/dashtest"
	"github.com/burst-hpc/burst/sizer/spend"
	"github.com/burst-hpc/burst/sizer/store"
)

// moneyReference is the Money view computed the way the dashboard did
// before it read the Reader's tally: a fresh read of the month, every
// day's charges from every instance (Month.Within), the users, the
// savings, from the month's charges.
func moneyReference(s *Source, m spend.Month, sc Scope, now time.Time) sizerapi.MoneyView {
	from := m.From
	v := sizerapi.MoneyView{Accounts: []sizerapi.AccountMoney{}, Users: []sizerapi.UserMoney{}}
	var charges []billing.Charge
	for _, c := range m.Charges {
		if sc.All() || c.Account == sc.Account {
			charges = append(charges, c)
		}
	}
	fnow := now.Truncate(time.Minute)
	winFrom := billing.Later(fnow.Add(-ForecastWindow), from)
	recent, upToF := m.Within(winFrom, fnow), m.Within(from, fnow)
	monthEnd := from.AddDate(0, 1, 0)
	for _, st := range s.budgets(m, sc) {
		a := sizerapi.AccountMoney{Account: st.Account, SpentUSD: round4(st.SpentUSD), BudgetUSD: st.MonthlyUSD, RemainingUSD: round4(st.RemainingUSD),
			Over: st.Over, HourlyUSD: round4(m.Burn[st.Account])}
		rate := recent[st.Account] / fnow.Sub(winFrom).Hours()
		a.ForecastUSD = round4(upToF[st.Account] + rate*monthEnd.Sub(fnow).Hours())
		if st.MonthlyUSD > 0 {
			a.UsedPct = round1(100 * st.SpentUSD / st.MonthlyUSD)
		}
		v.Accounts = append(v.Accounts, a)
	}
	type uk struct{ a, u string }
	users, jobs := map[uk]float64{}, map[uk]map[string]bool{}
	for _, c := range charges {
		k := uk{c.Account, c.User}
		users[k] += c.USD
		if jobs[k] == nil {
			jobs[k] = map[string]bool{}
		}
		if c.JobID != "" {
			jobs[k][c.JobID] = true
		}
	}
	for k, usd := range users {
		v.Users = append(v.Users, sizerapi.UserMoney{Account: k.a, User: k.u, SpentUSD: round4(usd), Jobs: len(jobs[k])})
	}
	for d := from; d.Before(now); d = d.AddDate(0, 0, 1) {
		day := sizerapi.DayMoney{Day: d.Format("2006-01-02"), ByAccount: map[string]float64{}}
		for a, c := range m.Within(d, billing.Earlier(d.AddDate(0, 0, 1), now)) {
			if c > 0 && (sc.All() || a == sc.Account) {
				day.ByAccount[a] = round4(c)
				day.SpentUSD += c
			}
		}
		day.SpentUSD = round4(day.SpentUSD)
		v.Days = append(v.Days, day)
	}
	type pi struct{ usd, od, secs float64 }
	byInst := map[string]*pi{}
	for _, c := range charges {
		p := byInst[c.InstanceID]
		if p == nil {
			p = &pi{}
			byInst[c.InstanceID] = p
		}
		p.usd, p.od, p.secs = p.usd+c.USD, p.od+c.OnDemandUSD, p.secs+c.Seconds
	}
	var total, od, idle, hours float64
	for _, r := range m.Rows {
		p := byInst[r.ID]
		if p == nil {
			continue
		}
		v.Instances++
		h := p.secs / 3600
		total, hours, od = total+p.usd, hours+h, od+p.od
		tail := 0.0
		if !r.End.IsZero() && r.End.Before(now) {
			tail = s.o.IdleTimeout.Hours()
		}
		idle += r.OnDemandUSD * (h + tail)
	}
	v.InstanceHours, v.TotalUSD, v.OnDemandUSD, v.IdleTimeoutUSD = round4(hours), round4(total), round4(od), round4(idle)
	return v
}

// sameMoney compares the figures (a rounding apart: the sums are added
// in another order).
func sameMoney(t *testing.T, what string, got, want sizerapi.MoneyView) {
	t.Helper()
	close := func(a, b float64) bool { return math.Abs(a-b) <= 1.5e-4 }
	if len(got.Accounts) != len(want.Accounts) {
		t.Fatalf("%s: accounts %+v, a fresh read's %+v", what, got.Accounts, want.Accounts)
	}
	for i, w := range want.Accounts {
		g := got.Accounts[i]
		if g.Account != w.Account || !close(g.SpentUSD, w.SpentUSD) || !close(g.RemainingUSD, w.RemainingUSD) || g.Over != w.Over || !close(g.HourlyUSD, w.HourlyUSD) ||
			!close(g.ForecastUSD, w.ForecastUSD) || math.Abs(g.UsedPct-w.UsedPct) > 0.11 {
			t.Errorf("%s: account %+v, a fresh read's %+v", what, g, w)
		}
	}
	users := map[string]sizerapi.UserMoney{}
	for _, u := range want.Users {
		users[u.Account+"/"+u.User] = u
	}
	if len(got.Users) != len(want.Users) {
		t.Errorf("%s: %d users, a fresh read %d", what, len(got.Users), len(want.Users))
	}
	for _, g := range got.Users {
		if w := users[g.Account+"/"+g.User]; !close(g.SpentUSD, w.SpentUSD) || g.Jobs != w.Jobs {
			t.Errorf("%s: user %+v, a fresh read's %+v", what, g, w)
		}
	}
	if !sort.SliceIsSorted(got.Users, func(i, j int) bool { return got.Users[i].SpentUSD > got.Users[j].SpentUSD }) {
		t.Errorf("%s: users not largest first", what)
	}
	if len(got.Days) != len(want.Days) {
		t.Fatalf("%s: %d days, a fresh read %d", what, len(got.Days), len(want.Days))
	}
	for i, w := range want.Days {
		g := got.Days[i]
		if g.Day != w.Day || !close(g.SpentUSD, w.SpentUSD) || len(g.ByAccount) != len(w.ByAccount) {
			t.Errorf("%s: day %+v, a fresh read's %+v", what, g, w)
		}
		for a, x := range w.ByAccount {
			if !close(g.ByAccount[a], x) {
				t.Errorf("%s: day %s account %s %.4f, a fresh read %.4f", what, w.Day, a, g.ByAccount[a], x)
			}
		}
	}
	if got.Instances != want.Instances || !close(got.InstanceHours, want.InstanceHours) || !close(got.TotalUSD, want.TotalUSD) || !close(got.OnDemandUSD, want.OnDemandUSD) ||
		!close(got.IdleTimeoutUSD, want.IdleTimeoutUSD) {
		t.Errorf("%s: instances %d, %.4f h, $%.4f, on demand $%.4f, idle-timeout $%.4f; a fresh read %d, %.4f h, $%.4f, $%.4f, $%.4f", what,
			got.Instances, got.InstanceHours, got.TotalUSD, got.OnDemandUSD, got.IdleTimeoutUSD, want.Instances, want.InstanceHours, want.TotalUSD, want.OnDemandUSD, want.IdleTimeoutUSD)
	}
}

// TestMoneyMatchesFreshReads: the Money view, from the Reader's tally,
// equals the view computed from a fresh read of the month (every day from
// every instance), for the admin and an account, with both owners, as the
// ledger changes (instances launched, ended, a job run on a reused node).
func TestMoneyMatchesFreshReads(t *testing.T) {
	ctx := context.Background()
	st, pol, clock, od := filledMonth(t)
	for _, owner := range []string{billing.OwnerLaunchingJob, billing.OwnerPool} {
		src, err := New(Options{Store: st, Policy: pol, Budgets: map[string]float64{"nlp": 300, "vision": 25}, IdleOwner: owner, Now: func() time.Time { return clock }})
		if err != nil {
			t.Fatal(err)
		}
		for step := range 4 {
			for _, sc := range []Scope{{}, {Account: "nlp"}} {
				got, err := src.Money(ctx, sc)
				if err != nil {
					t.Fatal(err)
				}
				m, err := spend.ReadPriced(ctx, st, owner, clock, od)
				if err != nil {
					t.Fatal(err)
				}
				sameMoney(t, fmt.Sprintf("%s, step %d, scope %q", owner, step, sc.Account), got, moneyReference(src, m, sc, clock))
			}
			// the ledger moves on: a launch with a run, an end
			clock = clock.Add(7 * time.Minute)
			id := fmt.Sprintf("i-m%s%d", owner[:1], step)
			job := &sizerapi.Job{JobID: fmt.Sprint(70000 + step), JobName: "m", User: "nlp-u1", Account: "nlp", Class: "l4", GPUsPerNode: 1, Nodes: 1}
			if err := st.RecordLaunch(ctx, sizerapi.InstanceEvent{InstanceID: id, Node: "l4-1", InstanceType: "g6.xlarge", Capacity: "spot", Account: "nlp", Time: clock.Add(-5 * time.Minute), Job: job}, 0.5); err != nil {
				t.Fatal(err)
			}
			if err := st.RecordRun(ctx, sizerapi.JobRun{JobID: job.JobID, Account: "nlp", User: "nlp-u1", Nodes: []string{"l4-1"}, GPUsPerNode: 1, Start: clock.Add(-4 * time.Minute)}); err != nil {
				t.Fatal(err)
			}
			if step > 0 {
				if _, err := st.RecordTerminate(ctx, fmt.Sprintf("i-m%s%d", owner[:1], step-1), clock.Add(-time.Minute)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// filledMonth is a SQLite store holding 250 jobs of the month up to clock
// (dashtest), the policy of dashtest's classes and its on-demand prices:
// what the fresh-read tests of Money and Right-sizing start from.
func filledMonth(t *testing.T) (st *store.Store, pol *sizing.Policy, clock time.Time, od func(string) (float64, bool)) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock = time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC)
	if _, err := dashtest.Fill(ctx, st, dashtest.Spec{Jobs: 250, Now: clock, Live: 6, Waits: true, Nodes: 25}); err != nil {
		t.Fatal(err)
	}
	if pol, err = sizing.New(catalog.Default(), "us-east-1", dashtest.Classes(), sizing.Params{}); err != nil {
		t.Fatal(err)
	}
	return st, pol, clock, func(typ string) (float64, bool) { return pol.HourlyPrice(typ, capacity.OnDemand) }
}
