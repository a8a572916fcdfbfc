package server

import (
	"context"
	"fmt"
	"github.com/burst-hpc/burst/internal/pgtest"
	"github.com/burst-hpc/burst/sizer/store"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
)

const benchWorkers = 16

// loadTest runs b.N calls of do spread over benchWorkers goroutines and
// returns the latency percentiles.
func loadTest(b *testing.B, do func(worker, i int) error) (p50, p99 time.Duration) {
	var next atomic.Int64
	lat := make([][]time.Duration, benchWorkers)
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := 0; w < benchWorkers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				if err := do(w, i); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}(w)
	}
	wg.Wait()
	b.StopTimer()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) == 0 {
		return 0, 0
	}
	return all[len(all)/2], all[min(len(all)-1, len(all)*99/100)]
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
