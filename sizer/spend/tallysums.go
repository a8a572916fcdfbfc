package spend

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/store"
)

// sums are the kept part of a Reader's tallies: the closed rows' charges
// summed by the day each row was launched (a bucket) and by the day each
// charge falls on, each recomputed when a change touches it. A bucket and
// a day's figures are replaced, never changed in place, so a Tally may
// keep them.
type sums struct {
	buckets []*bucket
	dayRows [][]*cachedRow       // closed rows with charges on each day, in row order
	days    []map[string]float64 // their charges on each day, by account
	dirtyB  []bool
	dirtyD  []bool
	// userJobs counts the closed rows charging each user for each job;
	// userJobN is how many jobs each user has there.
	userJobs map[userJob]int
	userJobN map[UserKey]int
	// merged is mergeJobs of the buckets in mergedOf (the same pointers:
	// the same sums), kept for the next tally that asks for jobs
	mergedOf       []*bucket
	mergedJobs     map[AccountJob]float64
	mergedLaunched map[string]Launched
}

type userJob struct {
	UserKey
	job string
}

// bucket sums the closed rows launched on one day of the month (the
// first day's holds those launched before the month too).
type bucket struct {
	accounts map[string]AccountTally
	all      InstanceTally
	users    map[UserKey]float64
	userJobs map[userJob]int
	jobs     map[AccountJob]float64
	launched map[string]Launched
}

func newSums(c *monthCache) *sums {
	n := c.days()
	s := &sums{buckets: make([]*bucket, n), dayRows: make([][]*cachedRow, n), days: make([]map[string]float64, n),
		dirtyB: make([]bool, n), dirtyD: make([]bool, n), userJobs: map[userJob]int{}, userJobN: map[UserKey]int{}}
	for i := range n {
		s.buckets[i] = newBucket()
		s.dirtyB[i], s.dirtyD[i] = true, true
	}
	return s
}

// touched marks what a row's change touches: its bucket and, for a closed
// row, the days it charged.
func (s *sums) touched(c *monthCache, cr *cachedRow) {
	if s == nil {
		return
	}
	s.dirtyB[dayIndex(c.from, cr.row.Launched, len(s.buckets))] = true
	for _, rd := range cr.days {
		s.dirtyD[rd.day] = true
	}
}

// update recomputes the buckets and days a change touched; it returns
// how many rows it summed again.
func (s *sums) update(c *monthCache) int {
	n := 0
	for b, dirty := range s.dirtyB {
		if dirty {
			n += s.rebucket(c, b)
			s.dirtyB[b] = false
		}
	}
	any := false
	for d, dirty := range s.dirtyD {
		if dirty {
			s.dayRows[d], s.days[d] = nil, map[string]float64{}
			any = true
		}
	}
	if !any {
		return n
	}
	for _, cr := range c.rows { // pointers and day numbers only
		if !cr.closed {
			continue
		}
		for _, rd := range cr.days {
			if s.dirtyD[rd.day] {
				s.dayRows[rd.day] = append(s.dayRows[rd.day], cr)
				for _, a := range rd.amounts {
					s.days[rd.day][a.account] += a.usd
				}
				n++
			}
		}
	}
	clear(s.dirtyD)
	return n
}

// rebucket sums the closed rows launched on day b again.
func (s *sums) rebucket(c *monthCache, b int) int {
	old := s.buckets[b]
	for k, v := range old.userJobs {
		if s.userJobs[k] -= v; s.userJobs[k] == 0 {
			delete(s.userJobs, k)
			s.userJobN[k.UserKey]--
		}
	}
	nb := newBucket()
	lo, hi := s.bucketRows(c, b)
	n := 0
	for _, cr := range c.rows[lo:hi] {
		if cr.closed {
			nb.add(cr.row, cr.charges, true)
			n++
		}
	}
	for k, v := range nb.userJobs {
		if s.userJobs[k] == 0 {
			s.userJobN[k.UserKey]++
		}
		s.userJobs[k] += v
	}
	s.buckets[b] = nb
	return n
}

// bucketRows are the range of the cache's rows (sorted by launch) launched
// on day b.
func (s *sums) bucketRows(c *monthCache, b int) (int, int) {
	start := func(d int) int {
		if d <= 0 {
			return 0
		}
		if d >= len(s.buckets) {
			return len(c.rows)
		}
		t := c.from.AddDate(0, 0, d)
		return sort.Search(len(c.rows), func(i int) bool { return !c.rows[i].row.Launched.Before(t) })
	}
	return start(b), start(b + 1)
}

