package spend

import (
	"context"
	"time"

	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/store"
)

// Tally is the month's charges summed the ways the dashboard shows them:
// by account, user and UTC day, what the idle-timeout counterfactual
// needs, and (TallyOptions.Jobs) by job. A Reader keeps these sums for the
// instances whose bills are final (by launch day, and by day of charge)
// and recomputes only the days a change touched, so a Tally costs the
// running instances and the part days of its windows, not the month's
// instances (tally_test.go checks every figure against a fresh read).
type Tally struct {
	From, Now time.Time
	Owner     string
	Accounts  map[string]AccountTally
	// All counts each instance once, whichever accounts it charged.
	All   InstanceTally
	Users map[UserKey]UserTally
	Burn  map[string]float64
	// Windows are the charges by account within each of
	// TallyOptions.Windows, in order (Month.Within's figures).
	Windows []map[string]float64
	// Jobs are each job's charges by the account charged, Launched the
	// bills of each job's instances (the ones launched for it); both nil
	// unless TallyOptions.Jobs.
	Jobs     map[AccountJob]float64
	Launched map[string]Launched
	// Reserved are the month's rows (launched before Now) that name a
	// capacity reservation: the reservations' use.
	Reserved []store.Row

	// jobsOf are an account's jobs' charges (budgets' reservations).
	jobsOf func(account string) map[string]float64
}

// AccountTally is one account's charges in the month.
type AccountTally struct {
	USD, OnDemandUSD float64
	Seconds          float64 // billed seconds charged to it
	// InstanceOnDemandUSD sums each instance's on-demand price per hour
	// times the hours charged to the account (the idle-timeout
	// counterfactual's bill for the same time).
	InstanceOnDemandUSD float64
	InstanceTally
}

// InstanceTally counts instances with a charge, and sums the on-demand
// price per hour of those that ended (the counterfactual keeps each for
// the idle timeout after its work).
type InstanceTally struct {
	Instances        int
	EndedOnDemandUSD float64
}

// UserKey names a user of an account.
type UserKey struct{ Account, User string }

// UserTally is a user's charges and how many jobs they were for.
type UserTally struct {
	USD  float64
	Jobs int
}

// AccountJob names a job's charges to one account; Cluster is the
// cluster.name of the instance's ledger row (a job ID is one cluster's).
type AccountJob struct{ Account, Cluster, JobID string }

// Launched is the bill of the instances launched for a job: all their
// charges, and those to the job's own account (Own), with the part billed
// on spot capacity.
type Launched struct {
	Account                        string // the instances' (the job's) account
	USD, Seconds, SpotSeconds      float64
	OwnUSD, OwnSeconds, OwnSpotSec float64
}

// Window is a span [From, To).
type Window struct{ From, To time.Time }

// TallyOptions say what a Tally holds beyond its sums.
type TallyOptions struct {
	Windows []Window
	Jobs    bool
}

// Tally returns the month containing now summed; owner is
// accounting.idle_owner.
func (r *Reader) Tally(ctx context.Context, owner string, now time.Time, o TallyOptions) (Tally, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	from := billing.MonthStart(now)
	if err := r.refresh(ctx, from, owner); err != nil {
		return Tally{}, err
	}
	c := r.c
	if !c.settled(now) {
		// a row launched after now, or ended after it (a read at an
		// earlier time than the ledger's): from the month as of now
		r.work.Fallbacks++
		t := tallyOf(r.assemble(now), o)
		t.Reserved = c.reservedRows(now)
		return t, nil
	}
	if c.sums == nil {
		c.sums = newSums(c)
	}
	r.work.Priced += c.sums.update(c)
	t, priced := c.sums.tally(c, now, o)
	r.work.Priced += priced
	t.Reserved = c.reservedRows(now)
	return t, nil
}

// rowBounds is what every tally asks of the month's rows, kept until the
// rows change: the latest launch and closed end (settled), the rows that
// name a capacity reservation, and the rows still open (in the rows'
// order), which each tally prices at its time.
type rowBounds struct {
	launched, closedEnd time.Time // zero: no row, no closed row
	reserved, open      []*cachedRow
}

func (c *monthCache) rowBounds() *rowBounds {
	if c.bounds != nil {
		return c.bounds
	}
	b := &rowBounds{}
	for _, cr := range c.rows { // pointers only: no pricing
		if cr.row.Launched.After(b.launched) {
			b.launched = cr.row.Launched
		}
		if cr.closed && cr.row.End.After(b.closedEnd) {
			b.closedEnd = cr.row.End
		}
		if cr.row.Reservation != "" {
			b.reserved = append(b.reserved, cr)
		}
		if !cr.closed {
			b.open = append(b.open, cr)
		}
	}
	c.bounds = b
	return b
}

// reservedRows are the rows launched before now that name a capacity
// reservation.
func (c *monthCache) reservedRows(now time.Time) []store.Row {
	cut := now.Truncate(time.Millisecond)
	var out []store.Row
	for _, cr := range c.rowBounds().reserved {
		if cr.row.Launched.Before(cut) {
			out = append(out, cr.row)
		}
	}
	return out
}

// Work is what a Reader's tallies cost: the rows priced again (their
// charges computed), and the tallies made from the whole month instead of
// the kept sums.
type Work struct{ Priced, Fallbacks int }

// settled says whether every row was launched before now and every closed
// one ended before it, so the kept sums hold at now.
func (c *monthCache) settled(now time.Time) bool {
	b := c.rowBounds() // zero times: no row, no closed row
	return b.launched.Before(now.Truncate(time.Millisecond)) && b.closedEnd.Before(now)
}

// dayIndex is the day of the month t falls on (0: the first; clamped).
func dayIndex(from time.Time, t time.Time, days int) int {
	d := int(t.Sub(from) / (24 * time.Hour))
	if t.Before(from) {
		d = 0
	}
	return min(max(d, 0), days-1)
}

// amount is a charge's account and dollars.
type amount struct {
	account string
	usd     float64
}

// rowDay is a closed row's charges on one day of the month.
type rowDay struct {
	day     int
	amounts []amount
}

// dayCharges are a closed row's charges on each day its billed span
// touches.
func dayCharges(row store.Row, sp span, c *monthCache) []rowDay {
	if !sp.known {
		return nil
	}
	lo, hi := billing.Later(sp.lo, c.from), billing.Earlier(sp.hi, c.to)
	if !hi.After(lo) {
		return nil
	}
	days := c.days()
	var out []rowDay
	for d := dayIndex(c.from, lo, days); d < days; d++ {
		ds := c.from.AddDate(0, 0, d)
		if !ds.Before(hi) {
			break
		}
		cs := row.Charges(ds, ds.AddDate(0, 0, 1), row.End, c.owner)
		if len(cs) == 0 {
			continue
		}
		rd := rowDay{day: d, amounts: make([]amount, len(cs))}
		for i, ch := range cs {
			rd.amounts[i] = amount{ch.Account, ch.USD}
		}
		out = append(out, rd)
	}
	return out
}

// days is how many days the month has.
func (c *monthCache) days() int { return int(c.to.Sub(c.from) / (24 * time.Hour)) }
