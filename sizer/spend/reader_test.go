package spend_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/dash/dashtest"
	"github.com/burst-hpc/burst/sizer/spend"
	"github.com/burst-hpc/burst/sizer/store"
	"github.com/burst-hpc/burst/sizer/store/storetest"
)

// reference is the month read the way burst read it before the Reader
// kept it (every row from the store at now, every charge computed again):
// the oracle the Reader's figures must equal.
type reference struct {
	byAccount, byJob, onDemand, burn map[string]float64
	charges                          int
	rows                             []store.Row
}

const odPrice = 4.1 // what the test's catalog says an instance costs on demand

func readReference(t *testing.T, st *store.Store, owner string, now time.Time) reference {
	t.Helper()
	from := billing.MonthStart(now)
	rows, err := st.Rows(context.Background(), from, now)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		if rows[i].OnDemandUSD <= 0 {
			rows[i].OnDemandUSD = odPrice
		}
	}
	ref := reference{byAccount: map[string]float64{}, byJob: map[string]float64{}, onDemand: map[string]float64{}, rows: rows}
	ins := make([]billing.Instance, len(rows))
	for i, r := range rows {
		ins[i] = r.Instance
	}
	for _, in := range ins {
		for _, c := range in.Charges(from, from.AddDate(0, 1, 0), now, owner) {
			ref.charges++
			ref.byAccount[c.Account] += c.USD
			ref.onDemand[c.Account] += c.OnDemandUSD
			if c.JobID != "" {
				ref.byJob[c.JobID] += c.USD
			}
		}
	}
	ref.burn = billing.Burn(ins, now, owner)
	return ref
}

func within(rows []store.Row, from, to, now time.Time, owner string) map[string]float64 {
	out := map[string]float64{}
	for _, r := range rows {
		for _, c := range r.Charges(from, to, now, owner) {
			out[c.Account] += c.USD
		}
	}
	return out
}

func sameMap(t *testing.T, what string, got, want map[string]float64) {
	t.Helper()
	for k, w := range want {
		if math.Abs(got[k]-w) > 1e-6 {
			t.Errorf("%s[%s] = %.6f, a fresh read gives %.6f", what, k, got[k], w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok && math.Abs(g) > 1e-6 {
			t.Errorf("%s[%s] = %.6f, a fresh read has none", what, k, g)
		}
	}
}

func compare(t *testing.T, r *spend.Reader, st *store.Store, owner string, now time.Time) {
	t.Helper()
	m, err := r.Month(context.Background(), owner, now)
	if err != nil {
		t.Fatal(err)
	}
	ref := readReference(t, st, owner, now)
	if len(m.Rows) != len(ref.rows) || len(m.Charges) != ref.charges {
		t.Errorf("at %s: %d rows and %d charges, a fresh read %d and %d", now.Format(time.TimeOnly), len(m.Rows), len(m.Charges), len(ref.rows), ref.charges)
	}
	sameMap(t, "by account", m.ByAccount, ref.byAccount)
	sameMap(t, "by job", m.ByJob, ref.byJob)
	sameMap(t, "on demand", m.OnDemand, ref.onDemand)
	sameMap(t, "burn", m.Burn, ref.burn)
	from := m.From
	for d := from; d.Before(now); d = d.AddDate(0, 0, 1) {
		end := d.AddDate(0, 0, 1)
		if end.After(now) {
			end = now
		}
		sameMap(t, "day "+d.Format(time.DateOnly), m.Within(d, end), within(ref.rows, d, end, now, owner))
	}
	sameMap(t, "the last 6 h", m.Within(now.Add(-6*time.Hour), now), within(ref.rows, now.Add(-6*time.Hour), now, now, owner))
}

// TestReaderMatchesFreshReads writes to the ledger the way burst does
// (launches, state events, job runs, ends, price corrections) between
// reads, and checks every figure of the Reader's month (kept in memory,
// refreshed from the change log) against a fresh read of the store, at
// moving times, on both drivers.
func TestReaderMatchesFreshReads(t *testing.T) {
	for _, driver := range []string{store.DriverSQLite, store.DriverPostgres} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			st := storetest.Open(t, driver)
			now := time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC)
			if _, err := dashtest.Fill(ctx, st, dashtest.Spec{Jobs: 300, Now: now, Live: 8}); err != nil {
				t.Fatal(err)
			}
			for _, owner := range []string{billing.OwnerLaunchingJob, billing.OwnerPool} {
				r := spend.NewReader(st, func(string) (float64, bool) { return odPrice, true })
				compare(t, r, st, owner, now)
				rng := rand.New(rand.NewPCG(7, uint64(len(owner))))
				live := []string{}
				for step := range 12 {
					now = now.Add(time.Duration(1+rng.IntN(20)) * time.Minute)
					writeSome(t, st, rng, now, step, &live)
					compare(t, r, st, owner, now)
					compare(t, r, st, owner, now) // unchanged: from memory
				}
			}
		})
	}
}

