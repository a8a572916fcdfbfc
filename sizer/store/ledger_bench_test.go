package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/billing"
)

// BenchmarkLedgerMonth: a month of 5,000 instances (three state events
// each, one job run each): reading the ledger and splitting every bill,
// what every budget check and report does; on SQLite, then PostgreSQL.
func BenchmarkLedgerMonth(b *testing.B) {
	benchDrivers(b, benchLedgerMonth)
}

func benchLedgerMonth(b *testing.B, s *Store) {
	ctx := context.Background()
	now := time.Date(2026, 3, 28, 0, 0, 0, 0, time.UTC)
	n := 5000
	if testing.Short() { // make test's smoke run: the smallest size, once
		n = 100
	}
	for i := range n {
		t0 := billing.MonthStart(now).Add(time.Duration(i) * 7 * time.Minute)
		id, node, job := fmt.Sprintf("i-%06d", i), fmt.Sprintf("l4-%d", i%64+1), fmt.Sprint(i)
		if err := s.RecordLaunch(ctx, sizerapi.InstanceEvent{InstanceID: id, Node: node, InstanceType: "g6.xlarge", Capacity: "spot", Account: fmt.Sprint("acct", i%20), Time: t0,
			Job: &sizerapi.Job{JobID: job, Account: fmt.Sprint("acct", i%20), User: "u"}}, 0.4); err != nil {
			b.Fatal(err)
		}
		for _, st := range []struct {
			s string
			d time.Duration
		}{{"pending", 0}, {"running", 20 * time.Second}, {"shutting-down", 5 * time.Minute}} {
			s.RecordState(ctx, id, st.s, t0.Add(st.d))
		}
		s.RecordRun(ctx, sizerapi.JobRun{JobID: job, Nodes: []string{node}, Account: fmt.Sprint("acct", i%20), Start: t0.Add(time.Minute), End: t0.Add(4 * time.Minute)})
		s.RecordEnd(ctx, id, t0.Add(5*time.Minute), sizerapi.SourceEC2, "")
	}
	b.ResetTimer()
	for b.Loop() {
		rows, err := s.Rows(ctx, billing.MonthStart(now), now)
		if err != nil || len(rows) != n {
			b.Fatalf("%d rows %v", len(rows), err)
		}
		// the month's charges by account, as sizer/spend sums them
		byAccount := map[string]float64{}
		for _, r := range rows {
			in := r.Instance
			for _, c := range in.Charges(billing.MonthStart(now), billing.MonthStart(now).AddDate(0, 1, 0), now, billing.OwnerLaunchingJob) {
				byAccount[c.Account] += c.USD
			}
		}
	}
	b.ReportMetric(float64(n), "instances")
}
