// Package ledger keeps burst-sizer's spend ledger (sizer/store) in
// agreement with EC2, the way EC2 itself bills:
//
//   - EC2's "EC2 Instance State-change Notification" events (the moment
//     each instance starts running and stops running, which is what EC2
//     bills; pending is free) reach the store through internal/notices,
//     burst-sizer's one reader of the EventBridge queue
//     (interruptions.queue_url), which records each with
//     store.RecordState;
//   - each pass (Sync, every reconcile interval and on POST
//     /v1/ledger/sync) lists the cluster's instances, terminated ones
//     included (EC2 shows them for about an hour): an instance the ledger
//     lacks is backfilled from its tags and burst-resume's launch intent (a
//     crash between CreateFleet and the launch record, a launch by hand);
//     an instance EC2 shows shutting down or terminated is closed at EC2's
//     own transition time with EC2's reason, whoever ended it (burst, the
//     node's dead-man switch, a spot reclaim, the console); an open
//     interval EC2 no longer lists is closed as "missing"; spot prices are
//     taken from EC2's spot price history at the start of billing.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/cloud"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/store"
)

// Cloud is what the ledger reads from EC2 (*ec2.Provider).
type Cloud interface {
	ListAll(ctx context.Context) ([]cloud.Instance, error)
	Describe(ctx context.Context, ids []string) ([]cloud.Instance, error)
	SpotPrice(ctx context.Context, instanceType, zone string, at time.Time) (float64, bool, error)
}

// Options configure a Ledger.
type Options struct {
	Cloud   Cloud
	Store   *store.Store
	Catalog *catalog.Catalog // nil: catalog.Default()
	// Grace: an open interval EC2 does not list is closed as missing only
	// once its launch is this old (default 2 minutes: EC2 is eventually
	// consistent).
	Grace time.Duration
	// ReservationIDs are the capacity reservations burst.yaml's classes
	// name: each sync describes them (Cloud must be a ReservationLister)
	// and bills each as EC2 does, used or not (reservations.go).
	ReservationIDs []string
	// BlockPrices are the Capacity Blocks burst.yaml's classes name, each
	// with its price (price_usd): each sync describes them and bills each
	// once, whole, as EC2 does (prepaid).
	BlockPrices map[string]float64
	// Spool: EC2 state changes the store did not take at once, written
	// again at the start of every sync (may be nil).
	Spool  *StateSpool
	Now    func() time.Time
	Logger *slog.Logger
}

// Ledger syncs the store with EC2.
type Ledger struct {
	o Options
}