// writeSome launches an instance with a job run, ends one, records a
// state event and corrects a price, as burst-resume, the epilog and the
// ledger sync do.
func writeSome(t *testing.T, st *store.Store, rng *rand.Rand, now time.Time, step int, live *[]string) {
	t.Helper()
	ctx := context.Background()
	id := fmt.Sprintf("i-reader%03d", step)
	node := fmt.Sprintf("l4-r%d", step%4) // nodes reused: runs must find their instance
	job := fmt.Sprint(900000 + step)
	launched := now.Add(-time.Duration(rng.IntN(300)) * time.Second)
	err := st.RecordInstance(ctx, store.Launch{PriceUSD: 0.5 + rng.Float64(), Event: sizerapi.InstanceEvent{InstanceID: id, Node: node, InstanceType: "g6.xlarge", Zone: "us-east-1a",
		Capacity: "spot", PriceUSD: 0.5 + rng.Float64(), Account: "nlp", User: "ada", Time: launched, Job: &sizerapi.Job{JobID: job, JobName: "train", Account: "nlp", User: "ada", GPUsPerNode: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RecordState(ctx, id, "running", launched.Add(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordRun(ctx, sizerapi.JobRun{JobID: job, Account: "nlp", User: "ada", Nodes: []string{node}, GPUsPerNode: 1, Start: launched.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	*live = append(*live, id)
	if len(*live) > 2 && rng.IntN(2) == 0 { // end the oldest: its run, then the instance
		old := (*live)[0]
		*live = (*live)[1:]
		end := now.Add(-time.Duration(rng.IntN(30)) * time.Second)
		if _, err := st.RecordEnd(ctx, old, end, sizerapi.SourceBurst, ""); err != nil {
			t.Fatal(err)
		}
		if err := st.SetPrice(ctx, old, 0.33, "spot-history"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestJobSpendMatchesWholeRead: the store's per-job spend (the Jobs page),
// which reads only the instances a job can owe for, equals the charges of
// every instance in the window.
func TestJobSpendMatchesWholeRead(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC)
	if _, err := dashtest.Fill(ctx, st, dashtest.Spec{Jobs: 400, Now: now, Live: 8}); err != nil {
		t.Fatal(err)
	}
	// instances with job runs on reused nodes, some ended
	rng := rand.New(rand.NewPCG(3, 4))
	live := []string{}
	for step := range 12 {
		now = now.Add(time.Duration(1+rng.IntN(20)) * time.Minute)
		writeSome(t, st, rng, now, step, &live)
	}
	// warm reuse: a second job runs on the instance launched for the first
	w0 := now.Add(-50 * time.Minute)
	if err := st.RecordInstance(ctx, store.Launch{PriceUSD: 0.8, Event: sizerapi.InstanceEvent{InstanceID: "i-warm", Node: "l4-w", InstanceType: "g6.xlarge", Capacity: "on-demand",
		PriceUSD: 0.8, Account: "nlp", User: "ada", Time: w0, Job: &sizerapi.Job{JobID: "800000", JobName: "a", Account: "nlp", User: "ada", GPUsPerNode: 1}}}); err != nil {
		t.Fatal(err)
	}
	for i, j := range []string{"800000", "800001"} {
		r := sizerapi.JobRun{JobID: j, Account: "vision", User: "bo", Nodes: []string{"l4-w"}, GPUsPerNode: 1, Start: w0.Add(time.Duration(2+20*i) * time.Minute)}
		if i == 0 {
			r.End = w0.Add(15 * time.Minute)
		}
		if err := st.RecordRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	since := now.AddDate(0, -1, 0)
	rows, err := st.Rows(ctx, since, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, owner := range []string{billing.OwnerLaunchingJob, billing.OwnerPool} {
		want := map[string]float64{}
		for _, r := range rows {
			for _, c := range r.Charges(since, now.AddDate(1, 0, 0), now, owner) {
				if c.JobID != "" {
					want[c.JobID] += c.USD
				}
			}
		}
		var ids []string
		for id := range want {
			ids = append(ids, id)
		}
		if owner == billing.OwnerLaunchingJob && len(ids) < 300 || len(ids) < 12 {
			t.Fatalf("only %d jobs with spend in the test data", len(ids))
		}
		if want["800001"] == 0 {
			t.Fatal("the reused instance's second job has no spend in the test data")
		}
		got, err := st.JobSpend(ctx, ids, owner, since, now)
		if err != nil {
			t.Fatal(err)
		}
		sameMap(t, "job spend ("+owner+")", got, want)
		// one job alone: its share of an instance launched for another
		one, err := st.JobSpend(ctx, []string{"800001"}, owner, since, now)
		if err != nil {
			t.Fatal(err)
		}
		sameMap(t, "job 800001's spend ("+owner+")", one, map[string]float64{"800001": want["800001"]})
	}
}
