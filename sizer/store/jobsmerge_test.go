package store

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// oneJobsTable is the migration that merged job_history into jobs and
// dropped records_seen (issue 24).
const oneJobsTable = 8

// A store at the migration before the merge, with a job in both jobs and
// job_history, one only in jobs, one only in job_history and a
// records_seen row, migrates on both drivers and every fact is still
// readable through the store: the launched jobs' listing, the recurring
// job's history (its out-of-memory run), which jobs started; migrating
// back splits the table again.
func TestMigratesJobHistoryIntoJobs(t *testing.T) { forDrivers(t, testMigratesJobHistoryIntoJobs) }

func testMigratesJobHistoryIntoJobs(t *testing.T, d driverCase) {
	ctx := context.Background()
	tg := d.fresh(t)
	raw := rawDB(t, tg.cfg)
	p, err := provider(raw, tg.cfg.Driver)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, oneJobsTable-1); err != nil {
		t.Fatalf("migrating to %d: %v", oneJobsTable-1, err)
	}
	for _, q := range []string{
		`INSERT INTO jobs(job_id, job_name, user, account, class, gpu_model, gpus_per_node, nodes, gpu_mem_mib, updated) VALUES('1', 'ft', 'ann', 'nlp', '', 'L4', 1, 1, 0, 1000)`,
		`INSERT INTO jobs(job_id, job_name, user, account, class, gpu_model, gpus_per_node, nodes, gpu_mem_mib, updated) VALUES('2', 'eval', 'bob', 'cv', 'a10g', 'A10G', 4, 2, 24000, 1500)`,
		`INSERT INTO job_history(job_id, job_key, user, job_name, account, class, gpu_model, gpus_per_node, nodes, gpu_mem_mib, started, ended, exit_code, oom, evidence)
VALUES('1', 'k1', 'ann', 'ft', 'nlp', 'l4', 'L4', 2, 1, 22000, 2000, 3000, 1, 1, 'CUDA out of memory')`,
		`INSERT INTO job_history(job_id, job_key, user, job_name, account, class, gpu_model, gpus_per_node, nodes, gpu_mem_mib, started) VALUES('3', 'k1', 'ann', 'ft', 'nlp', 'l4', 'L4', 1, 1, 0, 2500)`,
		`INSERT INTO records_seen(node, seq, kind, ts) VALUES('l4-1', 1, 'gpu', 1000)`,
	} {
		if _, err := raw.ExecContext(ctx, rewrite(tg.cfg.Driver, q)); err != nil {
			t.Fatalf("filling the old tables: %v\n%s", err, q)
		}
	}
	s := tg.open(t)
	if cur, newest, err := s.SchemaVersion(ctx); err != nil || cur != newest || cur < oneJobsTable {
		t.Fatalf("schema version %d of %d: %v", cur, newest, err)
	}
	dump, err := s.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"job_history", "records_seen"} {
		if _, ok := dump[gone]; ok {
			t.Errorf("table %s still there after the merge", gone)
		}
	}
	if len(dump["jobs"]) != 3 {
		t.Errorf("jobs rows %q, want 3", dump["jobs"])
	}
	checkMergedListing(t, s)
	checkMergedHistory(t, s)
	s.Close()

	if _, err := p.DownTo(ctx, oneJobsTable-1); err != nil {
		t.Fatalf("migrating back to %d: %v", oneJobsTable-1, err)
	}
	for tb, want := range map[string]int{"jobs": 2, "job_history": 2, "records_seen": 0} {
		var n int
		if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM `+tb).Scan(&n); err != nil || n != want {
			t.Errorf("after migrating back, %s has %d rows (%v), want %d", tb, n, err, want)
		}
	}
}

// checkMergedListing: the jobs launched for (1 and 2, not 3) list with
// their requests, job 1's empty class and smaller counts filled from its
// history.
func checkMergedListing(t *testing.T, s *Store) {
	t.Helper()
	jobs, err := s.Jobs(context.Background(), time.Time{}, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]sizerapi.JobUsage{}
	for _, j := range jobs {
		got[j.JobID] = j
	}
	if len(jobs) != 2 {
		t.Fatalf("listed jobs %+v, want 1 and 2", jobs)
	}
	if j := got["1"]; j.User != "ann" || j.Account != "nlp" || j.JobName != "ft" || j.Class != "l4" || j.GPUModel != "L4" ||
		j.GPUsPerNode != 2 || j.GPUMemoryMiB != 22000 || !j.LastSeen.Equal(time.UnixMilli(1000)) {
		t.Errorf("job 1 after the merge: %+v", j)
	}
	if j := got["2"]; j.User != "bob" || j.Account != "cv" || j.Class != "a10g" || j.GPUsPerNode != 4 || j.Nodes != 2 || j.GPUMemoryMiB != 24000 ||
		!j.LastSeen.Equal(time.UnixMilli(1500)) {
		t.Errorf("job 2 after the merge: %+v", j)
	}
}

// checkMergedHistory: the recurring job's out-of-memory run is still its
// last OOM; jobs 1 and 3 started (their end is recorded), job 2 did not.
func checkMergedHistory(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	h, err := s.HistoryByKey(ctx, "k1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if h.LastOOM == nil || h.LastOOM.JobID != "1" || h.LastOOM.Evidence != "CUDA out of memory" || h.LastOOM.GPUMemoryMiB != 22000 || h.LastOOM.GPUsPerNode != 2 {
		t.Errorf("history of k1: last OOM %+v", h.LastOOM)
	}
	var started sql.NullInt64
	if err := s.r.QueryRowContext(ctx, `SELECT started FROM jobs WHERE job_id = '3' AND job_key = 'k1'`).Scan(&started); err != nil || started.Int64 != 2500 {
		t.Errorf("job 3's start: %v %v", started, err)
	}
	for id, want := range map[string]bool{"1": true, "2": false, "3": true} {
		if known, err := s.EndRun(ctx, sizerapi.JobEnd{JobID: id, End: time.UnixMilli(4000)}); err != nil || known != want {
			t.Errorf("end of job %s: known %v (%v), want %v", id, known, err, want)
		}
	}
}

// rawDB opens the target's database without migrating it.
func rawDB(t *testing.T, cfg Config) *sql.DB {
	t.Helper()
	driver, dsn := "pgx", cfg.Postgres.URL
	if cfg.Driver == DriverSQLite {
		if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
			t.Fatal(err)
		}
		driver, dsn = "sqlite", "file:"+filepath.Join(cfg.Dir, FileName)
	}
	raw, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	raw.SetMaxOpenConns(1)
	t.Cleanup(func() { raw.Close() })
	return raw
}
