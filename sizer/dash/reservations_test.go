package dash

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/store"
)

// TestMoneyReservations: the Money view's capacity reservations, through
// a real store, against figures worked out by hand. Now is Dec 10 12:00
// UTC, the month began Dec 1 00:00.
//
//	cr-odcr   ODCR, 2 x $10/h from Dec 10 02:00, active: 10 h x 2 = 20 reserved h, $200
//	          i-a runs in it 03:00-06:00 (3 h), i-b from 05:00 on (7 h to now): 10 h used, 50%, idle 10 h = $100
//	cr-block  Capacity Block, 1 x 24 h Dec 10 00:00 - Dec 11 00:00 for $240 ($10/h): 12 reserved h so far, $120
//	          i-c runs in it 08:00-10:00: 2 h used, 16.7%, idle 10 h = $100
//	cr-old    ODCR, 1 x $4/h Nov 30 12:00 - Dec 1 06:00 (cancelled): 6 h in December, $24
//	          i-d runs in it Nov 30 13:00 - Dec 1 02:00: 2 h of it in December, 33.3%, idle 4 h = $16
//	cr-gone   ended Nov 20: not this month's
//	i-e       a spot instance in no reservation: no reservation's use
//
// An account's scope shows none (a reservation is no account's).
func TestMoneyReservations(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	day := func(d, h int) time.Time { return time.Date(2026, 12, d, h, 0, 0, 0, time.UTC) }
	nov := func(d, h int) time.Time { return time.Date(2026, 11, d, h, 0, 0, 0, time.UTC) }
	clock := day(10, 12)
	for _, r := range []store.Reservation{
		{ID: "cr-odcr", InstanceType: "p5.48xlarge", Zone: "us-east-1a", Count: 2, PriceUSD: 10, Start: day(10, 2), State: "active", Match: "targeted", Seen: clock, Type: "default"},
		{ID: "cr-block", InstanceType: "p5.48xlarge", Zone: "us-east-1a", Count: 1, PriceUSD: 10, Start: day(10, 0), End: day(11, 0), State: "active", Match: "targeted", Seen: clock, Type: "capacity-block"},
		{ID: "cr-old", InstanceType: "g5.xlarge", Zone: "us-east-1b", Count: 1, PriceUSD: 4, Start: nov(30, 12), End: day(1, 6), State: "cancelled", Match: "open", Seen: clock, Type: "default"},
		{ID: "cr-gone", InstanceType: "g5.xlarge", Zone: "us-east-1b", Count: 3, PriceUSD: 4, Start: nov(1, 0), End: nov(20, 0), State: "expired", Match: "open", Seen: clock, Type: "default"},
	} {
		if err := st.RecordReservation(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	run := func(id, typ, capacity, res string, from, to time.Time) {
		t.Helper()
		ev := sizerapi.InstanceEvent{InstanceID: id, Node: "n-" + id, InstanceType: typ, Zone: "us-east-1a", Capacity: capacity, Reservation: res,
			Account: "nlp", Time: from.Add(-time.Minute)}
		if err := st.RecordInstance(ctx, store.Launch{Event: ev, PriceUSD: 1, Source: "resume"}); err != nil {
			t.Fatal(err)
		}
		if err := st.RecordState(ctx, id, "running", from); err != nil {
			t.Fatal(err)
		}
		if !to.IsZero() {
			if err := st.RecordState(ctx, id, "shutting-down", to); err != nil {
				t.Fatal(err)
			}
			if _, err := st.RecordEnd(ctx, id, to, sizerapi.SourceEC2, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	run("i-a", "p5.48xlarge", "reserved", "cr-odcr", day(10, 3), day(10, 6))
	run("i-b", "p5.48xlarge", "reserved", "cr-odcr", day(10, 5), time.Time{})
	run("i-c", "p5.48xlarge", "reserved", "cr-block", day(10, 8), day(10, 10))
	run("i-d", "g5.xlarge", "reserved", "cr-old", nov(30, 13), day(1, 2))
	run("i-e", "g5.xlarge", "spot", "", day(10, 1), day(10, 4))
	pol, err := sizing.New(catalog.Default(), "us-east-1", []sizing.Class{{Name: "g5", GPUModel: "a10g", GPUsPerNode: 1, MaxNodes: 2, InstanceTypes: []string{"g5.xlarge"}}}, sizing.Params{})
	if err != nil {
		t.Fatal(err)
	}
	src, err := New(Options{Store: st, Policy: pol, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	v, err := src.Money(ctx, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	want := []sizerapi.ReservationMoney{
		{ReservationID: "cr-old", Kind: "odcr", Match: "open", InstanceType: "g5.xlarge", Zone: "us-east-1b", Count: 1, State: "cancelled", PriceUSD: 4,
			ReservedHours: 6, UsedHours: 2, UsedPct: 33.3, Instances: 1, CostUSD: 24, IdleUSD: 16},
		{ReservationID: "cr-block", Kind: "capacity-block", Match: "targeted", InstanceType: "p5.48xlarge", Zone: "us-east-1a", Count: 1, State: "active", PriceUSD: 10,
			ReservedHours: 12, UsedHours: 2, UsedPct: 16.7, Instances: 1, CostUSD: 120, IdleUSD: 100},
		{ReservationID: "cr-odcr", Kind: "odcr", Match: "targeted", InstanceType: "p5.48xlarge", Zone: "us-east-1a", Count: 2, State: "active", PriceUSD: 10,
			ReservedHours: 20, UsedHours: 10, UsedPct: 50, Instances: 2, CostUSD: 200, IdleUSD: 100},
	}
	if !reflect.DeepEqual(v.Reservations, want) {
		t.Errorf("reservations:\n got %+v\nwant %+v", v.Reservations, want)
	}
	acct, err := src.Money(ctx, Scope{Account: "nlp"})
	if err != nil {
		t.Fatal(err)
	}
	if acct.Reservations == nil || len(acct.Reservations) != 0 {
		t.Errorf("an account's scope shows reservations %+v, want an empty list", acct.Reservations)
	}
}
