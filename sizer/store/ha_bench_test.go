package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/admit"
	"github.com/burst-hpc/burst/internal/pgtest"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

// BenchmarkBudgetCheck: one admission decision against a capped budget
// (read the admissions document under its lock, decide, write it back)
// and the release of its reservation, on SQLite, then PostgreSQL; p50 and
// p99 of the decision.
func BenchmarkBudgetCheck(b *testing.B) {
	benchDrivers(b, benchBudgetCheck)
}

func benchBudgetCheck(b *testing.B, s *Store) {
	ctx := context.Background()
	noSpend := func(context.Context, string) (sizerapi.AccountSpend, error) {
		return sizerapi.AccountSpend{Account: "nlp", SpentUSD: 3}, nil
	}
	c := admit.New(admit.Options{Shared: s, Cluster: "c", Spend: noSpend, Budgets: map[string]admit.Budget{"nlp": {CapUSD: 1000}}})
	// 50 other admitted jobs in the document
	for i := range 50 {
		if _, err := c.Admit(ctx, admit.Need{JobID: uint32(1000 + i), Account: "nlp", GPUs: 1, Nodes: 1, PriceUSD: 1, TimeLimit: time.Hour}, nil); err != nil {
			b.Fatal(err)
		}
	}
	var lat []time.Duration
	id := uint32(1)
	for b.Loop() {
		t0 := time.Now()
		d, err := c.Admit(ctx, admit.Need{JobID: id, Account: "nlp", GPUs: 1, Nodes: 1, PriceUSD: 1, TimeLimit: time.Hour}, nil)
		lat = append(lat, time.Since(t0))
		if err != nil || !d.Admitted {
			b.Fatalf("%+v %v", d, err)
		}
		if err := c.Forget(id); err != nil {
			b.Fatal(err)
		}
		id++
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkFailover: two sizers on one PostgreSQL with the default
// election timings; the leader's database session dies (as when its
// process is killed) and the standby leads: seconds from the death to
// the new term.
func BenchmarkFailover(b *testing.B) {
	srv := pgtest.Start(b)
	dsn := srv.NewDatabase(b)
	tg := target{Config{Driver: DriverPostgres, Postgres: Postgres{URL: dsn}}}
	admin := adminDB(b, dsn)
	terms := make(chan string, 64)
	for _, who := range []string{"a", "b"} {
		s := tg.open(b)
		ctx, cancel := context.WithCancel(context.Background())
		b.Cleanup(cancel)
		go s.Lead(ctx, LeaderOptions{Holder: who}, func(context.Context, Term) { terms <- who })
	}
	<-terms
	var worst, total time.Duration
	for b.Loop() {
		t0 := time.Now()
		endLeaderSessions(b, admin)
		select {
		case <-terms:
		case <-time.After(time.Minute):
			b.Fatal("no new leader within a minute")
		}
		d := time.Since(t0)
		total += d
		worst = max(worst, d)
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "failover-s")
	b.ReportMetric(worst.Seconds(), "worst-s")
}
