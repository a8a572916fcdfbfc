// Package spend is the month's money as every reader sees it: the budgets
// API, `burst-sizer report` and `spend --local`, and the dashboard read the
// same ledger (sizer/store) through the same arithmetic (sizer/billing) and
// admission state (internal/admit), so no two of them show different
// figures.
package spend

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/burst-hpc/burst/internal/admit"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/store"
)

// Month is the ledger's view of the month containing Now: every
// instance's charges, by account and by job.
type Month struct {
	From, Now time.Time
	Rows      []store.Row
	Charges   []billing.Charge
	ByAccount map[string]float64
	OnDemand  map[string]float64
	ByJob     map[string]float64
	Burn      map[string]float64
	Owner     string

	// charges are each row's charges in the month, spans its billed time
	// where final (a Reader's closed instances): Within skips a row whose
	// span misses its window and reuses the month's charges of one wholly
	// inside it.
	charges [][]billing.Charge
	spans   []span
}

// To is the month's end (a segment's 60 s minimum reaching past now is
// part of its bill already).
func (m Month) To() time.Time { return m.From.AddDate(0, 1, 0) }

// Read reads the month's ledger from a store; owner is
// accounting.idle_owner.
func Read(ctx context.Context, st *store.Store, owner string, now time.Time) (Month, error) {
	return ReadPriced(ctx, st, owner, now, nil)
}

// OnDemandPrice is an instance type's on-demand price per hour.
type OnDemandPrice func(instanceType string) (float64, bool)

// ReadPriced is Read with the on-demand price of instances the ledger has
// none for taken from od (the sizing policy's catalog).
func ReadPriced(ctx context.Context, st *store.Store, owner string, now time.Time, od OnDemandPrice) (Month, error) {
	r := NewReader(st, od)
	c, err := r.readRows(ctx, billing.MonthStart(now), owner) // once: no change log to follow
	if err != nil {
		return Month{}, err
	}
	r.c = c
	return r.assemble(now), nil
}

// Spend is an account's figure for admission control; its jobs' charges
// are keyed by their cluster's name and id (sizerapi.JobKey: a job runs
// only on its own cluster's instances).
func (m Month) Spend(account string) sizerapi.AccountSpend {
	out := sizerapi.AccountSpend{Account: account, SpentUSD: m.ByAccount[account], Jobs: map[string]float64{}, BurnUSDPerHour: m.Burn[account], AsOf: m.Now}
	for i, r := range m.Rows {
		for _, c := range m.charges[i] {
			if c.Account == account && c.JobID != "" {
				out.Jobs[sizerapi.JobKey(r.Cluster, c.JobID)] += c.USD
			}
		}
	}
	return out
}

// Within returns the charges of the instances in [from, to) (a day, a
// forecast window), by account.
func (m Month) Within(from, to time.Time) map[string]float64 {
	out := map[string]float64{}
	for i, r := range m.Rows {
		cs := []billing.Charge(nil)
		if i < len(m.spans) && m.spans[i].known {
			sp := m.spans[i]
			if !sp.hi.After(from) || !sp.lo.Before(to) {
				continue // billed wholly outside the window
			}
			if !billing.Later(sp.lo, m.From).Before(from) && !billing.Earlier(sp.hi, m.To()).After(to) {
				cs = m.charges[i] // its whole month is inside the window
			}
		}
		if cs == nil {
			cs = r.Charges(from, to, m.Now, m.Owner)
		}
		for _, c := range cs {
			out[c.Account] += c.USD
		}
	}
	return out
}

// BudgetOptions say how to read budgets' standing.
type BudgetOptions struct {
	Caps      map[string]float64
	OnUnknown map[string]string
	IdleOwner string
	StateDir  string // the admissions file (reservations)
	// Shared, when set, holds the admissions instead (sizer.store
	// postgres; see On).
	Shared admit.Shared
	// Cluster is this cluster's cluster.name (the file's entries are its).
	Cluster string
	Log     *slog.Logger
}

// On is o reading the reservations where st keeps them: the shared
// admissions document of every sizer and cluster on PostgreSQL, the
// admissions file in StateDir on SQLite.
func (o BudgetOptions) On(st *store.Store) BudgetOptions {
	if st != nil && st.Driver() == store.DriverPostgres {
		o.Shared = st
	}
	return o
}

// Budgets is every account's standing in the month: capped accounts and
// accounts with spend, with reservations, burn rate and forecast.
func (m Month) Budgets(o BudgetOptions) []sizerapi.BudgetStatus {
	return budgets(m.From, m.Now, m.ByAccount, m.OnDemand, m.Burn, func(a string) map[string]float64 { return m.Spend(a).Jobs }, o)
}

