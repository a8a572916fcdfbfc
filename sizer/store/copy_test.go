package store

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/pgtest"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

// A used SQLite store copies into an empty PostgreSQL with every row of
// every table, checked by count and checksum; a destination with rows is
// refused.
func TestCopySQLiteToPostgres(t *testing.T) {
	ctx := context.Background()
	src := target{Config{Driver: DriverSQLite, Dir: t.TempDir()}}.open(t)
	fillEveryTable(t, src.w.DB)
	t0 := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	for i, id := range []string{"i-a", "i-b", "i-c"} {
		if err := src.RecordInstance(ctx, Launch{Event: sizerapi.InstanceEvent{InstanceID: id, Node: "l4-1", InstanceType: "g6.xlarge", Zone: "us-east-1a", Capacity: "spot",
			Time: t0.Add(time.Duration(i) * time.Minute), Job: &sizerapi.Job{JobID: "7", User: "ann", Account: "nlp", JobName: "ft", GPUsPerNode: 1, Nodes: 1}},
			PriceUSD: 0.1 + float64(i)/3, PriceSource: PriceResume}); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.RecordRun(ctx, sizerapi.JobRun{JobID: "7", Nodes: []string{"l4-1"}, Account: "nlp", User: "ann", GPUsPerNode: 1, Start: t0, End: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// jobs' rows with both a launch and a run, and a run only (one table
	// since migration 00008)
	for _, id := range []string{"7", "8"} {
		if err := src.StartRun(ctx, "ann/ft", sizerapi.JobStart{Job: sizerapi.Job{JobID: id, User: "ann", Account: "nlp", JobName: "ft", GPUsPerNode: 1, Nodes: 1}, Start: t0}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := src.EndRun(ctx, sizerapi.JobEnd{JobID: "7", End: t0.Add(time.Hour), ExitCode: 1, OOM: true, Evidence: "CUDA out of memory"}); err != nil {
		t.Fatal(err)
	}
	srv := pgtest.Start(t)
	dst := target{Config{Driver: DriverPostgres, Postgres: Postgres{URL: srv.NewDatabase(t)}}}.open(t)
	rep, err := Copy(ctx, src, dst)
	if err != nil {
		t.Fatalf("copy: %v", err)
	}
	if len(rep) < 18 {
		t.Errorf("copied %d tables, want every one of the schema's 18", len(rep))
	}
	for _, tc := range rep {
		if tc.Rows == 0 || tc.Rows != tc.Copied {
			t.Errorf("%s: %d rows, %d copied", tc.Table, tc.Rows, tc.Copied)
		}
	}
	a, err := src.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := dst.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for tb, rows := range a {
		if tb == VersionTable || tb == "sqlite_sequence" || slices.Contains(changeLogTables, tb) {
			continue // the change log is derived: the copy's own writes fill it
		}
		if strings.Join(sortedCopy(rows), "\n") != strings.Join(sortedCopy(b[tb]), "\n") {
			t.Errorf("%s differs:\nsqlite   %q\npostgres %q", tb, rows, b[tb])
		}
	}
	// the copied ledger reads the same
	ra, _ := src.Rows(ctx, time.Time{}, time.Time{})
	rb, _ := dst.Rows(ctx, time.Time{}, time.Time{})
	if len(ra) != 4 || len(rb) != len(ra) {
		t.Errorf("ledger rows: sqlite %d, postgres %d, want 4", len(ra), len(rb))
	}
	if _, err := Copy(ctx, src, dst); err == nil || !strings.Contains(err.Error(), "already has") {
		t.Errorf("copy into a used database: %v", err)
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	slices.Sort(out)
	return out
}
