package usage_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/dash/dashtest"
	"github.com/burst-hpc/burst/sizer/store"
	"github.com/burst-hpc/burst/sizer/store/storetest"
	"github.com/burst-hpc/burst/sizer/usage"
)

// compare checks the Reader's month against a fresh read of the store
// (every job's usage, and the order); it returns how many jobs the read
// took from the store.
func compare(t *testing.T, r *usage.Reader, st *store.Store, now time.Time) int {
	t.Helper()
	before := usage.ReadOf(r)
	got, err := r.Month(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	want, err := st.JobUsages(context.Background(), store.JobQuery{Since: billing.MonthStart(now)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d jobs, a fresh read %d", len(got), len(want))
	}
	byID := map[string]sizerapi.JobUsage{}
	for _, j := range want {
		byID[j.JobID] = j
	}
	for i, j := range got {
		if !reflect.DeepEqual(j, byID[j.JobID]) {
			t.Errorf("job %s: %+v, a fresh read %+v", j.JobID, j, byID[j.JobID])
		}
		if i > 0 && (got[i-1].LastSeen.Before(j.LastSeen) || got[i-1].LastSeen.Equal(j.LastSeen) && got[i-1].JobID < j.JobID) {
			t.Errorf("jobs %s and %s are not newest first", got[i-1].JobID, j.JobID)
		}
	}
	return usage.ReadOf(r) - before
}

// TestReaderMatchesFreshReads: the month's usage kept in memory equals a
// fresh read as agents report samples and summaries, jobs launch, start
// and end, on both drivers; a read re-reads only the jobs written since
// the last (none when nothing was).
func TestReaderMatchesFreshReads(t *testing.T) {
	for _, driver := range []string{store.DriverSQLite, store.DriverPostgres} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			st := storetest.Open(t, driver)
			now := time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC)
			if _, err := dashtest.Fill(ctx, st, dashtest.Spec{Jobs: 200, Now: now, Live: 5, Waits: true}); err != nil {
				t.Fatal(err)
			}
			r := usage.NewReader(st)
			if n := compare(t, r, st, now); n != 200 {
				t.Errorf("the first read took %d jobs; want the month's 200", n)
			}
			if n := compare(t, r, st, now); n != 0 {
				t.Errorf("a read with nothing written took %d jobs from the store", n)
			}
			seq := uint64(1 << 20)
			for step := range 5 {
				now = now.Add(3 * time.Minute)
				// a running job's GPU samples (GPU 1 busy now), a summary
				// of one without samples, a new job's launch and start, an end
				live := uint32(1000 + 195 + step)
				b := sizerapi.ReportBatch{Node: "r-node", InstanceID: "i-x", GPUSource: sizerapi.GPUSourceNVML}
				seq++
				rec := sizerapi.Record{Seq: seq, Time: now, Kind: sizerapi.KindGPU}
				for g := range 4 {
					rec.GPUs = append(rec.GPUs, sizerapi.GPUReading{Index: g, UtilPercent: uint32(30 * g), MemoryUsedBytes: uint64(g) << 30, MemoryTotalBytes: 24 << 30, JobIDs: []uint32{live}})
				}
				seq++
				sum := sizerapi.Record{Seq: seq, Time: now, Kind: sizerapi.KindJobSummary, Summary: &sizerapi.JobSummary{JobID: uint32(5000 + step), Start: now.Add(-time.Hour), End: now,
					GPUs: []string{"GPU-a", "GPU-b"}, MeanUtilPercent: 55, PeakMemoryBytes: 9 << 30, MemoryTotalBytes: 24 << 30}}
				b.Records = []sizerapi.Record{rec, sum}
				if _, err := st.AddBatch(ctx, b); err != nil {
					t.Fatal(err)
				}
				job := sizerapi.Job{JobID: fmt.Sprint(5000 + step), JobName: "new", User: "u", Account: "nlp", Class: "l4", GPUsPerNode: 2, Nodes: 1}
				if err := st.RecordLaunch(ctx, sizerapi.InstanceEvent{InstanceID: fmt.Sprintf("i-new%d", step), Node: "l4-9", InstanceType: "g6.xlarge", Time: now, Job: &job}, 0.5); err != nil {
					t.Fatal(err)
				}
				if err := st.StartRun(ctx, "k", sizerapi.JobStart{Job: job, Start: now, Submit: now.Add(-time.Minute)}); err != nil {
					t.Fatal(err)
				}
				if _, err := st.EndRun(ctx, sizerapi.JobEnd{JobID: fmt.Sprint(1000 + 150 + step), End: now, ExitCode: 1}); err != nil {
					t.Fatal(err)
				}
				if n := compare(t, r, st, now); n == 0 || n > 4 {
					t.Errorf("step %d: the read took %d jobs from the store; want the few written (at most 4)", step, n)
				}
			}
		})
	}
}
