package dash

import (
	"context"
	"sort"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/spend"
	"github.com/burst-hpc/burst/sizer/store"
)

// The Money page's capacity reservations (issue 29). The ledger bills a
// reservation as EC2 does (sizer/ledger): an On-Demand Capacity
// Reservation per reserved instance-hour at the on-demand rate, used or
// not; a Capacity Block its prepaid price, spread over its window at the
// rate that adds up to it. An instance in a reservation costs nothing
// itself, and its ledger row names the reservation. A reservation's use is
// its instances' running time in it; what is left of its reserved hours,
// at its rate, is its idle cost: money paid for capacity nothing ran on.

// reservationMoney is the month's figures of the cluster's capacity
// reservations for every account's scope; an account's scope gets none
// (a reservation is the cluster's, no account's).
func (s *Source) reservationMoney(ctx context.Context, sc Scope, t spend.Tally) ([]sizerapi.ReservationMoney, error) {
	out := []sizerapi.ReservationMoney{}
	if !sc.All() {
		return out, nil
	}
	rs, err := s.o.Store.Reservations(ctx)
	if err != nil {
		return nil, err
	}
	return append(out, ReservationUse(rs, t.Reserved, t.From, t.Now)...), nil
}

// ReservationUse is each reservation's use and idle cost within [from,
// now): its reserved hours (count x its time inside the span), the
// running time inside it of the instances whose rows name it, and their
// cost at its rate. Reservations with no time in the span are left out;
// the rest come in order of their start.
func ReservationUse(rs []store.Reservation, rows []store.Row, from, now time.Time) []sizerapi.ReservationMoney {
	type use struct {
		secs  float64
		insts map[string]bool
	}
	spans := map[string][2]time.Time{}
	var order []store.Reservation
	for _, r := range rs {
		lo, hi := billing.Later(r.Start, from), now
		if !r.End.IsZero() {
			hi = billing.Earlier(r.End, now)
		}
		if !hi.After(lo) {
			continue
		}
		spans[r.ID] = [2]time.Time{lo, hi}
		order = append(order, r)
	}
	used := map[string]*use{}
	for _, row := range rows {
		sp, ok := spans[row.Reservation]
		if !ok {
			continue
		}
		for _, seg := range row.Segments() {
			end := seg.End
			if end.IsZero() {
				end = now
			}
			in := overlap(seg.Start, end, sp[0], sp[1])
			if in <= 0 {
				continue
			}
			u := used[row.Reservation]
			if u == nil {
				u = &use{insts: map[string]bool{}}
				used[row.Reservation] = u
			}
			u.secs += in.Seconds()
			u.insts[row.ID] = true
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].Start.Before(order[j].Start) })
	out := make([]sizerapi.ReservationMoney, 0, len(order))
	for _, r := range order {
		sp := spans[r.ID]
		reserved := float64(r.Count) * sp[1].Sub(sp[0]).Seconds()
		rm := sizerapi.ReservationMoney{ReservationID: r.ID, Kind: "odcr", Match: r.Match, InstanceType: r.InstanceType, Zone: r.Zone,
			Count: r.Count, State: r.State, PriceUSD: round4(r.PriceUSD)}
		if r.Type == capacity.BlockType {
			rm.Kind = capacity.BlockType
		}
		ran := 0.0
		if u := used[r.ID]; u != nil {
			ran, rm.Instances = min(u.secs, reserved), len(u.insts)
		}
		rm.ReservedHours, rm.UsedHours = round4(reserved/3600), round4(ran/3600)
		if reserved > 0 {
			rm.UsedPct = round1(100 * ran / reserved)
		}
		rm.CostUSD = round4(reserved / 3600 * r.PriceUSD)
		rm.IdleUSD = round4((reserved - ran) / 3600 * r.PriceUSD)
		out = append(out, rm)
	}
	return out
}