// add sums one row's charges in the month; ended: the instance ended (by
// the time summed).
func (bk *bucket) add(row store.Row, cs []billing.Charge, ended bool) {
	if len(cs) == 0 {
		return
	}
	seen := map[string]bool{}
	for _, ch := range cs {
		a := bk.accounts[ch.Account]
		a.USD += ch.USD
		a.OnDemandUSD += ch.OnDemandUSD
		a.Seconds += ch.Seconds
		a.InstanceOnDemandUSD += row.OnDemandUSD * ch.Seconds / 3600
		if !seen[ch.Account] {
			seen[ch.Account] = true
			a.Instances++
			if ended {
				a.EndedOnDemandUSD += row.OnDemandUSD
			}
		}
		bk.accounts[ch.Account] = a
		uk := UserKey{ch.Account, ch.User}
		bk.users[uk] += ch.USD
		if ch.JobID != "" {
			bk.userJobs[userJob{uk, ch.JobID}]++
			bk.jobs[AccountJob{ch.Account, row.Cluster, ch.JobID}] += ch.USD
		}
		l := bk.launched[row.JobID]
		l.Account = row.Account
		spot := 0.0
		if row.Capacity == "spot" {
			spot = ch.Seconds
		}
		l.USD, l.Seconds, l.SpotSeconds = l.USD+ch.USD, l.Seconds+ch.Seconds, l.SpotSeconds+spot
		if ch.Account == row.Account {
			l.OwnUSD, l.OwnSeconds, l.OwnSpotSec = l.OwnUSD+ch.USD, l.OwnSeconds+ch.Seconds, l.OwnSpotSec+spot
		}
		bk.launched[row.JobID] = l
	}
	bk.all.Instances++
	if ended {
		bk.all.EndedOnDemandUSD += row.OnDemandUSD
	}
}

// openRow is a row priced at the tally's time.
type openRow struct {
	row     store.Row
	charges []billing.Charge
	lo      time.Time // its billing's start: no charge before
}

// tally makes the Tally at now from the sums and the rows still open; it
// returns how many rows it priced.
func (s *sums) tally(c *monthCache, now time.Time, o TallyOptions) (Tally, int) {
	t := Tally{From: c.from, Now: now, Owner: c.owner, Accounts: map[string]AccountTally{}, Users: map[UserKey]UserTally{}}
	open := newBucket()
	cut := now.Truncate(time.Millisecond)
	var opens []openRow
	var ins []billing.Instance
	for _, cr := range c.rowBounds().open {
		row := runsBefore(cr.row, cut)
		cs := row.Charges(c.from, c.to, now, c.owner)
		open.add(row, cs, !row.End.IsZero() && row.End.Before(now))
		lo := row.Launched
		if bs := row.Bill(now); len(bs) > 0 {
			lo = bs[0].Start
		}
		opens = append(opens, openRow{row, cs, lo})
		ins = append(ins, row.Instance)
	}
	t.Burn = billing.Burn(ins, now, c.owner)
	all := append(append([]*bucket{}, s.buckets...), open)
	t.sum(all)
	for u, n := range s.userJobN {
		if y, ok := t.Users[u]; ok {
			y.Jobs = n
			t.Users[u] = y
		}
	}
	for k := range open.userJobs {
		if s.userJobs[k] == 0 {
			y := t.Users[k.UserKey]
			y.Jobs++
			t.Users[k.UserKey] = y
		}
	}
	if o.Jobs {
		if !slices.Equal(s.mergedOf, s.buckets) {
			s.mergedJobs, s.mergedLaunched = mergeJobs(s.buckets)
			s.mergedOf = slices.Clone(s.buckets)
		}
		// copies: a Tally is the caller's
		t.Jobs, t.Launched = maps.Clone(s.mergedJobs), maps.Clone(s.mergedLaunched)
		addJobs(t.Jobs, t.Launched, open)
	}
	buckets := s.buckets
	t.jobsOf = func(account string) map[string]float64 { return jobsOf(buckets, open, account) }
	priced := len(opens)
	for _, w := range o.Windows {
		m, n := s.within(c, opens, w, now)
		t.Windows = append(t.Windows, m)
		priced += n
	}
	return t, priced
}

// sum adds the buckets' figures up.
func (t *Tally) sum(bs []*bucket) {
	for _, b := range bs {
		for a, x := range b.accounts {
			y := t.Accounts[a]
			y.USD, y.OnDemandUSD, y.Seconds, y.InstanceOnDemandUSD = y.USD+x.USD, y.OnDemandUSD+x.OnDemandUSD, y.Seconds+x.Seconds, y.InstanceOnDemandUSD+x.InstanceOnDemandUSD
			y.Instances, y.EndedOnDemandUSD = y.Instances+x.Instances, y.EndedOnDemandUSD+x.EndedOnDemandUSD
			t.Accounts[a] = y
		}
		t.All.Instances += b.all.Instances
		t.All.EndedOnDemandUSD += b.all.EndedOnDemandUSD
		for u, usd := range b.users {
			y := t.Users[u]
			y.USD += usd
			t.Users[u] = y
		}
	}
}

