package store

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/billing"
)

// TestLedger: ends by source (EC2's time wins over burst's, never the
// reverse), state events deduplicated, a backfilled row completed by the
// resume's record arriving late, runs closed on requeue, intents found by
// token or by node.
func TestLedger(t *testing.T) { forDrivers(t, testLedger) }

func testLedger(t *testing.T, d driverCase) {
	ctx := context.Background()
	s := d.fresh(t).open(t)
	defer s.Close()
	t0 := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	// the reconciler backfills an instance before the journaled launch arrives
	if err := s.RecordInstance(ctx, Launch{Event: sizerapi.InstanceEvent{InstanceID: "i-1", Node: "l4-1", InstanceType: "g6.xlarge", Zone: "us-east-1a", Capacity: "spot", Account: "nlp", Time: t0},
		PriceUSD: 0.5, PriceSource: PriceSpotHistory, Source: "backfill", ClientToken: "burst-abc"}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordLaunch(ctx, sizerapi.InstanceEvent{InstanceID: "i-1", Node: "l4-1", InstanceType: "g6.xlarge", Capacity: "spot", Account: "nlp", PriceUSD: 0.4, Time: t0.Add(time.Second),
		Job: &sizerapi.Job{JobID: "7", User: "ann", Account: "nlp", Class: "l4", GPUsPerNode: 1, Nodes: 1}}, 0.4); err != nil {
		t.Fatal(err)
	}
	for _, st := range []string{"pending", "running", "running"} {
		at := t0
		if st == "running" {
			at = t0.Add(5 * time.Second)
		}
		if err := s.RecordState(ctx, "i-1", st, at); err != nil {
			t.Fatal(err)
		}
	}
	if known, err := s.RecordEnd(ctx, "i-1", t0.Add(10*time.Minute+300*time.Millisecond), sizerapi.SourceBurst, ""); err != nil || !known {
		t.Fatal(known, err)
	}
	if _, err := s.RecordEnd(ctx, "i-1", t0.Add(10*time.Minute), sizerapi.SourceEC2, "Client.UserInitiatedShutdown"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordEnd(ctx, "i-1", t0.Add(11*time.Minute), sizerapi.SourceBurst, ""); err != nil {
		t.Fatal(err)
	}
	// a run, requeued: the second start closes the first
	for _, r := range []sizerapi.JobRun{
		{JobID: "7", Account: "nlp", User: "ann", Nodes: []string{"l4-1"}, GPUsPerNode: 1, Start: t0.Add(10 * time.Second)},
		{JobID: "7", Account: "nlp", User: "ann", Nodes: []string{"l4-1"}, GPUsPerNode: 1, Start: t0.Add(5 * time.Minute)},
		{JobID: "7", Account: "nlp", User: "ann", Nodes: []string{"l4-1"}, GPUsPerNode: 1, Start: t0.Add(5 * time.Minute), End: t0.Add(9 * time.Minute)},
	} {
		if err := s.RecordRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := s.Rows(ctx, billing.MonthStart(t0), t0.Add(time.Hour))
	if err != nil || len(rows) != 1 {
		t.Fatalf("rows %+v %v", rows, err)
	}
	r := rows[0]
	if r.Source != "resume" || r.JobID != "7" || r.User != "ann" || r.Class != "l4" || r.PriceUSD != 0.5 || r.PriceSource != PriceSpotHistory ||
		!r.Launched.Equal(t0) || !r.End.Equal(t0.Add(10*time.Minute)) || r.EndSource != "ec2" || r.EndReason != "Client.UserInitiatedShutdown" || len(r.States) != 2 {
		t.Fatalf("row %+v", r)
	}
	if len(r.Runs) != 2 || !r.Runs[0].End.Equal(t0.Add(5*time.Minute)) || !r.Runs[1].End.Equal(t0.Add(9*time.Minute)) {
		t.Fatalf("runs %+v", r.Runs)
	}
	secs, usd, _ := billing.Total(r.Bill(t0.Add(time.Hour)))
	if secs != 595 || usd != 595*0.5/3600 {
		t.Fatalf("bill %d s $%v", secs, usd)
	}
	if u, err := s.Unsettled(ctx, time.Time{}); err != nil || len(u) != 0 {
		t.Fatalf("unsettled %+v %v", u, err)
	}
	in := sizerapi.LaunchIntent{ClientToken: "burst-abc", Nodes: []string{"l4-1"}, JobID: "7", Capacity: "spot", Time: t0.Add(-time.Second)}
	if err := s.RecordIntent(ctx, in); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.IntentFor(ctx, "burst-abc", "", t0); !ok || err != nil || got.JobID != "7" {
		t.Fatalf("by token: %+v %v %v", got, ok, err)
	}
	if got, ok, _ := s.IntentFor(ctx, "fleet-other", "l4-1", t0); !ok || got.ClientToken != "burst-abc" {
		t.Fatalf("by node: %+v %v", got, ok)
	}
	known, _ := s.Known(ctx, []string{"i-1", "i-2"})
	if !known["i-1"] || known["i-2"] {
		t.Fatalf("known %v", known)
	}
}

// Two clusters on one database: every launch is in Rows (spend and
// budgets are shared), each carries the cluster that recorded it, and
// Unsettled (what a cluster's ledger sync settles against its own EC2)
// holds only that cluster's open instances and those recorded before
// instances had a cluster; a later record of another cluster does not
// move an instance's cluster.
func TestLedgerPerCluster(t *testing.T) { forDrivers(t, testLedgerPerCluster) }

func testLedgerPerCluster(t *testing.T, d driverCase) {
	ctx := context.Background()
	tg := d.fresh(t)
	east, west, legacy := tg.open(t, ForCluster("east")), tg.open(t, ForCluster("west")), tg.open(t)
	t0 := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	launch := func(s *Store, id string) {
		t.Helper()
		if err := s.RecordLaunch(ctx, sizerapi.InstanceEvent{InstanceID: id, Node: "gpu-1", InstanceType: "g6.xlarge", Capacity: "spot", Account: "nlp", Time: t0}, 0.5); err != nil {
			t.Fatal(err)
		}
	}
	launch(east, "i-e")
	launch(west, "i-w")
	launch(legacy, "i-old")
	launch(west, "i-e") // e.g. a stray replay: i-e stays east's
	rows, err := east.Rows(ctx, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.ID] = r.Cluster
	}
	if want := map[string]string{"i-e": "east", "i-w": "west", "i-old": ""}; !maps.Equal(got, want) {
		t.Errorf("rows' clusters %v, want %v", got, want)
	}
	for s, want := range map[*Store][]string{east: {"i-e", "i-old"}, west: {"i-old", "i-w"}} {
		un, err := s.Unsettled(ctx, t0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range un {
			ids = append(ids, r.ID)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, want) {
			t.Errorf("cluster %q's unsettled %v, want %v", s.cluster, ids, want)
		}
	}
}