// New returns a Ledger.
func New(o Options) (*Ledger, error) {
	if o.Cloud == nil || o.Store == nil {
		return nil, errors.New("the ledger needs EC2 and the store")
	}
	if o.Catalog == nil {
		o.Catalog = catalog.Default()
	}
	if o.Grace <= 0 {
		o.Grace = 2 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Ledger{o: o}, nil
}

// Sync reconciles the ledger with EC2 once.
func (l *Ledger) Sync(ctx context.Context) (sizerapi.LedgerSync, error) {
	res := sizerapi.LedgerSync{Backfilled: []string{}, Closed: []string{}, Missing: []string{}, Repriced: []string{}}
	var errs []error
	if l.o.Spool != nil {
		if _, err := l.o.Spool.Replay(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := l.o.Store.PruneChangeLogs(ctx, l.o.Now().Add(-store.LedgerChangesKept)); err != nil {
		errs = append(errs, err)
	}
	insts, err := l.o.Cloud.ListAll(ctx)
	if err != nil {
		return res, fmt.Errorf("ledger: listing the cluster's instances: %w", err)
	}
	if err := l.backfillUnknown(ctx, insts, &res, &errs); err != nil {
		return res, err
	}
	unsettled, err := l.o.Store.Unsettled(ctx, l.o.Now().Add(-2*time.Hour))
	if err != nil {
		return res, err
	}
	now := l.o.Now()
	gone := l.closeEnded(ctx, insts, unsettled, now, &res, &errs)
	if len(gone) > 0 {
		l.closeGone(ctx, gone, unsettled, now, &res, &errs)
	}
	rep, err := l.reprice(ctx)
	res.Repriced = append(res.Repriced, rep...)
	errs = append(errs, err)
	rows, err := l.o.Store.Rows(ctx, time.Time{}, time.Time{})
	if err == nil {
		for _, r := range rows {
			if r.End.IsZero() {
				res.Open++
			}
		}
	}
	if len(res.Backfilled)+len(res.Closed)+len(res.Missing) > 0 {
		l.o.Logger.Info("ledger synced with EC2", "backfilled", res.Backfilled, "closed", len(res.Closed), "missing", res.Missing, "open", res.Open)
	}
	return res, errors.Join(append(errs, err)...)
}

// backfillUnknown syncs the reservations and records each listed instance
// the ledger lacks. Only an error reading the store ends the sync; the
// others are added to errs.
func (l *Ledger) backfillUnknown(ctx context.Context, insts []cloud.Instance, res *sizerapi.LedgerSync, errs *[]error) error {
	ids := make([]string, len(insts))
	for i, in := range insts {
		ids[i] = in.ID
	}
	known, err := l.o.Store.Known(ctx, ids)
	if err != nil {
		return err
	}
	if err := l.syncReservations(ctx, insts); err != nil {
		*errs = append(*errs, err)
	}
	if err := l.noteReservations(ctx, insts, known); err != nil {
		*errs = append(*errs, err)
	}
	for _, in := range insts {
		if !known[in.ID] {
			if err := l.backfill(ctx, in); err != nil {
				*errs = append(*errs, err)
				continue
			}
			res.Backfilled = append(res.Backfilled, in.ID)
		}
	}
	return nil
}

// closeEnded closes each unsettled interval whose instance EC2 lists as
// ended, at EC2's transition time, and returns those EC2 no longer lists
// past the grace period.
func (l *Ledger) closeEnded(ctx context.Context, insts []cloud.Instance, unsettled []store.Row, now time.Time, res *sizerapi.LedgerSync, errs *[]error) []string {
	byID := map[string]cloud.Instance{}
	for _, in := range insts {
		byID[in.ID] = in
	}
	var gone []string
	for _, r := range unsettled {
		in, ok := byID[r.ID]
		if !ok {
			if now.Sub(r.Launched) >= l.o.Grace {
				gone = append(gone, r.ID)
			}
			continue
		}
		if !ended(in) {
			continue
		}
		at := in.StateChanged
		src := sizerapi.SourceEC2
		if at.IsZero() {
			// EC2 says it ended but not when: burst's time if it has one
			at, src = r.End, sizerapi.SourceBurst
			if at.IsZero() {
				at = now
			}
		}
		if _, err := l.o.Store.RecordEnd(ctx, r.ID, at, src, in.StateReason); err != nil {
			*errs = append(*errs, err)
			continue
		}
		if src == sizerapi.SourceEC2 {
			res.Closed = append(res.Closed, r.ID)
		}
	}
	return gone
}

// closeGone takes a second look by id at the instances the listing missed
// (the tag filter may have missed them): one EC2 shows ended is closed at
// EC2's time; one it does not show at all is closed now as missing.
func (l *Ledger) closeGone(ctx context.Context, gone []string, unsettled []store.Row, now time.Time, res *sizerapi.LedgerSync, errs *[]error) {
	seen, err := l.o.Cloud.Describe(ctx, gone)
	if err != nil {
		*errs = append(*errs, err)
		gone = nil
	}
	for _, in := range seen {
		gone = slices.DeleteFunc(gone, func(id string) bool { return id == in.ID })
		if ended(in) && !in.StateChanged.IsZero() {
			if _, err := l.o.Store.RecordEnd(ctx, in.ID, in.StateChanged, sizerapi.SourceEC2, in.StateReason); err == nil {
				res.Closed = append(res.Closed, in.ID)
			}
		}
	}
	for _, r := range unsettled {
		if !slices.Contains(gone, r.ID) || !r.End.IsZero() {
			continue
		}
		l.o.Logger.Warn("ledger: EC2 no longer lists an instance it never saw end; closing it now", "instance_id", r.ID, "launched", r.Launched)
		if _, err := l.o.Store.RecordEnd(ctx, r.ID, now, sizerapi.SourceMissing, ""); err != nil {
			*errs = append(*errs, err)
			continue
		}
		res.Missing = append(res.Missing, r.ID)
	}
}

// ended: EC2 shows the instance shutting down or terminated.
func ended(in cloud.Instance) bool { return in.State == "shutting-down" || in.State == "terminated" }

// backfill records an instance EC2 has and the ledger does not, from its
// tags and the launch intent burst-resume journaled before CreateFleet.
func (l *Ledger) backfill(ctx context.Context, in cloud.Instance) error {
	ev := sizerapi.InstanceEvent{InstanceID: in.ID, Node: in.Node, InstanceType: in.InstanceType, Zone: in.Zone, Capacity: string(in.Capacity),
		Reservation: in.Reservation, Account: in.Tags[ec2p.TagAccount], User: in.Tags[ec2p.TagUser], Time: in.LaunchTime}
	class := in.Tags[ec2p.TagClass]
	jobID := in.Tags[ec2p.TagJobID]
	intent, ok, err := l.o.Store.IntentFor(ctx, in.ClientToken, in.Node, in.LaunchTime)
	if err != nil {
		return err
	}
	if ok {
		ev.Account = or(ev.Account, intent.Account)
		ev.User = or(ev.User, intent.User)
		class = or(class, intent.Class)
		jobID = or(jobID, intent.JobID)
	}
	if jobID != "" {
		ev.Job = &sizerapi.Job{JobID: jobID, User: ev.User, Account: ev.Account, Class: class, Nodes: 1}
	}
	price, src := l.price(ctx, in, in.LaunchTime)
	if price == 0 && ok && src != store.PriceReservation {
		for _, o := range intent.Offerings {
			if o.InstanceType == in.InstanceType && o.Zone == in.Zone {
				price, src = o.PriceUSD, store.PriceResume
			}
		}
	}
	od := 0.0
	if t, ok := l.o.Catalog.Lookup(in.InstanceType); ok {
		od = t.OnDemandUSD
	}
	l.o.Logger.Warn("ledger: backfilling an instance burst has no launch record of", "instance_id", in.ID, "node", in.Node, "job", jobID,
		"account", ev.Account, "launched", in.LaunchTime, "intent", ok)
	return l.o.Store.RecordInstance(ctx, store.Launch{Event: ev, PriceUSD: price, OnDemandUSD: od, PriceSource: src, Source: "backfill",
		ClientToken: in.ClientToken, Class: class, User: ev.User})
}

// price is an instance's hourly price: the pool's spot price at billing
// start from EC2's history, the catalog's on-demand price, or 0 in a
// capacity reservation.
func (l *Ledger) price(ctx context.Context, in cloud.Instance, at time.Time) (float64, string) {
	if in.Capacity == capacity.Reserved {
		// EC2 bills the reservation, used or not; the instance adds nothing
		return 0, store.PriceReservation
	}
	if in.Capacity == capacity.Spot {
		p, ok, err := l.o.Cloud.SpotPrice(ctx, in.InstanceType, in.Zone, at)
		if err == nil && ok {
			return p, store.PriceSpotHistory
		}
		if err != nil {
			l.o.Logger.Warn("ledger: reading a spot price", "instance_type", in.InstanceType, "zone", in.Zone, "err", err)
		}
		if t, ok := l.o.Catalog.Lookup(in.InstanceType); ok && t.SpotUSD() > 0 {
			return t.SpotUSD(), store.PriceCatalog
		}
		return 0, ""
	}
	if t, ok := l.o.Catalog.Lookup(in.InstanceType); ok {
		return t.OnDemandUSD, store.PriceCatalog
	}
	return 0, ""
}

// reprice replaces spot estimates by the pool's price at billing start,
// and fills in missing on-demand prices.
func (l *Ledger) reprice(ctx context.Context) ([]string, error) {
	rows, err := l.o.Store.Rows(ctx, time.Time{}, time.Time{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range rows {
		if r.Capacity != string(capacity.Spot) || r.PriceSource == store.PriceSpotHistory || r.Zone == "" {
			continue
		}
		at := r.Launched
		if segs := r.Segments(); len(segs) > 0 {
			at = segs[0].Start
		}
		p, ok, err := l.o.Cloud.SpotPrice(ctx, r.InstanceType, r.Zone, at)
		if err != nil || !ok {
			continue
		}
		if err := l.o.Store.SetPrice(ctx, r.ID, p, store.PriceSpotHistory); err != nil {
			return out, err
		}
		out = append(out, r.ID)
	}
	return out, nil
}

// Run syncs every interval until ctx ends; errors are logged.
func (l *Ledger) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, max(interval, time.Minute))
		if _, err := l.Sync(pctx); err != nil && ctx.Err() == nil {
			l.o.Logger.Error("ledger sync", "err", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
