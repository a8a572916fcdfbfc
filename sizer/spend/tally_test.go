package spend_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/dash/dashtest"
	"github.com/burst-hpc/burst/sizer/spend"
	"github.com/burst-hpc/burst/sizer/store"
	"github.com/burst-hpc/burst/sizer/store/storetest"
)

// tallyRef is a Tally's figures worked out from a fresh read of the store,
// every row's charges computed again at now.
type tallyRef struct {
	accounts map[string]spend.AccountTally
	all      spend.InstanceTally
	users    map[spend.UserKey]spend.UserTally
	jobs     map[spend.AccountJob]float64
	launched map[string]spend.Launched
	rows     []store.Row
}

func readTallyRef(t *testing.T, st *store.Store, owner string, now time.Time) tallyRef {
	ref := readReference(t, st, owner, now)
	from := billing.MonthStart(now)
	out := tallyRef{accounts: map[string]spend.AccountTally{}, users: map[spend.UserKey]spend.UserTally{}, jobs: map[spend.AccountJob]float64{},
		launched: map[string]spend.Launched{}, rows: ref.rows}
	userJobs := map[spend.UserKey]map[string]bool{}
	for _, r := range ref.rows {
		cs := r.Charges(from, from.AddDate(0, 1, 0), now, owner)
		ended := !r.End.IsZero() && r.End.Before(now)
		charged := map[string]bool{}
		for _, c := range cs {
			a := out.accounts[c.Account]
			a.USD += c.USD
			a.OnDemandUSD += c.OnDemandUSD
			a.Seconds += c.Seconds
			a.InstanceOnDemandUSD += r.OnDemandUSD * c.Seconds / 3600
			if !charged[c.Account] {
				charged[c.Account] = true
				a.Instances++
				if ended {
					a.EndedOnDemandUSD += r.OnDemandUSD
				}
			}
			out.accounts[c.Account] = a
			uk := spend.UserKey{Account: c.Account, User: c.User}
			u := out.users[uk]
			u.USD += c.USD
			out.users[uk] = u
			if c.JobID != "" {
				if userJobs[uk] == nil {
					userJobs[uk] = map[string]bool{}
				}
				userJobs[uk][c.JobID] = true
				out.jobs[spend.AccountJob{Account: c.Account, Cluster: r.Cluster, JobID: c.JobID}] += c.USD
			}
			l := out.launched[r.JobID]
			l.Account = r.Account
			spot := 0.0
			if r.Capacity == "spot" {
				spot = c.Seconds
			}
			l.USD, l.Seconds, l.SpotSeconds = l.USD+c.USD, l.Seconds+c.Seconds, l.SpotSeconds+spot
			if c.Account == r.Account {
				l.OwnUSD, l.OwnSeconds, l.OwnSpotSec = l.OwnUSD+c.USD, l.OwnSeconds+c.Seconds, l.OwnSpotSec+spot
			}
			out.launched[r.JobID] = l
		}
		if len(cs) > 0 {
			out.all.Instances++
			if ended {
				out.all.EndedOnDemandUSD += r.OnDemandUSD
			}
		}
	}
	for uk, js := range userJobs {
		u := out.users[uk]
		u.Jobs = len(js)
		out.users[uk] = u
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6 }

// tallyWindows are every day of the month to now, the last 6 hours and a
// window starting and ending inside days (the forecast's).
func tallyWindows(now time.Time) []spend.Window {
	var ws []spend.Window
	for d := billing.MonthStart(now); d.Before(now); d = d.AddDate(0, 0, 1) {
		ws = append(ws, spend.Window{From: d, To: billing.Earlier(d.AddDate(0, 0, 1), now)})
	}
	return append(ws, spend.Window{From: now.Add(-6 * time.Hour), To: now}, spend.Window{From: now.Add(-7*24*time.Hour + 17*time.Minute), To: now.Truncate(time.Minute)})
}

func compareTally(t *testing.T, r *spend.Reader, st *store.Store, owner string, now time.Time) {
	t.Helper()
	ws := tallyWindows(now)
	tl, err := r.Tally(context.Background(), owner, now, spend.TallyOptions{Windows: ws, Jobs: true})
	if err != nil {
		t.Fatal(err)
	}
	ref := readTallyRef(t, st, owner, now)
	at := now.Format(time.TimeOnly)
	for a, w := range ref.accounts {
		g := tl.Accounts[a]
		if !near(g.USD, w.USD) || !near(g.OnDemandUSD, w.OnDemandUSD) || !near(g.Seconds, w.Seconds) || !near(g.InstanceOnDemandUSD, w.InstanceOnDemandUSD) ||
			g.Instances != w.Instances || !near(g.EndedOnDemandUSD, w.EndedOnDemandUSD) {
			t.Errorf("at %s account %s: %+v, a fresh read %+v", at, a, g, w)
		}
	}
	if len(tl.Accounts) != len(ref.accounts) {
		t.Errorf("at %s: %d accounts, a fresh read %d", at, len(tl.Accounts), len(ref.accounts))
	}
	if tl.All.Instances != ref.all.Instances || !near(tl.All.EndedOnDemandUSD, ref.all.EndedOnDemandUSD) {
		t.Errorf("at %s all: %+v, a fresh read %+v", at, tl.All, ref.all)
	}
	for u, w := range ref.users {
		if g := tl.Users[u]; !near(g.USD, w.USD) || g.Jobs != w.Jobs {
			t.Errorf("at %s user %v: %+v, a fresh read %+v", at, u, g, w)
		}
	}
	if len(tl.Users) != len(ref.users) {
		t.Errorf("at %s: %d users, a fresh read %d", at, len(tl.Users), len(ref.users))
	}
	for k, w := range ref.jobs {
		if !near(tl.Jobs[k], w) {
			t.Errorf("at %s job %v: %.6f, a fresh read %.6f", at, k, tl.Jobs[k], w)
		}
	}
	if len(tl.Jobs) != len(ref.jobs) {
		t.Errorf("at %s: %d jobs, a fresh read %d", at, len(tl.Jobs), len(ref.jobs))
	}
	for k, w := range ref.launched {
		g := tl.Launched[k]
		if g.Account != w.Account || !near(g.USD, w.USD) || !near(g.Seconds, w.Seconds) || !near(g.SpotSeconds, w.SpotSeconds) ||
			!near(g.OwnUSD, w.OwnUSD) || !near(g.OwnSeconds, w.OwnSeconds) || !near(g.OwnSpotSec, w.OwnSpotSec) {
			t.Errorf("at %s instances launched for job %q: %+v, a fresh read %+v", at, k, g, w)
		}
	}
	sameMap(t, "burn", tl.Burn, readReference(t, st, owner, now).burn)
	fresh, err := spend.ReadPriced(context.Background(), st, owner, now, func(string) (float64, bool) { return odPrice, true })
	if err != nil {
		t.Fatal(err)
	}
	bo := spend.BudgetOptions{Caps: map[string]float64{"nlp": 50, "vision": 1e6}, IdleOwner: owner}
	got, want := tl.Budgets(bo), fresh.Budgets(bo)
	if len(got) != len(want) {
		t.Fatalf("at %s budgets %+v, a fresh read's %+v", at, got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Account != w.Account || !near(g.SpentUSD, w.SpentUSD) || !near(g.RemainingUSD, w.RemainingUSD) || g.Over != w.Over || !near(g.BurnUSDPerHour, w.BurnUSDPerHour) ||
			(g.ForecastCapAt == nil) != (w.ForecastCapAt == nil) || g.ForecastCapAt != nil && g.ForecastCapAt.Sub(*w.ForecastCapAt).Abs() > time.Second {
			t.Errorf("at %s budget %+v, a fresh read's %+v", at, g, w)
		}
	}
	for _, a := range []string{"nlp", "vision", "nobody"} {
		g, w := tl.Spend(a), fresh.Spend(a)
		if g.Account != w.Account || !near(g.SpentUSD, w.SpentUSD) || !near(g.BurnUSDPerHour, w.BurnUSDPerHour) || !g.AsOf.Equal(w.AsOf) {
			t.Errorf("at %s spend of %s %+v, a fresh read's %+v", at, a, g, w)
		}
		sameMap(t, "spend of "+a+" by job", g.Jobs, w.Jobs)
	}
	for i, w := range ws {
		sameMap(t, "window "+w.From.Format(time.DateTime)+" to "+w.To.Format(time.DateTime), tl.Windows[i], within(ref.rows, w.From, w.To, now, owner))
	}
}

// TestTallyMatchesFreshReads: every figure of the Reader's tallies (the
// kept sums by day, the open instances priced at each read) equals a
// fresh read of the store, as burst writes to the ledger between reads,
// at moving times, on both drivers; a read with nothing changed prices
// only the open instances and the rows of the windows' part days (not the
// month), and a read at a time before some of the ledger's rows is made
// from the whole month, still equal.
func TestTallyMatchesFreshReads(t *testing.T) {
	for _, driver := range []string{store.DriverSQLite, store.DriverPostgres} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			st := storetest.Open(t, driver)
			now := time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC)
			if _, err := dashtest.Fill(ctx, st, dashtest.Spec{Jobs: 300, Now: now, Live: 8, Waits: true, Nodes: 30}); err != nil {
				t.Fatal(err)
			}
			for _, owner := range []string{billing.OwnerLaunchingJob, billing.OwnerPool} {
				r := spend.NewReader(st, func(string) (float64, bool) { return odPrice, true })
				compareTally(t, r, st, owner, now)
				rng := rand.New(rand.NewPCG(11, uint64(len(owner))))
				live := []string{}
				for step := range 10 {
					now = now.Add(time.Duration(1+rng.IntN(20)) * time.Minute)
					writeSome(t, st, rng, now, step, &live)
					compareTally(t, r, st, owner, now)
					before := spend.WorkOf(r)
					compareTally(t, r, st, owner, now) // unchanged: the kept sums
					w := spend.WorkOf(r)
					if w.Fallbacks != 0 {
						t.Fatalf("at %s: %d tallies made from the whole month; want none", now, w.Fallbacks)
					}
					if priced := w.Priced - before.Priced; priced*3 > len(readReference(t, st, owner, now).rows) {
						t.Errorf("at %s a tally with nothing changed priced %d rows; want a few (the open ones, the windows' part days)", now, priced)
					}
				}
				// a read before the ledger's last launch: from the whole
				// month, still equal
				var last time.Time
				for _, row := range readReference(t, st, owner, now).rows {
					last = billing.Later(last, row.Launched)
				}
				compareTally(t, r, st, owner, last.Add(-time.Second))
				if w := spend.WorkOf(r); w.Fallbacks != 1 {
					t.Errorf("a read before the ledger's last rows: %d tallies from the whole month, want 1", w.Fallbacks)
				}
			}
		})
	}
}
