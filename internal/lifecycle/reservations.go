package lifecycle

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/config"
)

// ReservationLister describes capacity reservations (the EC2 provider).
type ReservationLister interface {
	Reservations(ctx context.Context, ids []string) ([]cloud.Reservation, error)
}

// reservationReason is why a reserved offering ranks first.
const reservationReason = "capacity reservation: prepaid whether used or not, so its marginal price is 0"

// withReservations puts the class's capacity reservations before the
// ranked offerings (their marginal price is 0: the reservation is paid
// whether used or not), or, with reservations.only, in their place. need
// is how many instances one launch takes. A named reservation is used
// while it is active, its type is one the sizer ranked for the job and its
// zone one of the class's; with spot or on-demand to fall back to, one
// without room for need is skipped (DescribeCapacityReservations says so
// without a launch). A resource group is targeted for each ranked type
// and zone. The reserved offerings keep the sizer's order of types, the
// Capacity Blocks first (they end: use them while they last).
//
// A Capacity Block takes the job only if its time limit (limit; 0, none,
// never fits) ends before EC2's warning that it will reclaim the block
// (capacity.BlockNoticeLead before its end: burst-sizer evacuates the
// block's nodes then, internal/blockwatch), now being now.
func withReservations(ctx context.Context, log *slog.Logger, lister ReservationLister, cl *config.Class, ranked []cloud.Offering, subnets map[string]string,
	need int, limit time.Duration, now time.Time) []cloud.Offering {
	res := cl.Reservations
	if !res.Any() {
		return ranked
	}
	rank := map[string]int{} // instance type -> its first rank
	type tz struct{ typ, zone string }
	var pools []tz
	seen := map[tz]bool{}
	for i, o := range ranked {
		if _, ok := rank[o.InstanceType]; !ok {
			rank[o.InstanceType] = i
		}
		if k := (tz{o.InstanceType, o.Zone}); !seen[k] {
			seen[k] = true
			pools = append(pools, k)
		}
	}
	var out []cloud.Offering
	add := func(r cloud.Reservation) {
		o := cloud.Offering{InstanceType: r.InstanceType, Zone: r.Zone, SubnetID: subnets[r.Zone], Capacity: capacity.Reserved,
			Reservation: r.ID, Reason: reservationReason}
		if r.Type == capacity.BlockType {
			o.BlockEnd, o.Reason = r.End, blockReason
		}
		out = append(out, o)
	}
	if ids := append(slices.Clone(res.IDs), res.BlockIDs()...); len(ids) > 0 {
		var rs []cloud.Reservation
		var err error
		if lister == nil {
			log.Warn("the class names capacity reservations but the cloud cannot describe them; skipping them")
		} else if rs, err = lister.Reservations(ctx, ids); err != nil {
			log.Warn("describing the class's capacity reservations failed; skipping them", "err", err)
		}
		sort.SliceStable(rs, func(i, j int) bool {
			a, b := rs[i], rs[j]
			if ab, bb := a.Type == capacity.BlockType, b.Type == capacity.BlockType; ab != bb {
				return ab
			}
			if rank[a.InstanceType] != rank[b.InstanceType] {
				return rank[a.InstanceType] < rank[b.InstanceType]
			}
			return a.Available > b.Available
		})
		for _, r := range rs {
			_, ranked := rank[r.InstanceType]
			switch {
			case r.State != "active":
				log.Info("capacity reservation not active; skipped", "reservation", r.ID, "state", r.State)
			case !ranked || !slices.Contains(cl.Zones, r.Zone) || subnets[r.Zone] == "":
				log.Info("capacity reservation's type or zone is not one the job may use; skipped", "reservation", r.ID, "type", r.InstanceType, "zone", r.Zone)
			case r.Type == capacity.BlockType && !fitsBlock(r, limit, now):
				log.Info("the job's time limit runs past the Capacity Block's end warning; skipped", "reservation", r.ID, "time_limit", limit,
					"warning", r.End.Add(-capacity.BlockNoticeLead))
			case r.Available < need && !res.Only:
				log.Info("capacity reservation full; falling back", "reservation", r.ID, "available", r.Available, "need", need)
			default:
				add(r)
			}
		}
	}
	if res.ResourceGroupARN != "" {
		for _, p := range pools {
			if subnets[p.zone] != "" {
				add(cloud.Reservation{ID: res.ResourceGroupARN, InstanceType: p.typ, Zone: p.zone})
			}
		}
	}
	if res.Only {
		return out
	}
	return append(out, ranked...)
}

// blockReason is why a Capacity Block's offering ranks first.
const blockReason = "capacity block: prepaid for its window, so its marginal price is 0; the job ends before EC2 warns of its end"

// fitsBlock reports whether a job of time limit limit, started now, ends
// before EC2's warning that it will reclaim block r; a job without a time
// limit never does.
func fitsBlock(r cloud.Reservation, limit time.Duration, now time.Time) bool {
	return limit > 0 && !r.End.IsZero() && !now.Add(limit).After(r.End.Add(-capacity.BlockNoticeLead))
}
