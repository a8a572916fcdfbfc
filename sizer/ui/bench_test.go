package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
	"github.com/burst-hpc/burst/sizer/dash"
	"github.com/burst-hpc/burst/sizer/dash/dashtest"
	"github.com/burst-hpc/burst/sizer/store"
	"github.com/burst-hpc/burst/sizer/ui"
)

// BenchmarkPages renders every dashboard page over a store holding 10,000
// jobs of this month (BURST_BENCH_JOBS; make bench-scale: 100,000, and
// BURST_BENCH_NODES=10000 nodes in Slurm's view, most powered down)
// (synthetic, dashtest), each with an instance, agent
// reports, a decision, its node's boot, its run and its start with the
// submit time (BURST_BENCH_STATE=DIR keeps the filled store in DIR for
// the next run of the same size: the fill takes a quarter of an hour at
// 100,000 jobs), and prints each page's median and worst render
// time over 15 renders (whole request: queries, template, SVG), and the
// same for its data alone (the /v1 view it draws) as the baseline.
func BenchmarkPages(b *testing.B) {
	ctx := context.Background()
	dir := filepath.Join(b.TempDir(), "state")
	if keep := os.Getenv("BURST_BENCH_STATE"); keep != "" {
		dir = keep // a store filled by an earlier run of the same size is read again
	}
	st, err := store.Open(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	t0 := time.Now()
	now := time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC) // 10,000 jobs over 19.5 days
	jobs := 10000
	if testing.Short() { // make test's smoke run: the smallest size, once
		jobs = 200
	}
	nodes := 0 // dashtest's 12 nodes, no Slurm view
	if v, err := strconv.Atoi(os.Getenv("BURST_BENCH_JOBS")); err == nil && v > 0 {
		jobs = v // make bench-scale: 100,000
	}
	if v, err := strconv.Atoi(os.Getenv("BURST_BENCH_NODES")); err == nil && v >= 10 {
		nodes = v // make bench-scale: 10,000
	}
	spec := dashtest.Spec{Jobs: jobs, Now: now, Live: 20, Waits: true}
	if nodes > 0 {
		spec.Nodes = nodes / 5 // the smaller class's: about 10 instances a node in the month at 100,000 jobs and 10,000 nodes
	}
	filled := filepath.Join(dir, fmt.Sprintf("filled-%d-jobs-%d-nodes", jobs, spec.Nodes))
	if _, err := os.Stat(filled); err == nil {
		b.Logf("reading the store %s filled before", dir)
	} else {
		if _, err := dashtest.Fill(ctx, st, spec); err != nil {
			b.Fatal(err)
		}
		b.Logf("filled %d jobs in %.1f s", jobs, time.Since(t0).Seconds())
		if err := os.WriteFile(filled, nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	classes := dashtest.Classes()
	opts := dash.Options{Store: st, Budgets: map[string]float64{"nlp": 5000, "vision": 2000}, Now: func() time.Time { return now }}
	if nodes > 0 {
		// nodes CLOUD nodes in Slurm's view: most powered down, every 50th
		// allocated, every 500th DOWN
		classes[0].MaxNodes, classes[1].MaxNodes = nodes-nodes/5, nodes/5
		var sn []slurm.Node
		for _, c := range classes {
			for i := 1; i <= c.MaxNodes; i++ {
				n := slurm.Node{Name: fmt.Sprintf("%s-%d", c.Name, i), State: "IDLE", Flags: []string{"CLOUD", "POWERED_DOWN"}}
				switch {
				case i%500 == 0:
					n.State, n.Reason = "DOWN", "Not responding"
				case i%50 == 0 || i <= 4:
					n.State, n.Flags = "ALLOCATED", []string{"CLOUD"}
				}
				sn = append(sn, n)
			}
		}
		opts.Slurm = slurmfake.New(nil, sn)
	}
	pol, _ := sizing.New(catalog.Default(), "us-east-1", classes, sizing.Params{})
	opts.Policy = pol
	src, err := dash.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	admin, _ := auth.Generate()
	u, err := ui.New(ui.Options{Source: src, Verify: func(tok string) (auth.Principal, error) { return auth.Verify(admin, tok, time.Now(), nil) }, Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	h := u.Handler()
	mid := fmt.Sprint(1000 + jobs*2/5) // job ids start at 1000 (dashtest): 5000 of 10,000
	pages := []struct {
		path string
		data func() error
	}{
		{"/ui/fleet", func() error { _, err := src.Fleet(ctx, dash.Scope{}); return err }},
		{"/ui/jobs", func() error { _, err := src.Jobs(ctx, dash.Scope{}, dash.JobsQuery{}); return err }},
		{"/ui/jobs/" + mid, func() error { _, err := src.Job(ctx, dash.Scope{}, mid); return err }},
		{"/ui/money", func() error { _, err := src.Money(ctx, dash.Scope{}); return err }},
		{"/ui/rightsizing", func() error { _, err := src.RightSizing(ctx, dash.Scope{}); return err }},
		{"/ui/money?account=nlp", func() error { _, err := src.Money(ctx, dash.Scope{Account: "nlp"}); return err }},
	}
	const n = 15
	b.ResetTimer()
	for range b.N {
		for _, p := range pages {
			var page, data []time.Duration
			size := 0
			for range n {
				t := time.Now()
				if err := p.data(); err != nil {
					b.Fatal(err)
				}
				data = append(data, time.Since(t))
				req := httptest.NewRequest("GET", p.path, nil)
				req.Header.Set("Authorization", "Bearer "+admin)
				w := httptest.NewRecorder()
				t = time.Now()
				h.ServeHTTP(w, req)
				page = append(page, time.Since(t))
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d", p.path, w.Code)
				}
				size = w.Body.Len()
			}
			slices.Sort(page)
			slices.Sort(data)
			fmt.Printf("dashboard %-22s %d jobs, %d nodes: page median %6.1f ms, worst %6.1f ms (%4d KiB); its data alone median %6.1f ms; page/data %.2fx\n",
				p.path, jobs, max(nodes, 12), ms(page[n/2]), ms(page[n-1]), size>>10, ms(data[n/2]), ms(page[n/2])/ms(data[n/2]))
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
