package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/sizer/store"
)

// ReservationLister describes capacity reservations (*ec2.Provider).
type ReservationLister interface {
	Reservations(ctx context.Context, ids []string) ([]cloud.Reservation, error)
}

// syncReservations records the configured capacity reservations as EC2
// bills them: from the reservation's start, every reserved instance at the
// on-demand rate, used or not, until it expires or is cancelled. An
// instance in a reservation is charged nothing itself (price source
// reservation). EC2 describes an expired reservation's end date; a
// cancelled one ends, for the ledger, at the first sync that sees it
// cancelled (at most one sync interval late).
//
// The reservations are those burst.yaml names, those the cluster's
// instances run in (EC2's CapacityReservationId: an open reservation can
// take an on-demand launch burst did not aim at it), and those the ledger
// already bills while they are active.
func (l *Ledger) syncReservations(ctx context.Context, insts []cloud.Instance) error {
	ids := append([]string(nil), l.o.ReservationIDs...)
	for id := range l.o.BlockPrices {
		ids = append(ids, id)
	}
	for _, in := range insts {
		if in.Reservation != "" {
			ids = append(ids, in.Reservation)
		}
	}
	known, err := l.o.Store.Reservations(ctx)
	if err != nil {
		return err
	}
	for _, r := range known {
		if r.End.IsZero() {
			ids = append(ids, r.ID)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) == 0 {
		return nil
	}
	rl, ok := l.o.Cloud.(ReservationLister)
	if !ok {
		return errors.New("ledger: the cloud cannot describe capacity reservations; their charges are not recorded")
	}
	rs, err := rl.Reservations(ctx, ids)
	if err != nil {
		return fmt.Errorf("ledger: describing capacity reservations: %w", err)
	}
	l.warnUnknownReservations(ids, rs)
	now := l.o.Now()
	var errs []error
	for _, r := range rs {
		if r.Type == capacity.BlockType {
			if err := l.recordBlock(ctx, r, now); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		switch r.State {
		case "active", "expired", "cancelled":
		default:
			continue // pending, scheduled, failed...: not billed (yet)
		}
		t, ok := l.o.Catalog.Lookup(r.InstanceType)
		if !ok || t.OnDemandUSD <= 0 {
			errs = append(errs, fmt.Errorf("ledger: capacity reservation %s: no on-demand price for %s in the catalog", r.ID, r.InstanceType))
			continue
		}
		rec := store.Reservation{ID: r.ID, InstanceType: r.InstanceType, Zone: r.Zone, Count: r.Total, PriceUSD: t.OnDemandUSD,
			Start: r.Start, State: r.State, Match: r.Match, Seen: now, Type: r.Type}
		if r.State != "active" {
			rec.End = r.End
			if rec.End.IsZero() || rec.End.After(now) {
				rec.End = now
			}
		}
		if err := l.o.Store.RecordReservation(ctx, rec); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// warnUnknownReservations logs the reservations burst.yaml names that EC2
// does not know (a typo, one deleted long ago): nothing is billed for them
// and launches skip them; the rest are billed as usual.
func (l *Ledger) warnUnknownReservations(asked []string, got []cloud.Reservation) {
	seen := map[string]bool{}
	for _, r := range got {
		seen[r.ID] = true
	}
	for _, id := range asked {
		if !seen[id] && l.o.Logger != nil {
			l.o.Logger.Warn("capacity reservation unknown to EC2: nothing billed for it, launches skip it (check classes[].reservations in burst.yaml)", "reservation", id)
		}
	}
}

// recordBlock records a Capacity Block as EC2 bills it: prepaid, its whole
// price (burst.yaml's price_usd: EC2 does not describe it) charged once,
// from the moment it is bought (scheduled) on. The record spans the
// block's window at the rate that adds up to that price, so
// store.Reservation.USD is the price whatever the time.
func (l *Ledger) recordBlock(ctx context.Context, r cloud.Reservation, now time.Time) error {
	switch r.State {
	case "scheduled", "active", "expired":
	default:
		return nil // payment-pending, payment-failed...: not billed
	}
	price, ok := l.o.BlockPrices[r.ID]
	if !ok || price <= 0 {
		return fmt.Errorf("ledger: capacity block %s: no price_usd in burst.yaml (classes[].reservations.capacity_blocks); not billed", r.ID)
	}
	secs := r.End.Sub(r.Start).Seconds()
	if r.Start.IsZero() || r.End.IsZero() || secs <= 0 || r.Total <= 0 {
		return fmt.Errorf("ledger: capacity block %s: EC2 describes no window (start %v, end %v) or count (%d); not billed", r.ID, r.Start, r.End, r.Total)
	}
	rec := store.Reservation{ID: r.ID, InstanceType: r.InstanceType, Zone: r.Zone, Count: r.Total, PriceUSD: price * 3600 / secs / float64(r.Total),
		Start: r.Start, End: r.End, State: r.State, Match: r.Match, Seen: now, Type: r.Type}
	return l.o.Store.RecordReservation(ctx, rec)
}

// noteReservations records on the ledger's rows the reservation each
// known instance runs in, as EC2 describes it (CapacityReservationId): an
// open reservation takes matching on-demand launches burst did not aim at
// it, and rows from before burst-resume sent the reservation have none. A
// row that has one keeps it.
func (l *Ledger) noteReservations(ctx context.Context, insts []cloud.Instance, known map[string]bool) error {
	in := map[string]string{}
	for _, x := range insts {
		if x.Reservation != "" && known[x.ID] {
			in[x.ID] = x.Reservation
		}
	}
	if len(in) == 0 {
		return nil
	}
	return l.o.Store.NoteReservations(ctx, in)
}
