package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/jobmeta"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/store"
)

func testClasses() []sizing.Class {
	return []sizing.Class{
		{Name: "l4-1x", GPUModel: "l4", GPUsPerNode: 1, InstanceTypes: []string{"g6.xlarge", "g6.2xlarge"}},
		{Name: "l40s-1x", GPUModel: "l40s", GPUsPerNode: 1, InstanceTypes: []string{"g6e.xlarge"}},
		{Name: "l40s-8x", GPUModel: "l40s", GPUsPerNode: 8, InstanceTypes: []string{"g6e.48xlarge"}},
		{Name: "a100-8x", GPUModel: "a100", GPUsPerNode: 8, InstanceTypes: []string{"p4d.24xlarge"}},
	}
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	srv    *Server
	url    string
	token  string
	dir    string
	clk    *clock
	cancel context.CancelFunc
	done   chan error
}

func start(t testing.TB, budgets map[string]float64) *fixture {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	tok, err := auth.Generate()
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	s, err := New(context.Background(), Options{Token: tok, StateDir: dir, Budgets: budgets, Classes: testClasses(), Region: "us-east-1",
		Zones: []string{"us-east-1a", "us-east-1b"}, Now: clk.Now, MaxBodyBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &fixture{srv: s, url: "http://" + ln.Addr().String(), token: tok, dir: dir, clk: clk, cancel: cancel, done: make(chan error, 1)}
	go func() { f.done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { f.stop() })
	return f
}

func (f *fixture) stop() error {
	f.cancel()
	select {
	case err := <-f.done:
		f.done <- err
		return err
	case <-time.After(time.Minute):
		return errors.New("server did not stop")
	}
}

func (f *fixture) client(t testing.TB, tok string) *sizerclient.Client {
	c, err := sizerclient.New(f.url, tok, sizerclient.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func gpuBatch(node string, seq0 uint64, n int, job uint32, t time.Time) sizerapi.ReportBatch {
	b := sizerapi.ReportBatch{Node: node}
	for i := 0; i < n; i++ {
		rec := sizerapi.Record{Seq: seq0 + uint64(i), Time: t.Add(time.Duration(i) * time.Second), Kind: sizerapi.KindGPU}
		for g := 0; g < 8; g++ {
			rd := sizerapi.GPUReading{Index: g, MemoryTotalBytes: 45776 << 20}
			if g == 0 {
				rd.UtilPercent, rd.MemoryUsedBytes, rd.JobIDs = 60, 15<<30, []uint32{job}
			}
			rec.GPUs = append(rec.GPUs, rd)
		}
		b.Records = append(b.Records, rec)
	}
	return b
}

func TestAuth(t *testing.T) {
	f := start(t, nil)
	ctx := context.Background()
	_, err := f.client(t, "wrong-token").Budgets(ctx)
	if !errors.Is(err, sizerclient.ErrUnauthorized) {
		t.Fatalf("wrong token: %v", err)
	}
	node := f.client(t, auth.NodeToken(f.token, "gpu-1"))
	if _, err := node.Budgets(ctx); !errors.Is(err, sizerclient.ErrUnauthorized) {
		t.Errorf("node credential on an admin endpoint: %v", err)
	}
	if _, err := node.Report(ctx, gpuBatch("gpu-2", 1, 1, 7, f.clk.Now())); !errors.Is(err, sizerclient.ErrUnauthorized) {
		t.Errorf("node reporting for another node: %v", err)
	}
	if _, err := node.Report(ctx, gpuBatch("gpu-1", 1, 1, 7, f.clk.Now())); err != nil {
		t.Errorf("node reporting for itself: %v", err)
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
	forged := auth.NodeToken("another-admin-token-that-is-long-enough", "gpu-1")
	if _, err := f.client(t, forged).Report(ctx, gpuBatch("gpu-1", 2, 1, 7, f.clk.Now())); !errors.Is(err, sizerclient.ErrUnauthorized) {
		t.Errorf("forged node credential: %v", err)
	}
	// /healthz and /metrics need no token.
	for _, p := range []string{"/healthz", "/metrics"} {
		resp, err := http.Get(f.url + p)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("%s: %v %v", p, resp, err)
		}
		resp.Body.Close()
	}
}

func TestReportsIdempotentAndLimits(t *testing.T) {
	f := start(t, nil)
	ctx := context.Background()
	c := f.client(t, auth.NodeToken(f.token, "gpu-1"))
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
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 400 {
		t.Errorf("unknown field: %v %v", resp, err)
	}
	big := gpuBatch("gpu-1", 1000, 3000, 42, f.clk.Now())
	if _, err := c.Report(ctx, big); !isStatus(err, 413) {
		t.Errorf("oversized body: %v", err)
	}
	resp, err := http.Get(f.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`burst_sizer_report_records_total{result="accepted"} 15`, `burst_sizer_report_records_total{result="duplicate"} 5`, `burst_sizer_requests_total{code="413",endpoint="reports"} 1`} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func isStatus(err error, status int) bool {
	var ae *sizerclient.APIError
	return errors.As(err, &ae) && ae.Status == status
}

func TestBudgetsRankRouteAndLearning(t *testing.T) {
	f := start(t, map[string]float64{"phys": 100, "bio": 1000})
	ctx := context.Background()
	admin := f.client(t, f.token)
	now := f.clk.Now()

	// Two finished jobs named "eval" by dan on 8 x L40S that kept one GPU busy.
	for i, id := range []uint32{101, 102} {
		node := fmt.Sprintf("gpu-%d", i)
		ev := sizerapi.InstanceEvent{InstanceID: fmt.Sprintf("i-%d", id), Node: node, InstanceType: "g6e.48xlarge", Zone: "us-east-1a", Capacity: "spot", Time: now.Add(-3 * time.Hour),
			Job: &sizerapi.Job{JobID: fmt.Sprint(id), JobName: "eval", User: "dan", Account: "phys", GPUsPerNode: 8, GPUMemoryMiB: 45776}}
		if err := admin.Launched(ctx, ev); err != nil {
			t.Fatal(err)
		}
		nc := f.client(t, auth.NodeToken(f.token, node))
		if _, err := nc.Report(ctx, gpuBatch(node, 1, 5, id, now.Add(-2*time.Hour))); err != nil {
			t.Fatal(err)
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
	price, _ := f.srv.Policy().HourlyPrice("g6e.48xlarge", jobmeta.CapacitySpot)
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
	if !errors.Is(err, sizerclient.ErrOverBudget) || !strings.Contains(err.Error(), "phys") {
		t.Fatalf("rank for over-budget account: %v", err)
	}
	d, err = admin.Route(ctx, sizerapi.JobRequest{Account: "phys", GPUsPerNode: 1})
	if err != nil || !d.Refused || !strings.Contains(d.RefuseMessage, "over its monthly GPU budget") {
		t.Fatalf("route for over-budget account: %+v %v", d, err)
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
	if err := admin.Launched(ctx, sizerapi.InstanceEvent{InstanceID: "i-spot", Node: "gpu-5", InstanceType: top.InstanceType, Zone: top.Zone, Capacity: "spot", Account: "bio", Time: f.clk.Now()}); err != nil {
		t.Fatal(err)
	}
	nc := f.client(t, auth.NodeToken(f.token, "gpu-5"))
	if err := nc.Interruption(ctx, sizerapi.Interruption{InstanceID: "i-spot", Node: "gpu-5", Action: "terminate", Time: f.clk.Now()}); err != nil {
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
	c, _ := sizerclient.New("http://"+addr, "x", sizerclient.WithTimeout(time.Second))
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
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			node := fmt.Sprintf("gpu-%d", w)
			c := f.client(t, auth.NodeToken(f.token, node))
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
