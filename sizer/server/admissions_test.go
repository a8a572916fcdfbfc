package server

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/admit"
	"github.com/burst-hpc/burst/internal/pgtest"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/sizer/store"
)

// Two sizers on one PostgreSQL: resumes racing through either for the last
// dollars of a budget get exactly one fit (the admissions document is
// swapped by version in the database); a stale swap is a conflict and a
// malformed document is refused.
func TestSharedAdmissionsAcrossTwoSizers(t *testing.T) {
	pg := pgtest.Start(t)
	dsn := pg.NewDatabase(t)
	onPG := func(o *Options) {
		o.Store = store.Config{Driver: store.DriverPostgres, Postgres: store.Postgres{URL: dsn}}
	}
	a, b := start(t, nil, onPG), start(t, nil, onPG)
	ctx := context.Background()
	noSpend := func(context.Context, string) (sizerapi.AccountSpend, error) {
		return sizerapi.AccountSpend{Account: "nlp"}, nil
	}
	var ctls []*admit.Controller
	for i, f := range []*fixture{a, b} {
		ctls = append(ctls, admit.New(admit.Options{Shared: sizerclient.SharedAdmissions{C: f.client(t, f.token)}, Cluster: []string{"east", "west"}[i],
			Spend: noSpend, Budgets: map[string]admit.Budget{"nlp": {CapUSD: 10}}}))
	}
	const racers = 12
	start := make(chan struct{})
	var wg sync.WaitGroup
	res := make([]admit.Decision, racers)
	errs := make([]error, racers)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res[i], errs[i] = ctls[i%2].Admit(ctx, admit.Need{JobID: uint32(i + 1), Account: "nlp", User: "ann", GPUs: 1, Nodes: 1, PriceUSD: 1.5, TimeLimit: 4 * time.Hour}, nil)
		}()
	}
	close(start)
	wg.Wait()
	admitted := 0
	for i := range racers {
		if errs[i] != nil {
			t.Fatalf("racer %d: %v", i, errs[i])
		}
		if res[i].Admitted {
			admitted++
		} else if !strings.Contains(res[i].Reason, "has $6.00 of its $10.00 monthly budget spent or reserved") {
			t.Errorf("racer %d held for %q", i, res[i].Reason)
		}
	}
	if admitted != 1 {
		t.Errorf("%d of %d racers admitted through two sizers, want exactly 1", admitted, racers)
	}
	// both sizers' budgets show the one reservation
	for _, f := range []*fixture{a, b} {
		bs, err := f.srv.budgetStatuses(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range bs {
			if st.Account == "nlp" && st.ReservedUSD != 6 {
				t.Errorf("sizer %s: nlp reserved $%.2f, want $6", f.url, st.ReservedUSD)
			}
		}
	}
	cl := a.client(t, a.token)
	cur, err := cl.Admissions(ctx)
	if err != nil || cur.Version < 1 {
		t.Fatalf("admissions %+v %v", cur, err)
	}
	if _, err := cl.SwapAdmissions(ctx, sizerapi.Admissions{Doc: cur.Doc, Version: cur.Version - 1}); !errors.Is(err, sizerclient.ErrConflict) {
		t.Errorf("a stale swap: %v, want a conflict", err)
	}
	if _, err := cl.SwapAdmissions(ctx, sizerapi.Admissions{Doc: []byte(`{"entries": 3}`), Version: cur.Version}); err == nil || !strings.Contains(err.Error(), "want the admissions document") {
		t.Errorf("a malformed document: %v", err)
	}
	if _, err := b.client(t, a.token).Admissions(ctx); err == nil { // another sizer's token
		t.Error("admissions read with a token this sizer never issued")
	}
}
