package spend_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/admit"
	"github.com/burst-hpc/burst/internal/pgtest"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/spend"
	"github.com/burst-hpc/burst/sizer/store"
)

// TestTwoClustersJobsChargedApart: two clusters on one PostgreSQL share
// account nlp's budget, and each runs a job 7 (Slurm numbers each
// cluster's jobs from 1) on its node l4-1. What each job 7 was charged
// counts against its own reservation only: the account's spend keys jobs
// by cluster (sizerapi.JobKey), and a third job that does not fit beside
// both reservations is held. Keyed by job id alone, each job 7 would be
// credited with both jobs' charges, the reservations under-counted, and
// the job admitted over the cap.
func TestTwoClustersJobsChargedApart(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Start(t).NewDatabase(t)
	open := func(cluster string) *store.Store {
		st, err := store.OpenConfig(ctx, store.Config{Driver: store.DriverPostgres, Postgres: store.Postgres{URL: dsn}, Cluster: cluster})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	east, west := open("east"), open("west")
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	now := t0.Add(11 * time.Minute)
	const price, reserve = 3.6, 8.0 // $/h; each job 7's reservation
	for _, c := range []struct {
		st *store.Store
		id string
	}{{east, "i-east"}, {west, "i-west"}} {
		if err := c.st.RecordInstance(ctx, store.Launch{PriceUSD: price, Event: sizerapi.InstanceEvent{InstanceID: c.id, Node: "l4-1", InstanceType: "g6.xlarge", Zone: "us-east-1a",
			Capacity: "on-demand", PriceUSD: price, Account: "nlp", User: "ann", Time: t0, Job: &sizerapi.Job{JobID: "7", Account: "nlp", User: "ann", GPUsPerNode: 1}}}); err != nil {
			t.Fatal(err)
		}
		if err := c.st.RecordState(ctx, c.id, "running", t0); err != nil {
			t.Fatal(err)
		}
		if err := c.st.RecordRun(ctx, sizerapi.JobRun{JobID: "7", Account: "nlp", User: "ann", Nodes: []string{"l4-1"}, GPUsPerNode: 1, Start: t0.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := spend.Read(ctx, west, billing.OwnerLaunchingJob, now)
	if err != nil {
		t.Fatal(err)
	}
	sp := m.Spend("nlp")
	each := price * 11 / 60 // 11 minutes of each instance, all job 7's (its run and its launch's idle minute)
	if math.Abs(sp.SpentUSD-2*each) > 1e-6 || math.Abs(sp.Jobs["east/7"]-each) > 1e-6 || math.Abs(sp.Jobs["west/7"]-each) > 1e-6 || len(sp.Jobs) != 2 {
		t.Fatalf("nlp's spend %+v, want $%.2f for each cluster's job 7", sp, each)
	}
	// both job 7s were admitted, one by each cluster, against a $23 cap:
	// $2 x 0.66 spent + $7.34 x 2 left of their reservations = $16; a
	// third job's $8 does not fit
	clock := func() time.Time { return now }
	ctl := func(st *store.Store, cluster string, spent sizerapi.AccountSpend) *admit.Controller {
		return admit.New(admit.Options{Shared: st, Cluster: cluster, Now: clock, Budgets: map[string]admit.Budget{"nlp": {CapUSD: 23}},
			Spend: func(context.Context, string) (sizerapi.AccountSpend, error) { return spent, nil }})
	}
	need := func(id uint32) admit.Need {
		return admit.Need{JobID: id, Account: "nlp", User: "ann", GPUs: 1, Nodes: 1, PriceUSD: reserve / 4, TimeLimit: 4 * time.Hour}
	}
	running7 := []slurm.Job{{ID: 7, Account: "nlp", User: "ann", State: "RUNNING", Nodes: "l4-1"}}
	for _, c := range []*admit.Controller{ctl(east, "east", sizerapi.AccountSpend{Account: "nlp"}), ctl(west, "west", sizerapi.AccountSpend{Account: "nlp"})} {
		if d, err := c.Admit(ctx, need(7), running7); err != nil || !d.Admitted {
			t.Fatalf("job 7: %+v %v", d, err)
		}
	}
	d, err := ctl(west, "west", sp).Admit(ctx, need(8), running7)
	if err != nil {
		t.Fatal(err)
	}
	if d.Admitted || !strings.Contains(d.Reason, "account nlp has $16.00 of its $23.00 monthly budget spent or reserved") {
		t.Errorf("west's job 8 beside both job 7s: %+v", d)
	}
	// the budgets API's reservations, read from either cluster, agree
	bs := m.Budgets(spend.BudgetOptions{Caps: map[string]float64{"nlp": 23}, Cluster: "west"}.On(west))
	if len(bs) != 1 || math.Abs(bs[0].ReservedUSD-2*(reserve-each)) > 1e-6 {
		t.Errorf("budgets %+v, want $%.2f reserved", bs, 2*(reserve-each))
	}
}
