package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/pgtest"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/sizer/dash/dashtest"
	"github.com/burst-hpc/burst/sizer/store"
)

const benchWorkers = 16

// loadTest runs b.N calls of do spread over benchWorkers goroutines and
// returns the latency percentiles.
func loadTest(b *testing.B, do func(worker, i int) error) (p50, p99 time.Duration) {
	b.ResetTimer()
	all, _ := spread(b, b.N, benchWorkers, do)
	b.StopTimer()
	if len(all) == 0 {
		return 0, 0
	}
	return all[len(all)/2], all[min(len(all)-1, len(all)*99/100)]
}

// spread runs n calls of do over workers goroutines and returns their
// latencies, sorted, and the wall time they took.
func spread(b *testing.B, n, workers int, do func(worker, i int) error) ([]time.Duration, time.Duration) {
	var next atomic.Int64
	lat := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t := time.Now()
				if err := do(w, i); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		}()
	}
	wg.Wait()
	took := time.Since(t0)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return all, took
}

func reportLatency(b *testing.B, p50, p99, base50 time.Duration) {
	b.ReportMetric(float64(p50.Microseconds()), "p50_µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99_µs")
	if base50 > 0 {
		b.ReportMetric(float64(p50)/float64(base50), "p50_x_healthz")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// BenchmarkHTTP measures the API under benchWorkers concurrent clients over
// real TCP loopback: /healthz (baseline: no auth, no database), rank (auth,
// interruption lookup, budget, policy) and report ingestion (batches of 10
// GPU samples x 8 GPUs, each a committed SQLite transaction).
func BenchmarkHTTP(b *testing.B) { benchHTTP(b) }

// BenchmarkHTTPPostgres is BenchmarkHTTP with the sizer on a throwaway
// PostgreSQL (sizer.store.driver: postgres), for the same run's comparison.
func BenchmarkHTTPPostgres(b *testing.B) {
	pg := pgtest.Start(b)
	dsn := pg.NewDatabase(b)
	benchHTTP(b, func(o *Options) {
		o.Store = store.Config{Driver: store.DriverPostgres, Postgres: store.Postgres{URL: dsn}}
	})
}

// BenchmarkHTTPFilled is BenchmarkHTTP's rank, with route, the budgets
// (each account's standing from the month's ledger) and the month's
// ledger, on a store holding a month of jobs: 200 filled here (the
// baseline, and all of make test's smoke run), then, with
// BURST_BENCH_JOBS, that many (make bench-scale: the 100,000 jobs and
// 100,000 instances sizer/ui's BenchmarkPages fills into BURST_BENCH_STATE,
// copied). Each figure is printed with its ratio to the baseline's, and
// the process's resident memory after each size against that before its
// sizer started (the difference: what the sizer holds).
func BenchmarkHTTPFilled(b *testing.B) {
	sizes := []int{200}
	if v, err := strconv.Atoi(os.Getenv("BURST_BENCH_JOBS")); err == nil && v > 200 {
		sizes = append(sizes, v)
	}
	base := map[string]filledFigure{}
	b.ResetTimer()
	for range b.N {
		for _, jobs := range sizes {
			for _, f := range benchFilled(b, jobs) {
				bf, ok := base[f.what]
				if !ok {
					base[f.what], bf = f, f
				}
				fmt.Printf("sizer-scale jobs=%d what=%s calls=%d per_s=%.0f p50_ms=%.2f p99_ms=%.2f x_per_s_vs_jobs%d=%.2f x_p50_vs_jobs%d=%.2f\n",
					jobs, f.what, f.calls, f.perS, ms(f.p50), ms(f.p99), sizes[0], f.perS/bf.perS, sizes[0], float64(f.p50)/float64(bf.p50))
			}
		}
	}
}

// filledFigure is one kind of call's figures on a filled store.
type filledFigure struct {
	what     string
	calls    int
	perS     float64
	p50, p99 time.Duration
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// benchFilled starts a sizer on a store of jobs jobs (see
// BenchmarkHTTPFilled) and measures budgets, the ledger (one client),
// rank and route (benchWorkers clients); it prints the sizer's memory.
func benchFilled(b *testing.B, jobs int) []filledFigure {
	ctx := context.Background()
	now := time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC) // the month BenchmarkPages fills
	dir := filepath.Join(b.TempDir(), "state")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	if src := os.Getenv("BURST_BENCH_STATE"); src != "" && jobs > 200 {
		marks, _ := filepath.Glob(filepath.Join(src, fmt.Sprintf("filled-%d-jobs-*", jobs)))
		if len(marks) == 0 {
			b.Fatalf("BURST_BENCH_STATE=%s holds no store of %d jobs (sizer/ui's BenchmarkPages fills one)", src, jobs)
		}
		in, err := os.ReadFile(filepath.Join(src, store.FileName))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, store.FileName), in, 0o600); err != nil {
			b.Fatal(err)
		}
	} else {
		st, err := store.Open(ctx, dir)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := dashtest.Fill(ctx, st, dashtest.Spec{Jobs: jobs, Now: now, Live: 20, Waits: true}); err != nil {
			b.Fatal(err)
		}
		st.Close()
	}
	rss0 := rssMiB()                                                                // the test process, the store filled and closed
	f := start(b, map[string]float64{"nlp": 1e6, "vision": 1e6}, func(o *Options) { // budgets checked, never reached
		o.StateDir, o.Cluster = dir, "" // dashtest's rows name no cluster
		o.Now = func() time.Time { return now }
	})
	defer f.stop()
	client := func() *sizerclient.Client {
		c, err := sizerclient.New(f.url, f.token, sizerclient.WithCAFile(f.caFile), sizerclient.WithTimeout(time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	admin := client()
	var out []filledFigure
	measure := func(what string, n, workers int, do func(w, _ int) error) {
		all, took := spread(b, n, workers, do)
		if len(all) < n {
			b.Fatalf("%s: %d of %d calls answered", what, len(all), n)
		}
		out = append(out, filledFigure{what, n, float64(n) / took.Seconds(), all[n/2], all[min(n-1, n*99/100)]})
	}
	measure("budgets", 15, 1, func(_, _ int) error { _, err := admin.Budgets(ctx); return err })
	measure("ledger", 5, 1, func(_, _ int) error { _, err := admin.Ledger(ctx); return err })
	admins := make([]*sizerclient.Client, benchWorkers)
	for w := range admins {
		admins[w] = client()
	}
	measure("rank-16-clients", 400, benchWorkers, func(w, _ int) error {
		_, err := admins[w].Rank(ctx, sizerapi.RankRequest{Class: "l4-1x", Zones: []string{"us-east-1a", "us-east-1b"},
			Job: sizerapi.JobRequest{Account: "nlp", User: "nlp-u1", JobName: "job1", Comment: "burst: params=1B checkpoint=30m"}})
		return err
	})
	measure("route-16-clients", 400, benchWorkers, func(w, _ int) error {
		_, err := admins[w].Route(ctx, sizerapi.JobRequest{Account: "vision", User: "vision-u2", JobName: "job3", GPUsPerNode: 1})
		return err
	})
	rss := rssMiB()
	fmt.Printf("sizer-scale jobs=%d what=memory rss_mib=%.1f before_sizer_mib=%.1f sizer_mib=%.1f\n", jobs, rss, rss0, rss-rss0)
	return out
}

// rssMiB is the process's resident memory (Go heap and SQLite's own),
// from /proc/self/status, in MiB, after a collection that hands freed
// memory back (what stays is what is held); 0 where there is none.
func rssMiB() float64 {
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}

func benchHTTP(b *testing.B, mod ...func(*Options)) {
	f := start(b, map[string]float64{"phys": 1e6}, mod...)
	ctx := context.Background()
	hc := f.httpClient(b)
	hc.Transport.(*http.Transport).MaxIdleConnsPerHost = benchWorkers * 2
	hc.Timeout = 30 * time.Second
	// one client a worker, each with its own connection (as each sizer
	// client of burst's programs)
	client := func(token string) *sizerclient.Client {
		c, err := sizerclient.New(f.url, token, sizerclient.WithCAFile(f.caFile), sizerclient.WithTimeout(30*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	admins := make([]*sizerclient.Client, benchWorkers)
	for w := range admins {
		admins[w] = client(f.token)
	}
	var base50 time.Duration

	b.Run("healthz", func(b *testing.B) {
		p50, p99 := loadTest(b, func(_, _ int) error {
			resp, err := hc.Get(f.url + "/healthz")
			if err != nil {
				return err
			}
			resp.Body.Close()
			return nil
		})
		base50 = p50
		reportLatency(b, p50, p99, 0)
	})
	b.Run("rank", func(b *testing.B) {
		rq := sizerapi.RankRequest{Class: "l4-1x", Zones: []string{"us-east-1a", "us-east-1b", "us-east-1c"}, Job: sizerapi.JobRequest{Account: "phys", Comment: "burst: params=1B checkpoint=30m"}}
		p50, p99 := loadTest(b, func(w, _ int) error {
			_, err := admins[w].Rank(ctx, rq)
			return err
		})
		reportLatency(b, p50, p99, base50)
	})
	var round atomic.Int64
	b.Run("report", func(b *testing.B) {
		r := round.Add(1)
		clients := make([]*sizerclient.Client, benchWorkers)
		for w := range clients {
			node := fmt.Sprintf("gpu-%d", w)
			cred, _ := f.node(b, node, "g5.xlarge", "us-east-1a", false)
			f.runs(uint32(w), node)
			clients[w] = client(cred)
		}
		seqs := make([]uint64, benchWorkers)
		p50, p99 := loadTest(b, func(w, _ int) error {
			seqs[w] += 10
			node := fmt.Sprintf("gpu-%d", w)
			res, err := clients[w].Report(ctx, gpuBatch(node, uint64(r)<<32+seqs[w], 10, uint32(w), f.clk.Now()))
			if err == nil && res.Accepted != 10 {
				err = fmt.Errorf("accepted %d of 10", res.Accepted)
			}
			return err
		})
		reportLatency(b, p50, p99, base50)
	})
}
