package store

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/admit"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm"
)

// Resumes racing for the last dollars of one budget through two store
// handles on one database (two sizers, or two clusters sharing the
// account) get exactly one fit; the others are held with the reason.
func TestAdmissionsRaceForTheLastDollars(t *testing.T) { forDrivers(t, testAdmissionsRace) }

func testAdmissionsRace(t *testing.T, d driverCase) {
	ctx := context.Background()
	tg := d.fresh(t)
	handles := []*Store{tg.open(t), tg.open(t)}
	noSpend := func(context.Context, string) (sizerapi.AccountSpend, error) {
		return sizerapi.AccountSpend{Account: "nlp"}, nil
	}
	for round := range 10 {
		clusters := [2]string{"", ""} // two sizers of one cluster, then two clusters
		if round%2 == 1 {
			clusters = [2]string{"east", "west"}
		}
		var ctls []*admit.Controller
		for i, h := range handles {
			ctls = append(ctls, admit.New(admit.Options{Shared: h, Cluster: clusters[i], Spend: noSpend,
				Budgets: map[string]admit.Budget{"nlp": {CapUSD: 10}}}))
		}
		const racers = 16
		start := make(chan struct{})
		var wg sync.WaitGroup
		res := make([]admit.Decision, racers)
		errs := make([]error, racers)
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				// $1.50/h for 4h: $6 of the $10 each; one fits
				res[i], errs[i] = ctls[i%2].Admit(ctx, admit.Need{JobID: uint32(100*round + i + 1), Account: "nlp", User: "ann", GPUs: 1, Nodes: 1,
					PriceUSD: 1.5, TimeLimit: 4 * time.Hour}, nil)
			}()
		}
		close(start)
		wg.Wait()
		admitted := 0
		for i := range racers {
			if errs[i] != nil {
				t.Fatalf("round %d racer %d: %v", round, i, errs[i])
			}
			if res[i].Admitted {
				admitted++
			} else if !strings.Contains(res[i].Reason, "account nlp has $6.00 of its $10.00 monthly budget spent or reserved") {
				t.Errorf("round %d racer %d held for %q", round, i, res[i].Reason)
			}
		}
		if admitted != 1 {
			t.Errorf("round %d (clusters %q): %d of %d racers admitted, want exactly 1", round, clusters, admitted, racers)
		}
		// the next round starts from an empty document
		if err := handles[0].UpdateAdmissions(ctx, func([]byte) ([]byte, bool, error) { return []byte{}, true, nil }); err != nil {
			t.Fatal(err)
		}
	}
}

// Two clusters share an account's budget: one cluster's pass over its own
// Slurm jobs never prunes the other's reservation, so when one spends the
// budget the other's next job is held with the reason.
func TestTwoClustersShareABudget(t *testing.T) { forDrivers(t, testTwoClustersShareABudget) }

func testTwoClustersShareABudget(t *testing.T, d driverCase) {
	ctx := context.Background()
	tg := d.fresh(t)
	east, west := tg.open(t), tg.open(t)
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	noSpend := func(context.Context, string) (sizerapi.AccountSpend, error) {
		return sizerapi.AccountSpend{Account: "nlp"}, nil
	}
	ctl := func(s *Store, cluster string) *admit.Controller {
		return admit.New(admit.Options{Shared: s, Cluster: cluster, Spend: noSpend, Now: clock, Budgets: map[string]admit.Budget{"nlp": {CapUSD: 10}}})
	}
	e, w := ctl(east, "east"), ctl(west, "west")
	need := func(id uint32) admit.Need {
		return admit.Need{JobID: id, Account: "nlp", User: "ann", GPUs: 1, Nodes: 1, PriceUSD: 2, TimeLimit: 4 * time.Hour} // $8
	}
	running := func(id uint32) []slurm.Job {
		return []slurm.Job{{ID: id, Account: "nlp", User: "ann", State: "RUNNING"}}
	}
	if d, err := e.Admit(ctx, need(7), running(7)); err != nil || !d.Admitted {
		t.Fatalf("east's job: %+v %v", d, err)
	}
	// past the grace period; west's Slurm has a job 7 of its own, not running
	now = now.Add(10 * time.Minute)
	d2, err := w.Admit(ctx, need(8), []slurm.Job{{ID: 7, Account: "nlp", State: "COMPLETED"}})
	if err != nil {
		t.Fatal(err)
	}
	if d2.Admitted || !strings.Contains(d2.Reason, "account nlp has $8.00 of its $10.00 monthly budget spent or reserved") {
		t.Errorf("west's job while east's holds $8 of $10: %+v", d2)
	}
	rs, err := w.Reservations()
	if err != nil || len(rs) != 1 || rs[0].Cluster != "east" || rs[0].JobID != 7 {
		t.Errorf("reservations seen from west: %+v %v", rs, err)
	}
	// east's job ends (its Slurm no longer runs it): west's next job fits
	now = now.Add(10 * time.Minute)
	if _, err := e.Admit(ctx, need(9), nil); err != nil { // east's pass prunes its ended job 7 (job 9 fits, $8)
		t.Fatal(err)
	}
	if err := e.Forget(9); err != nil {
		t.Fatal(err)
	}
	d3, err := w.Admit(ctx, need(10), nil)
	if err != nil || !d3.Admitted {
		t.Errorf("west's job after east's ended: %+v %v", d3, err)
	}
}