// tallyOf is the Tally of an assembled month, every row priced at its
// time (a read at a time before some of the ledger's rows).
func tallyOf(m Month, o TallyOptions) Tally {
	t := Tally{From: m.From, Now: m.Now, Owner: m.Owner, Accounts: map[string]AccountTally{}, Users: map[UserKey]UserTally{}, Burn: m.Burn}
	b := newBucket()
	for i, row := range m.Rows {
		b.add(row, m.charges[i], !row.End.IsZero() && row.End.Before(m.Now))
	}
	t.sum([]*bucket{b})
	for k := range b.userJobs {
		y := t.Users[k.UserKey]
		y.Jobs++
		t.Users[k.UserKey] = y
	}
	if o.Jobs {
		t.Jobs, t.Launched = mergeJobs([]*bucket{b})
	}
	t.jobsOf = func(account string) map[string]float64 { return jobsOf([]*bucket{b}, newBucket(), account) }
	for _, w := range o.Windows {
		t.Windows = append(t.Windows, m.Within(w.From, w.To))
	}
	return t
}

func newBucket() *bucket {
	return &bucket{accounts: map[string]AccountTally{}, users: map[UserKey]float64{}, userJobs: map[userJob]int{}, jobs: map[AccountJob]float64{}, launched: map[string]Launched{}}
}

// mergeJobs sums the buckets' job figures.
func mergeJobs(bs []*bucket) (map[AccountJob]float64, map[string]Launched) {
	jobs, launched := map[AccountJob]float64{}, map[string]Launched{}
	for _, b := range bs {
		addJobs(jobs, launched, b)
	}
	return jobs, launched
}

// addJobs adds a bucket's job figures to jobs and launched.
func addJobs(jobs map[AccountJob]float64, launched map[string]Launched, b *bucket) {
	for k, v := range b.jobs {
		jobs[k] += v
	}
	for k, x := range b.launched {
		y := launched[k]
		y.Account = x.Account
		y.USD, y.Seconds, y.SpotSeconds = y.USD+x.USD, y.Seconds+x.Seconds, y.SpotSeconds+x.SpotSeconds
		y.OwnUSD, y.OwnSeconds, y.OwnSpotSec = y.OwnUSD+x.OwnUSD, y.OwnSeconds+x.OwnSeconds, y.OwnSpotSec+x.OwnSpotSec
		launched[k] = y
	}
}

// jobsOf are one account's jobs' charges.
func jobsOf(bs []*bucket, open *bucket, account string) map[string]float64 {
	out := map[string]float64{}
	for _, b := range append(append([]*bucket{}, bs...), open) {
		for k, v := range b.jobs {
			if k.Account == account {
				out[sizerapi.JobKey(k.Cluster, k.JobID)] += v
			}
		}
	}
	return out
}

// within is the charges in w by account: whole days from the kept sums,
// part days from the rows charged on them (priced again only where the
// window cuts their span), the open rows priced at now; it returns how
// many rows it priced.
func (s *sums) within(c *monthCache, opens []openRow, w Window, now time.Time) (map[string]float64, int) {
	out := map[string]float64{}
	from, to := billing.Later(w.From, c.from), billing.Earlier(w.To, c.to)
	n := 0
	for d := dayIndex(c.from, from, len(s.days)); to.After(from) && d < len(s.days); d++ {
		ds := c.from.AddDate(0, 0, d)
		de := ds.AddDate(0, 0, 1)
		if !ds.Before(to) {
			break
		}
		ws, we := billing.Later(from, ds), billing.Earlier(to, de)
		if ws.Equal(ds) && we.Equal(de) {
			for a, v := range s.days[d] {
				out[a] += v
			}
			continue
		}
		for _, cr := range s.dayRows[d] {
			lo, hi := billing.Later(cr.span.lo, ds), billing.Earlier(cr.span.hi, de)
			switch {
			case !hi.After(ws) || !lo.Before(we): // none of its day in the window
			case !lo.Before(ws) && !hi.After(we): // all of it
				for _, rd := range cr.days {
					if rd.day == d {
						for _, a := range rd.amounts {
							out[a.account] += a.usd
						}
					}
				}
			default:
				for _, ch := range cr.row.Charges(ws, we, cr.row.End, c.owner) {
					out[ch.Account] += ch.USD
				}
				n++
			}
		}
	}
	for _, or := range opens {
		if !or.lo.Before(to) || len(or.charges) == 0 {
			continue
		}
		for _, ch := range or.row.Charges(from, to, now, c.owner) {
			out[ch.Account] += ch.USD
		}
		n++
	}
	return out, n
}

// byAccount are the accounts' charges; onDemand the same seconds on demand.
func (t Tally) byAccount() (usd, od map[string]float64) {
	usd, od = map[string]float64{}, map[string]float64{}
	for a, x := range t.Accounts {
		usd[a], od[a] = x.USD, x.OnDemandUSD
	}
	return usd, od
}

// Spend is an account's figure for admission control, as Month.Spend.
func (t Tally) Spend(account string) sizerapi.AccountSpend {
	return sizerapi.AccountSpend{Account: account, SpentUSD: t.Accounts[account].USD, Jobs: t.jobsOf(account), BurnUSDPerHour: t.Burn[account], AsOf: t.Now}
}

// Budgets is every account's standing, as Month.Budgets.
func (t Tally) Budgets(o BudgetOptions) []sizerapi.BudgetStatus {
	usd, od := t.byAccount()
	return budgets(t.From, t.Now, usd, od, t.Burn, t.jobsOf, o)
}
