package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/admit"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/sizer/store"
)

// TestLedgerAPI: the hooks' records (launch, job runs, a termination by
// burst's clock then EC2's) make the ledger, the spend of an account, its
// reservations and its forecast.
func TestLedgerAPI(t *testing.T) {
	f := start(t, map[string]float64{"nlp": 10})
	c, err := sizerclient.New(f.url, f.token, sizerclient.WithCAFile(f.caFile))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := f.clk.Now()
	t0 := now.Add(-time.Hour)
	if err := c.Intent(ctx, sizerapi.LaunchIntent{ClientToken: "burst-1", Nodes: []string{"l4-1"}, JobID: "7", Capacity: "on-demand", Time: t0}); err != nil {
		t.Fatal(err)
	}
	if err := c.Launched(ctx, sizerapi.InstanceEvent{InstanceID: "i-1", Node: "l4-1", InstanceType: "g6.xlarge", Zone: "us-east-1a", Capacity: "on-demand", PriceUSD: 3.6, Time: t0,
		Job: &sizerapi.Job{JobID: "7", User: "ann", Account: "nlp", Class: "l4-1x"}}); err != nil {
		t.Fatal(err)
	}
	// job 7 ran 10 minutes; job 8 of another account ran 20 on the warm node; still running
	for _, r := range []sizerapi.JobRun{
		{JobID: "7", Account: "nlp", User: "ann", Nodes: []string{"l4-1"}, Start: t0.Add(time.Minute), End: t0.Add(11 * time.Minute)},
		{JobID: "8", Account: "bio", User: "bob", Nodes: []string{"l4-1"}, Start: t0.Add(12 * time.Minute), End: t0.Add(32 * time.Minute)},
	} {
		if err := c.Run(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	sp, err := c.Spend(ctx, "nlp")
	if err != nil {
		t.Fatal(err)
	}
	// nlp pays job 7's 10 minutes and the 30 idle ones ($0.06/min): $2.40; burning $3.60/h (nobody on it)
	if math.Abs(sp.SpentUSD-2.4) > 1e-6 || math.Abs(sp.Jobs[sizerapi.JobKey("test", "7")]-2.4) > 1e-6 || sp.BurnUSDPerHour != 3.6 || sp.Source != "sizer" {
		t.Fatalf("spend %+v", sp)
	}
	// an admitted job of nlp reserved $5: it counts until it ends
	ac := admit.New(admit.Options{Dir: f.dir, Cluster: "test", Budgets: map[string]admit.Budget{"nlp": {CapUSD: 10}}, Now: f.clk.Now,
		Spend: func(context.Context, string) (sizerapi.AccountSpend, error) { return sp, nil }})
	if d, err := ac.Admit(ctx, admit.Need{JobID: 9, Account: "nlp", GPUs: 1, Nodes: 1, PriceUSD: 1.25, TimeLimit: 4 * time.Hour},
		[]slurm.Job{{ID: 9, State: "CONFIGURING", Account: "nlp"}}); err != nil || !d.Admitted {
		t.Fatalf("admit %+v %v", d, err)
	}
	// job 7's reservation of $2.50 (the file's entry, this cluster's)
	// counts what its $2.40 charged leaves: $0.10; then it ends
	if d, err := ac.Admit(ctx, admit.Need{JobID: 7, Account: "nlp", GPUs: 1, Nodes: 1, PriceUSD: 0.625, TimeLimit: 4 * time.Hour},
		[]slurm.Job{{ID: 7, State: "RUNNING", Account: "nlp"}}); err != nil || !d.Admitted {
		t.Fatalf("admit job 7 %+v %v", d, err)
	}
	if bs, err := c.Budgets(ctx); err != nil || len(bs) == 0 {
		t.Fatalf("budgets %+v %v", bs, err)
	} else {
		for _, b := range bs {
			if b.Account == "nlp" && math.Abs(b.ReservedUSD-5.1) > 1e-6 {
				t.Fatalf("nlp reserved $%.4f, want $5 of job 9 and $0.10 left of job 7's", b.ReservedUSD)
			}
		}
	}
	if err := ac.Forget(7); err != nil {
		t.Fatal(err)
	}
	bs, err := c.Budgets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var nlp sizerapi.BudgetStatus
	for _, b := range bs {
		if b.Account == "nlp" {
			nlp = b
		}
	}
	// $10 - $2.40 - $5 left at $3.60/h: 43 min 20 s
	if nlp.ReservedUSD != 5 || nlp.ForecastCapAt == nil || nlp.ForecastCapAt.Sub(now) != 43*time.Minute+20*time.Second || nlp.OnUnknown != "" && nlp.OnUnknown != "hold" {
		t.Fatalf("budget %+v", nlp)
	}
	// burst's clock ends it, then EC2's transition time corrects it
	if err := c.Terminated(ctx, "i-1", now.Add(-10*time.Minute+700*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := c.TerminatedEvent(ctx, sizerapi.InstanceEvent{InstanceID: "i-1", Time: now.Add(-10 * time.Minute), Source: sizerapi.SourceEC2, Reason: "Client.UserInitiatedShutdown"}); err != nil {
		t.Fatal(err)
	}
	var ae *sizerclient.APIError
	if err := c.TerminatedEvent(ctx, sizerapi.InstanceEvent{InstanceID: "i-1", Time: now, Source: "gossip"}); !errors.As(err, &ae) || ae.Status != 400 {
		t.Fatalf("unknown source: %v", err)
	}
	l, err := c.Ledger(ctx)
	if err != nil || len(l.Instances) != 1 {
		t.Fatalf("ledger %+v %v", l, err)
	}
	in := l.Instances[0]
	if in.BilledSeconds != 3000 || in.EndSource != "ec2" || in.EndReason != "Client.UserInitiatedShutdown" || in.Open || in.StartSource != "launch" || in.OnDemandUSD <= 0 {
		t.Fatalf("instance %+v", in)
	}
	sum := map[string]float64{}
	for _, ch := range l.Charges {
		sum[ch.Account] += ch.USD
	}
	if math.Abs(sum["nlp"]+sum["bio"]-3) > 1e-9 || math.Abs(sum["bio"]-1.2) > 1e-9 {
		t.Fatalf("charges %+v", l.Charges)
	}
	rep, err := c.UsageReport(ctx)
	if err != nil || math.Abs(rep.SpendUSD-3) > 1e-6 || len(rep.Jobs) != 2 {
		t.Fatalf("report %+v %v", rep, err)
	}
	if _, err := c.LedgerSync(ctx); !errors.As(err, &ae) || ae.Status != 409 {
		t.Fatalf("sync without EC2: %v", err)
	}
}

// A standby's (or a deposed leader's) ledger sync answers 503 not_leader,
// which a client with several sizer URLs takes as "ask the next".
func TestLedgerSyncOnAStandby(t *testing.T) {
	for _, cause := range []error{ErrNotLeader, store.ErrDeposed} {
		f := start(t, nil, func(o *Options) {
			o.LedgerSync = func(context.Context) (sizerapi.LedgerSync, error) {
				return sizerapi.LedgerSync{}, fmt.Errorf("syncing the ledger: %w", cause)
			}
		})
		var ae *sizerclient.APIError
		_, err := f.client(t, f.token).LedgerSync(context.Background())
		if !errors.As(err, &ae) || ae.Status != 503 || ae.Code != sizerapi.CodeNotLeader {
			t.Errorf("%v: %v, want 503 %s", cause, err, sizerapi.CodeNotLeader)
		}
	}
}
