package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/jobmeta"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/store"
)

func TestAuth(t *testing.T) {
	f := start(t, nil)
	ctx := context.Background()
	_, err := f.client(t, "wrong-token").Budgets(ctx)
	if !errors.Is(err, sizerclient.ErrUnauthorized) {
		t.Fatalf("wrong token: %v", err)
	}
	cred, _ := f.node(t, "gpu-1", "g5.xlarge", "us-east-1a", false)
	f.runs(7, "gpu-1")
	node := f.client(t, cred)
	if _, err := node.Budgets(ctx); !errors.Is(err, sizerclient.ErrUnauthorized) {
		t.Errorf("node credential on a read-only endpoint: %v", err)
	}
	if _, err := node.Rank(ctx, sizerapi.RankRequest{Class: "l4-1x"}); !errors.Is(err, sizerclient.ErrUnauthorized) {
		t.Errorf("node credential on an admin endpoint: %v", err)
	}
	if _, err := node.Report(ctx, gpuBatch("gpu-2", 1, 1, 7, f.clk.Now())); !errors.Is(err, sizerclient.ErrUnauthorized) {
		t.Errorf("node reporting for another node: %v", err)
	}
	if res, err := node.Report(ctx, gpuBatch("gpu-1", 1, 1, 7, f.clk.Now())); err != nil || res.Accepted != 1 {
		t.Errorf("node reporting for itself: %+v %v", res, err)
	}
	rc := f.client(t, auth.RouteToken(f.token))
	if _, err := rc.Route(ctx, sizerapi.JobRequest{GPUsPerNode: 1}); err != nil {
		t.Errorf("route credential on /v1/route: %v", err)
	}
	if _, err := rc.Rank(ctx, sizerapi.RankRequest{Class: "l4-1x"}); !errors.Is(err, sizerclient.ErrUnauthorized) {
		t.Errorf("route credential on /v1/rank: %v", err)
	}
	if _, err := rc.Report(ctx, gpuBatch("gpu-1", 9, 1, 7, f.clk.Now())); !errors.Is(err, sizerclient.ErrUnauthorized) {
		t.Errorf("route credential on /v1/reports: %v", err)
	}
	if _, err := rc.Budgets(ctx); !errors.Is(err, sizerclient.ErrUnauthorized) {
		t.Errorf("route credential on /v1/budgets: %v", err)
	}
	ro := f.client(t, auth.ReadOnlyToken(f.token))
	if _, err := ro.Budgets(ctx); err != nil {
		t.Errorf("read-only credential on /v1/budgets: %v", err)
	}
	if _, err := ro.Route(ctx, sizerapi.JobRequest{GPUsPerNode: 1}); !errors.Is(err, sizerclient.ErrUnauthorized) {
		t.Errorf("read-only credential on /v1/route: %v", err)
	}
	claims, _ := auth.ParseNode(cred)
	forged, _ := auth.IssueNode("another-admin-token-that-is-long-enough", claims)
	if _, err := f.client(t, forged).Report(ctx, gpuBatch("gpu-1", 2, 1, 7, f.clk.Now())); !errors.Is(err, sizerclient.ErrUnauthorized) {
		t.Errorf("forged node credential: %v", err)
	}
	// a well-formed credential the sizer never issued (no identity exchange)
	minted, _ := auth.IssueNode(f.token, auth.NodeClaims{InstanceID: "i-0123456789abcdef0", Node: "gpu-3", Expires: f.clk.Now().Add(time.Hour)})
	if _, err := f.client(t, minted).Report(ctx, gpuBatch("gpu-3", 1, 1, 7, f.clk.Now())); !errors.Is(err, sizerclient.ErrUnauthorized) {
		t.Errorf("credential of an instance that never exchanged its identity: %v", err)
	}
	// /healthz needs no token; /metrics the read-only one
	hc := f.httpClient(t)
	get := func(p, tok string) int {
		req, _ := http.NewRequest("GET", f.url+p, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path, tok string
		want      int
	}{
		{"/healthz", "", 200}, {"/metrics", "", 401}, {"/metrics", cred, 403}, {"/metrics", auth.RouteToken(f.token), 403},
		{"/metrics", auth.ReadOnlyToken(f.token), 200}, {"/metrics", f.token, 200},
	} {
		if got := get(c.path, c.tok); got != c.want {
			t.Errorf("GET %s with %.8s...: %d, want %d", c.path, c.tok, got, c.want)
		}
	}
}

func TestReportsIdempotentAndLimits(t *testing.T) {
	f := start(t, nil)
	ctx := context.Background()
	cred, _ := f.node(t, "gpu-1", "g5.xlarge", "us-east-1a", false)
	f.runs(42, "gpu-1")
	c := f.client(t, cred)
	b := gpuBatch("gpu-1", 1, 10, 42, f.clk.Now())
	res, err := c.Report(ctx, b)
	if err != nil || res.Accepted != 10 || res.Duplicates != 0 {
		t.Fatalf("first: %+v %v", res, err)
	}
	b2 := gpuBatch("gpu-1", 6, 10, 42, f.clk.Now())
	res, err = c.Report(ctx, b2)
	if err != nil || res.Accepted != 5 || res.Duplicates != 5 {
		t.Fatalf("overlapping resend: %+v %v", res, err)
	}
	// Bad kind and unknown fields are 400s; an oversized body is 413.
	b3 := sizerapi.ReportBatch{Node: "gpu-1", Records: []sizerapi.Record{{Seq: 100, Kind: "nonsense"}}}
	if _, err := c.Report(ctx, b3); !isStatus(err, 400) {
		t.Errorf("bad kind: %v", err)
	}
	req, _ := http.NewRequest("POST", f.url+"/v1/reports", strings.NewReader(`{"node":"gpu-1","records":[],"surprise":1}`))
	req.Header.Set("Authorization", "Bearer "+f.token)
	if resp, err := f.httpClient(t).Do(req); err != nil || resp.StatusCode != 400 {
		t.Errorf("unknown field: %v %v", resp, err)
	}
	big := gpuBatch("gpu-1", 1000, 3000, 42, f.clk.Now())
	if _, err := c.Report(ctx, big); !isStatus(err, 413) {
		t.Errorf("oversized body: %v", err)
	}
	body := f.metrics(t)
	for _, want := range []string{`burst_sizer_report_records_total{result="accepted"} 15`, `burst_sizer_report_records_total{result="duplicate"} 5`, `burst_sizer_requests_total{code="413",endpoint="reports"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestBudgetsRankRouteAndLearning(t *testing.T) {
	f := start(t, map[string]float64{"phys": 100, "bio": 1000})
	ctx := context.Background()
	admin := f.client(t, f.token)
	now := f.clk.Now()

	// Two finished jobs named "eval" by dan on 8 x L40S that kept one GPU busy.
	for i, id := range []uint32{101, 102} {
		node := fmt.Sprintf("gpu-%d", i)
		cred, inst := f.node(t, node, "g6e.48xlarge", "us-east-1a", true)
		ev := sizerapi.InstanceEvent{InstanceID: inst, Node: node, InstanceType: "g6e.48xlarge", Zone: "us-east-1a", Capacity: "spot", Time: now.Add(-3 * time.Hour),
			Job: &sizerapi.Job{JobID: fmt.Sprint(id), JobName: "eval", User: "dan", Account: "phys", GPUsPerNode: 8, GPUMemoryMiB: 45776}}
		if err := admin.Launched(ctx, ev); err != nil {
			t.Fatal(err)
		}
		// the launch record names the job: its samples count without asking Slurm
		nc := f.client(t, cred)
		if res, err := nc.Report(ctx, gpuBatch(node, 1, 5, id, now.Add(-2*time.Hour))); err != nil || res.Accepted != 5 {
			t.Fatalf("%+v %v", res, err)
		}
		if err := admin.Terminated(ctx, ev.InstanceID, now.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	d, err := admin.Route(ctx, sizerapi.JobRequest{JobName: "eval", User: "dan", Account: "bio", GPUModel: "l40s", GPUsPerNode: 8})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Downsized || d.GPUsPerNode != 1 || !strings.Contains(d.Reason, "learned") {
		t.Errorf("want learned downsizing, got %+v", d)
	}
	// Spend: 2 instances x 2 h x g6e.48xlarge spot price.
	bs, err := admin.Budgets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	price, _ := f.srv.Policy().HourlyPrice("g6e.48xlarge", capacity.Spot)
	var phys sizerapi.BudgetStatus
	for _, b := range bs {
		if b.Account == "phys" {
			phys = b
		}
	}
	if want := 4 * price; phys.SpentUSD < want-0.01 || phys.SpentUSD > want+0.01 {
		t.Errorf("phys spend %.2f want %.2f (%+v)", phys.SpentUSD, want, bs)
	}
	if phys.Over != (4*price >= 100) {
		t.Errorf("over flag %+v", phys)
	}
	// Push phys over budget: a running on-demand p4d for 5 more hours.
	if err := admin.Launched(ctx, sizerapi.InstanceEvent{InstanceID: "i-big", Node: "gpu-9", InstanceType: "p4d.24xlarge", Capacity: "on-demand", Account: "phys", Time: now}); err != nil {
		t.Fatal(err)
	}
	f.clk.Add(5 * time.Hour)
	_, err = admin.Rank(ctx, sizerapi.RankRequest{Class: "a100-8x", Job: sizerapi.JobRequest{Account: "phys"}})
	if !errors.Is(err, sizing.ErrOverBudget) || !strings.Contains(err.Error(), "phys") {
		t.Fatalf("rank for over-budget account: %v", err)
	}
	d, err = admin.Route(ctx, sizerapi.JobRequest{Account: "phys", GPUsPerNode: 1})
	if err != nil || !d.Refused || !strings.Contains(d.RefuseMessage, "over its monthly GPU budget") {
		t.Fatalf("route for over-budget account: %+v %v", d, err)
	}
	// the route credential is world-readable: a refusal names no figure
	// of the account (any user may claim any account)
	if strings.Contains(d.RefuseMessage, "$") || strings.ContainsAny(strings.TrimPrefix(d.RefuseMessage, "account phys"), "0123456789") {
		t.Errorf("route refusal reveals the account's figures: %q", d.RefuseMessage)
	}
	// Metadata errors refuse with the column and a hint.
	d, err = admin.Route(ctx, sizerapi.JobRequest{Account: "bio", Comment: "burst: params=7Q"})
	if err != nil || !d.Refused || !strings.Contains(d.RefuseMessage, "column 8") {
		t.Fatalf("bad metadata: %+v %v", d, err)
	}

	// An interruption makes rank avoid that spot offering for a while.
	rq := sizerapi.RankRequest{Class: "l4-1x", Job: sizerapi.JobRequest{Account: "bio"}}
	before, err := admin.Rank(ctx, rq)
	if err != nil {
		t.Fatal(err)
	}
	top := before.Offerings[0]
	cred, spot := f.node(t, "gpu-5", top.InstanceType, top.Zone, true)
	if err := admin.Launched(ctx, sizerapi.InstanceEvent{InstanceID: spot, Node: "gpu-5", InstanceType: top.InstanceType, Zone: top.Zone, Capacity: "spot", Account: "bio", Time: f.clk.Now()}); err != nil {
		t.Fatal(err)
	}
	nc := f.client(t, cred)
	// the node names neither type nor zone: the sizer takes them from its records
	if err := nc.Interruption(ctx, sizerapi.Interruption{Action: "terminate", Time: f.clk.Now()}); err != nil {
		t.Fatal(err)
	}
	after, err := admin.Rank(ctx, rq)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Offerings) != len(before.Offerings)-1 || after.Offerings[0] == top || len(after.Avoided) != 1 {
		t.Errorf("interrupted offering still ranked: before %v after %+v", top, after)
	}
	f.clk.Add(time.Hour)
	later, _ := admin.Rank(ctx, rq)
	if len(later.Offerings) != len(before.Offerings) {
		t.Errorf("avoidance should expire: %d offerings", len(later.Offerings))
	}
	if _, err := admin.Rank(ctx, sizerapi.RankRequest{Class: "nope"}); !isStatus(err, 404) {
		t.Errorf("unknown class: %v", err)
	}
	rep, err := admin.UsageReport(ctx)
	if err != nil || len(rep.Advice) != 1 || !strings.Contains(rep.Advice[0].Text, "asked for 8 GPUs and used 1") {
		t.Errorf("report advice: %+v %v", rep.Advice, err)
	}
}

func TestClientUnavailable(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	f := start(t, nil)
	c, _ := sizerclient.New("https://"+addr, "x", sizerclient.WithTimeout(time.Second), sizerclient.WithCAFile(f.caFile))
	if _, err := c.Rank(context.Background(), sizerapi.RankRequest{Class: "x"}); !errors.Is(err, sizerclient.ErrUnavailable) {
		t.Fatalf("want ErrUnavailable, got %v", err)
	}
}

// TestGracefulShutdownLosesNoAcceptedReport posts reports from many
// goroutines while the server shuts down: every report the server
// acknowledged must be in the database afterwards.
func TestGracefulShutdownLosesNoAcceptedReport(t *testing.T) {
	f := start(t, nil)
	ctx := context.Background()
	var acked atomic.Int64
	var wg sync.WaitGroup
	stopAt := make(chan struct{})
	creds := make([]string, 8)
	for w := range creds {
		creds[w], _ = f.node(t, fmt.Sprintf("gpu-%d", w), "g5.xlarge", "us-east-1a", false)
		f.runs(uint32(1000+w), fmt.Sprintf("gpu-%d", w))
	}
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			node := fmt.Sprintf("gpu-%d", w)
			c := f.client(t, creds[w])
			for i := 0; ; i++ {
				res, err := c.Report(ctx, gpuBatch(node, uint64(i*5+1), 5, uint32(1000+w), f.clk.Now()))
				if err != nil {
					return // server gone
				}
				acked.Add(int64(res.Accepted))
				if i == 20 {
					select {
					case <-stopAt:
					default:
						close(stopAt)
					}
				}
			}
		}(w)
	}
	<-stopAt
	if err := f.stop(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	st, err := store.OpenReadOnly(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stored := countRecords(t, st)
	if stored < acked.Load() {
		t.Fatalf("server acknowledged %d records, database holds %d", acked.Load(), stored)
	}
	t.Logf("acknowledged %d, stored %d", acked.Load(), stored)
}

// TestJobRunsDriveLearning: job starts and ends (PrologSlurmctld and
// EpilogSlurmctld) make the history route learns from; only the admin may
// post them; the recurring-job key comes from the job's user, name and
// metadata, computed by the server.
func TestJobRunsDriveLearning(t *testing.T) {
	f := start(t, nil)
	ctx := context.Background()
	admin := f.client(t, f.token)
	cred, _ := f.node(t, "gpu-1", "g6.xlarge", "us-east-1a", false)
	node := f.client(t, cred)
	comment := "burst: params=1B workload=finetune"
	run := sizerapi.JobStart{Job: sizerapi.Job{JobID: "41", JobName: "ft.sh", User: "ann", Account: "bio", Class: "l4-1x", GPUModel: "l4", GPUsPerNode: 1, Nodes: 1, GPUMemoryMiB: 22888, Comment: comment}, Start: f.clk.Now()}
	if err := node.JobStarted(ctx, run); !errors.Is(err, sizerclient.ErrUnauthorized) {
		t.Errorf("a node credential posted a job start: %v", err)
	}
	if err := admin.JobStarted(ctx, sizerapi.JobStart{}); !isStatus(err, 400) {
		t.Errorf("empty job start: %v", err)
	}
	if err := admin.JobStarted(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := admin.JobEnded(ctx, sizerapi.JobEnd{JobID: "41", ExitCode: 1, OOM: true, Evidence: `"CUDA out of memory" in slurm-41.out`}); err != nil {
		t.Fatal(err)
	}
	job := sizerapi.JobRequest{JobName: "ft.sh", User: "ann", Account: "bio", Comment: comment}
	d, err := admin.Route(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := jobmeta.ParseMetadata(comment)
	if !d.Upsized || d.HistoryKey != sizing.RecurringKey("ann", "ft.sh", md) || !strings.Contains(d.Reason, "ended out of GPU memory") || d.Nodes == 1 && d.GPUsPerNode == 1 && d.GPUModel == "l4" {
		t.Errorf("after an OOM run: %+v", d)
	}
	// a launch carrying the job (burst-resume's) files it under the same key
	ev := sizerapi.InstanceEvent{InstanceID: "i-42", Node: "l4-1", InstanceType: "g6.xlarge", Capacity: "spot", Time: f.clk.Now(),
		Job: &sizerapi.Job{JobID: "42", JobName: "ft.sh", User: "ann", Account: "bio", GPUsPerNode: 1, Nodes: 1, Comment: comment}}
	if err := admin.Launched(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if h, err := f.srv.Store().HistoryByKey(ctx, d.HistoryKey, 10); err != nil || h.LastOOM == nil || h.LastOOM.JobID != "41" {
		t.Errorf("history after the launch: %+v %v", h, err)
	}
	// another user's job of the same name learns nothing from it
	other := job
	other.User = "bob"
	if d, _ := admin.Route(ctx, other); d.Upsized {
		t.Errorf("bob's job upsized from ann's run: %+v", d)
	}
}

// TestRouteBudgetUsesIdleOwner: with accounting.idle_owner pool, an
// instance's idle time is the pool's, so an account whose only instance
// idled is within its budget for route as for rank (route once read
// spend with the launching-job owner whatever was configured).
func TestRouteBudgetUsesIdleOwner(t *testing.T) {
	f := start(t, map[string]float64{"ml": 10}, func(o *Options) { o.IdleOwner = billing.OwnerPool })
	ctx := context.Background()
	admin := f.client(t, f.token)
	// a p4d launched for ml's job 7, no job run on it: 5 idle hours on demand
	if err := admin.Launched(ctx, sizerapi.InstanceEvent{InstanceID: "i-idle", Node: "gpu-9", InstanceType: "p4d.24xlarge", Capacity: "on-demand", Time: f.clk.Now(),
		Job: &sizerapi.Job{JobID: "7", JobName: "train", User: "ann", Account: "ml", GPUsPerNode: 8}}); err != nil {
		t.Fatal(err)
	}
	f.clk.Add(5 * time.Hour)
	if _, err := admin.Rank(ctx, sizerapi.RankRequest{Class: "l4-1x", Job: sizerapi.JobRequest{Account: "ml"}}); err != nil {
		t.Fatalf("rank for ml, whose only instance idled (the pool's time): %v", err)
	}
	d, err := admin.Route(ctx, sizerapi.JobRequest{Account: "ml", GPUsPerNode: 1})
	if err != nil || d.Refused {
		t.Fatalf("route for ml, whose only instance idled (the pool's time): %+v %v", d, err)
	}
	// the same instance with the launching job paying for its idle time:
	// over budget for both
	g := start(t, map[string]float64{"ml": 10})
	ga := g.client(t, g.token)
	if err := ga.Launched(ctx, sizerapi.InstanceEvent{InstanceID: "i-idle", Node: "gpu-9", InstanceType: "p4d.24xlarge", Capacity: "on-demand", Time: g.clk.Now(),
		Job: &sizerapi.Job{JobID: "7", JobName: "train", User: "ann", Account: "ml", GPUsPerNode: 8}}); err != nil {
		t.Fatal(err)
	}
	g.clk.Add(5 * time.Hour)
	if d, err := ga.Route(ctx, sizerapi.JobRequest{Account: "ml", GPUsPerNode: 1}); err != nil || !d.Refused {
		t.Fatalf("route for ml paying its instance's idle time: %+v %v", d, err)
	}
}
