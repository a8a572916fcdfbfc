package store

import (
	"context"
	"math"
	"testing"
	"time"
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
