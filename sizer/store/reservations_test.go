package store

import (
	"context"
	"maps"
	"math"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

func TestReservationsKeepTheirEnd(t *testing.T) { forDrivers(t, testReservationsKeepTheirEnd) }

func testReservationsKeepTheirEnd(t *testing.T, d driverCase) {
	ctx := context.Background()
	s := d.fresh(t).open(t)
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r := Reservation{ID: "cr-1", InstanceType: "p5.48xlarge", Zone: "us-east-1a", Count: 2, PriceUSD: 55.04, Start: start, State: "active", Match: "targeted", Seen: start}
	if err := s.RecordReservation(ctx, r); err != nil {
		t.Fatal(err)
	}
	// cancelled: the first end recorded stays, a later sync does not move it
	r.State, r.End, r.Seen = "cancelled", start.Add(90*time.Minute), start.Add(90*time.Minute)
	if err := s.RecordReservation(ctx, r); err != nil {
		t.Fatal(err)
	}
	r.End, r.Seen = start.Add(2*time.Hour), start.Add(2*time.Hour)
	if err := s.RecordReservation(ctx, r); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Reservations(ctx)
	if err != nil || len(rs) != 1 {
		t.Fatalf("Reservations = %+v, %v", rs, err)
	}
	got := rs[0]
	if !got.End.Equal(start.Add(90*time.Minute)) || got.State != "cancelled" || got.Count != 2 || !got.Start.Equal(start) {
		t.Errorf("stored %+v, want cancelled at 11:30 with 2 reserved from 10:00", got)
	}
	// 1.5 h x 2 instances x $55.04, used or not
	secs, usd := got.USD(start.Add(5 * time.Hour))
	if secs != 5400 || math.Abs(usd-1.5*2*55.04) > 1e-9 {
		t.Errorf("USD = %d s $%.4f, want 5400 s $%.4f", secs, usd, 1.5*2*55.04)
	}
}

// An instance's reservation is stored with its launch and kept: a later
// record without one (EC2's state, a backfill) leaves it; NoteReservations
// fills only a row that has none.
func TestInstanceReservationKept(t *testing.T) { forDrivers(t, testInstanceReservationKept) }

func testInstanceReservationKept(t *testing.T, d driverCase) {
	ctx := context.Background()
	s := d.fresh(t).open(t)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	launch := func(id, res, source string) {
		t.Helper()
		ev := sizerapi.InstanceEvent{InstanceID: id, Node: "n-" + id, InstanceType: "p5.48xlarge", Zone: "us-east-1a", Capacity: "reserved", Reservation: res, Time: at}
		if err := s.RecordInstance(ctx, Launch{Event: ev, PriceSource: PriceReservation, Source: source}); err != nil {
			t.Fatal(err)
		}
	}
	launch("i-1", "cr-1", "resume")
	launch("i-1", "", "backfill")
	launch("i-2", "", "resume")
	launch("i-3", "", "resume")
	if err := s.NoteReservations(ctx, map[string]string{"i-1": "cr-other", "i-2": "cr-2"}); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Rows(ctx, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.ID] = r.Reservation
	}
	if want := map[string]string{"i-1": "cr-1", "i-2": "cr-2", "i-3": ""}; !maps.Equal(got, want) {
		t.Errorf("reservations %v, want %v", got, want)
	}
}
