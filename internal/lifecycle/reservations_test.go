package lifecycle

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/config"
)

type fakeReservations struct {
	rs  []cloud.Reservation
	err error
}

func (f fakeReservations) Reservations(context.Context, []string) ([]cloud.Reservation, error) {
	return f.rs, f.err
}

func TestWithReservations(t *testing.T) {
	ranked := []cloud.Offering{{InstanceType: "g6.xlarge", Zone: "us-east-1a", Capacity: capacity.Spot}, {InstanceType: "g5.xlarge", Zone: "us-east-1b", Capacity: capacity.Spot}}
	subnets := map[string]string{"us-east-1a": "subnet-a", "us-east-1b": "subnet-b"}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rs := []cloud.Reservation{
		{ID: "cr-g5", InstanceType: "g5.xlarge", Zone: "us-east-1b", State: "active", Available: 2},
		{ID: "cr-g6", InstanceType: "g6.xlarge", Zone: "us-east-1a", State: "active", Available: 1},
		{ID: "cr-old", InstanceType: "g6.xlarge", Zone: "us-east-1a", State: "expired"},
		{ID: "cr-other", InstanceType: "p5.48xlarge", Zone: "us-east-1a", State: "active", Available: 4},
		{ID: "cr-elsewhere", InstanceType: "g6.xlarge", Zone: "us-east-1c", State: "active", Available: 4},
	}
	keys := func(offs []cloud.Offering) []string {
		var out []string
		for _, o := range offs {
			out = append(out, o.Key())
		}
		return out
	}
	cases := []struct {
		name string
		res  config.Reservations
		lst  ReservationLister
		need int
		want []string
	}{
		{"none", config.Reservations{}, fakeReservations{rs: rs}, 1, keys(ranked)},
		{"ranked type first, then spot", config.Reservations{IDs: []string{"x"}}, fakeReservations{rs: rs}, 1,
			append([]string{"g6.xlarge/us-east-1a/reserved/cr-g6", "g5.xlarge/us-east-1b/reserved/cr-g5"}, keys(ranked)...)},
		{"one without room for the job is skipped", config.Reservations{IDs: []string{"x"}}, fakeReservations{rs: rs}, 2,
			append([]string{"g5.xlarge/us-east-1b/reserved/cr-g5"}, keys(ranked)...)},
		{"only: no fallback, a full one still tried", config.Reservations{IDs: []string{"x"}, Only: true}, fakeReservations{rs: rs}, 2,
			[]string{"g6.xlarge/us-east-1a/reserved/cr-g6", "g5.xlarge/us-east-1b/reserved/cr-g5"}},
		{"describe fails: fall back", config.Reservations{IDs: []string{"x"}}, fakeReservations{err: errors.New("throttled")}, 1, keys(ranked)},
		{"describe fails, only: nothing", config.Reservations{IDs: []string{"x"}, Only: true}, fakeReservations{err: errors.New("throttled")}, 1, nil},
		{"resource group: each ranked pool", config.Reservations{ResourceGroupARN: "arn:aws:resource-groups:us-east-1:123456789012:group/g"}, nil, 1,
			append([]string{"g6.xlarge/us-east-1a/reserved/arn:aws:resource-groups:us-east-1:123456789012:group/g",
				"g5.xlarge/us-east-1b/reserved/arn:aws:resource-groups:us-east-1:123456789012:group/g"}, keys(ranked)...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := &config.Class{Name: "c", Zones: []string{"us-east-1a", "us-east-1b"}, Reservations: tc.res}
			got := withReservations(context.Background(), slog.New(slog.DiscardHandler), tc.lst, cl, ranked, subnets, tc.need, time.Hour, now)
			if g := keys(got); len(g) != len(tc.want) || (len(g) > 0 && !slices.Equal(g, tc.want)) {
				t.Errorf("got %v, want %v", g, tc.want)
			}
			for _, o := range got {
				if o.Capacity == capacity.Reserved && (o.PriceUSD != 0 || o.SubnetID != subnets[o.Zone]) {
					t.Errorf("reserved offering %+v, want price 0 and the zone's subnet", o)
				}
			}
		})
	}
}

// A Capacity Block ranks before everything while it is active, and takes a
// job only if the job's time limit ends before EC2 warns that it will
// reclaim the block, 40 minutes before its end.
func TestWithReservationsCapacityBlock(t *testing.T) {
	ranked := []cloud.Offering{{InstanceType: "p5.48xlarge", Zone: "us-east-1a", Capacity: capacity.OnDemand}}
	subnets := map[string]string{"us-east-1a": "subnet-a"}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	end := now.Add(3 * time.Hour) // warned of at 14:20
	rs := []cloud.Reservation{
		{ID: "cr-odcr", InstanceType: "p5.48xlarge", Zone: "us-east-1a", State: "active", Available: 4, Type: "default"},
		{ID: "cr-block", InstanceType: "p5.48xlarge", Zone: "us-east-1a", State: "active", Available: 1, Type: "capacity-block", End: end},
		{ID: "cr-later", InstanceType: "p5.48xlarge", Zone: "us-east-1a", State: "scheduled", Available: 0, Type: "capacity-block", End: end.Add(24 * time.Hour)},
	}
	cl := &config.Class{Name: "c", Zones: []string{"us-east-1a"}, Reservations: config.Reservations{IDs: []string{"cr-odcr"},
		CapacityBlocks: []config.CapacityBlock{{ID: "cr-block", PriceUSD: 1}, {ID: "cr-later", PriceUSD: 1}}}}
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name  string
		limit time.Duration
		want  []string
	}{
		{"fits: the block first", 140 * time.Minute, []string{"cr-block", "cr-odcr", ""}},
		{"one minute too long: skipped", 141 * time.Minute, []string{"cr-odcr", ""}},
		{"no time limit: never on a block", 0, []string{"cr-odcr", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := withReservations(context.Background(), log, fakeReservations{rs: rs}, cl, ranked, subnets, 1, tc.limit, now)
			var ids []string
			for _, o := range got {
				ids = append(ids, o.Reservation)
				if (o.Reservation == "cr-block") != !o.BlockEnd.IsZero() || (o.Reservation == "cr-block" && !o.BlockEnd.Equal(end)) {
					t.Errorf("offering %s: BlockEnd %v, want %v on the block only", o.Key(), o.BlockEnd, end)
				}
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("reservations in order %q, want %q", ids, tc.want)
			}
		})
	}
}
