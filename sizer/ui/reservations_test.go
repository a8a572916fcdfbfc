package ui_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/store"
)

// addReservation gives a rig's store a Capacity Block of 2 g6.12xlarge
// from 6 h before now at $3/h each, and one instance that ran in it for the
// 2 h before the last hour (every page test then checks its figures).
func addReservation(t *testing.T, ctx context.Context, st *store.Store, now time.Time) {
	t.Helper()
	start := now.Add(-6 * time.Hour).Truncate(time.Second)
	if err := st.RecordReservation(ctx, store.Reservation{ID: "cr-0block00000000001", InstanceType: "g6.12xlarge", Zone: "us-east-1a", Count: 2, PriceUSD: 3,
		Start: start, End: start.Add(24 * time.Hour), State: "active", Match: "targeted", Seen: now, Type: "capacity-block"}); err != nil {
		t.Fatal(err)
	}
	ev := sizerapi.InstanceEvent{InstanceID: "i-0block000000000001", Node: "l4x4-9", InstanceType: "g6.12xlarge", Zone: "us-east-1a", Capacity: "reserved",
		Reservation: "cr-0block00000000001", Time: now.Add(-3 * time.Hour)}
	if err := st.RecordInstance(ctx, store.Launch{Event: ev, PriceSource: store.PriceReservation}); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordState(ctx, ev.InstanceID, "running", now.Add(-3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordEnd(ctx, ev.InstanceID, now.Add(-time.Hour), sizerapi.SourceEC2, ""); err != nil {
		t.Fatal(err)
	}
}

// TestMoneyPageReservations: the admin's Money page lists the block with
// its reserved and used hours and idle cost (each figure checked against
// /v1/money by TestLoginAndPagesMatchTheViews); an account's page has no
// reservation section.
func TestMoneyPageReservations(t *testing.T) {
	r := newRig(t, false)
	c := r.browser(t)
	r.login(t, c, r.admin)
	_, body, _ := get(t, c, r.srv.URL+"/ui/money")
	// 2 x 6 h reserved, 2 h used: 16.7%, idle 10 h x $3 = $30.00 of $36.00
	for _, want := range []string{"Capacity reservations", `data-k="reservations/0/reservation_id">cr-0block00000000001<`, "Capacity Block (prepaid)",
		`data-k="reservations/0/reserved_hours">12.00<`, `data-k="reservations/0/used_hours">2.00<`, `data-k="reservations/0/used_pct">16.7%<`,
		`data-k="reservations/0/cost_usd">$36.00<`, `data-k="reservations/0/idle_usd">$30.00<`} {
		if !strings.Contains(body, want) {
			t.Errorf("the Money page lacks %q", want)
		}
	}
	acct := r.browser(t)
	tok, _ := auth.AccountToken(r.admin, "vision", time.Now().Add(time.Hour), 0)
	r.login(t, acct, tok)
	if _, body, _ := get(t, acct, r.srv.URL+"/ui/money"); strings.Contains(body, "cr-0block") || strings.Contains(body, "Capacity reservations") {
		t.Error("an account's Money page shows the cluster's reservations")
	}
}