// budgets is every account's standing from the month's sums; jobsOf gives
// an account's jobs' charges (asked for only with reservations).
func budgets(from, now time.Time, byAccount, onDemand, burn map[string]float64, jobsOf func(string) map[string]float64, o BudgetOptions) []sizerapi.BudgetStatus {
	var res []admit.Entry
	if o.StateDir != "" || o.Shared != nil {
		var err error
		res, err = admit.New(admit.Options{Dir: o.StateDir, Shared: o.Shared}).Reservations()
		if err != nil && o.Log != nil {
			o.Log.Warn("reading admissions for budget reservations", "err", err)
		}
	}
	names := map[string]bool{}
	for a := range o.Caps {
		names[a] = true
	}
	for a := range byAccount {
		names[a] = true
	}
	out := []sizerapi.BudgetStatus{}
	for a := range names {
		b := sizerapi.BudgetStatus{Account: a, MonthlyUSD: o.Caps[a], SpentUSD: byAccount[a], Since: from,
			BurnUSDPerHour: burn[a], OnDemandUSD: onDemand[a], SavingUSD: onDemand[a] - byAccount[a], OnUnknown: o.OnUnknown[a]}
		if slices.ContainsFunc(res, func(e admit.Entry) bool { return e.Account == a }) {
			b.ReservedUSD = admit.Reserved(res, a, jobsOf(a), o.Cluster)
		}
		if b.MonthlyUSD > 0 {
			b.RemainingUSD = max(b.MonthlyUSD-b.SpentUSD-b.ReservedUSD, 0)
			b.Over = b.SpentUSD >= b.MonthlyUSD
			if f := billing.Forecast(b.MonthlyUSD, b.SpentUSD, b.ReservedUSD, b.BurnUSDPerHour, now); !f.IsZero() {
				b.ForecastCapAt = &f
			}
		}
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Account < out[j].Account })
	return out
}

// BudgetStatuses reads the month and returns Budgets.
func BudgetStatuses(ctx context.Context, st *store.Store, o BudgetOptions, now time.Time) ([]sizerapi.BudgetStatus, error) {
	m, err := Read(ctx, st, o.IdleOwner, now)
	if err != nil {
		return nil, err
	}
	return m.Budgets(o.On(st)), nil
}

// Ledger lists every instance the store has (all time) with its bill, and
// this month's charges.
func Ledger(ctx context.Context, st *store.Store, owner string, now time.Time) (sizerapi.Ledger, error) {
	rows, err := st.Rows(ctx, time.Time{}, time.Time{})
	if err != nil {
		return sizerapi.Ledger{}, err
	}
	from := billing.MonthStart(now)
	out := sizerapi.Ledger{From: from, To: now, Instances: []sizerapi.LedgerInstance{}, Charges: []sizerapi.Charge{}, Reservations: []sizerapi.LedgerReservation{}}
	rs, err := st.Reservations(ctx)
	if err != nil {
		return sizerapi.Ledger{}, err
	}
	for _, r := range rs {
		secs, usd := r.USD(now)
		out.Reservations = append(out.Reservations, sizerapi.LedgerReservation{ReservationID: r.ID, InstanceType: r.InstanceType, Zone: r.Zone,
			Count: r.Count, PriceUSD: r.PriceUSD, State: r.State, Match: r.Match, Start: r.Start, End: r.End, Open: r.End.IsZero(), Seconds: secs, USD: usd})
	}
	for _, r := range rows {
		out.Instances = append(out.Instances, Instance(r, now))
		for _, c := range r.Charges(from, from.AddDate(0, 1, 0), now, owner) {
			kind := "job"
			if c.Idle {
				kind = "idle"
			}
			out.Charges = append(out.Charges, sizerapi.Charge{InstanceID: c.InstanceID, JobID: c.JobID, Account: c.Account, User: c.User, Kind: kind,
				Seconds: c.Seconds, USD: c.USD, OnDemandUSD: c.OnDemandUSD})
		}
	}
	return out, nil
}

// Instance is a row's bill as the API shows it.
func Instance(r store.Row, now time.Time) sizerapi.LedgerInstance {
	bs := r.Bill(now)
	secs, usd, gross := billing.Total(bs)
	li := sizerapi.LedgerInstance{InstanceID: r.ID, Node: r.Node, InstanceType: r.InstanceType, Zone: r.Zone, Capacity: r.Capacity,
		PriceUSD: r.PriceUSD, PriceSource: r.PriceSource, OnDemandUSD: r.OnDemandUSD, Account: r.Account, User: r.User, JobID: r.JobID,
		Source: r.Source, Launched: r.Launched, End: r.End, EndSource: r.EndSource, EndReason: r.EndReason,
		Segments: len(bs), BilledSeconds: secs, USD: usd, GrossUSD: gross, StartSource: "launch", BillingStart: r.Launched}
	if len(bs) > 0 {
		li.BillingStart = bs[0].Start
		if bs[0].FromEvents {
			li.StartSource = "ec2-event"
		}
		last := bs[len(bs)-1]
		li.Open, li.Waived = last.Open, last.Waived
	} else if r.End.IsZero() {
		li.Open = true // launched, not running yet
	}
	return li
}
