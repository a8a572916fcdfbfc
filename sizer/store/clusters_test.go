package store

import (
	"context"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// jobsPerCluster is migration 00010: the cluster in every per-job table's
// key (jobsAdopted, the Go one after it, gives older rows a cluster).
const jobsPerCluster = 10

// Two clusters sharing one database both have a job 5: each writes its
// own request, decision, attempts, runs, GPU reports, history and spot
// notice under it, and each reads back its own, on both drivers.
func TestClustersKeepTheirOwnJobs(t *testing.T) { forDrivers(t, testClustersKeepTheirOwnJobs) }

type clusterJob struct {
	cluster, user, account, class, instance, node string
	gpus, attempt                                 int
	memGiB                                        uint64
	oom                                           bool
}

func testClustersKeepTheirOwnJobs(t *testing.T, d driverCase) {
	tg := d.fresh(t)
	t0 := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	jobs := []clusterJob{
		{cluster: "east", user: "ann", account: "nlp", class: "l4", instance: "i-east", node: "gpu-1", gpus: 1, attempt: 1, memGiB: 3},
		// the same node name on the other cluster
		{cluster: "west", user: "bob", account: "cv", class: "a10g", instance: "i-west", node: "gpu-1", gpus: 4, attempt: 2, memGiB: 20, oom: true},
	}
	stores := map[string]*Store{}
	for _, j := range jobs {
		s := tg.open(t, ForCluster(j.cluster))
		stores[j.cluster] = s
		writeClusterJob(t, s, j, t0)
	}
	for _, j := range jobs {
		checkClusterJob(t, stores[j.cluster], j, t0)
	}
}

func writeClusterJob(t *testing.T, s *Store, j clusterJob, t0 time.Time) {
	t.Helper()
	ctx := context.Background()
	job := sizerapi.Job{JobID: "5", User: j.user, Account: j.account, JobName: "train", Class: j.class, GPUsPerNode: j.gpus, Nodes: 1, Attempt: j.attempt}
	if err := s.RecordInstance(ctx, Launch{Event: sizerapi.InstanceEvent{InstanceID: j.instance, Node: j.node, InstanceType: "g6.xlarge", Zone: "us-east-1a",
		Capacity: "spot", Time: t0, Job: &job}, PriceUSD: 1, PriceSource: PriceResume}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordDecision(ctx, sizerapi.JobDecision{JobID: "5", Time: t0, Class: j.class, InstanceType: "g6.xlarge", Reason: "cheapest for " + j.cluster}); err != nil {
		t.Fatal(err)
	}
	if err := s.StartRun(ctx, "train-key", sizerapi.JobStart{Job: job, Start: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordRun(ctx, sizerapi.JobRun{JobID: "5", Nodes: []string{j.node}, Account: j.account, User: j.user, GPUsPerNode: j.gpus, Start: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddBatch(ctx, gpuBatch(j.node, j.instance, sizerapi.GPUSourceNVML, 1, t0.Add(time.Minute), 5, j.memGiB, 24)); err != nil {
		t.Fatal(err)
	}
	notice := sizerapi.ReportBatch{Node: j.node, InstanceID: j.instance, Records: []sizerapi.Record{{Seq: 2, Time: t0.Add(2 * time.Minute), Kind: sizerapi.KindInterruption,
		Event: &sizerapi.Event{InstanceID: j.instance, NoticeTime: t0.Add(2 * time.Minute), Action: "terminate",
			Jobs: []sizerapi.JobEvent{{JobID: 5, Signal: "USR1-" + j.cluster, Requeued: true}}}}}}
	if _, err := s.AddBatch(ctx, notice); err != nil {
		t.Fatal(err)
	}
	if known, err := s.EndRun(ctx, sizerapi.JobEnd{JobID: "5", End: t0.Add(time.Hour), ExitCode: 1, OOM: j.oom}); err != nil || !known {
		t.Fatalf("ending job 5 of %s: known %v, %v", j.cluster, known, err)
	}
}

func checkClusterJob(t *testing.T, s *Store, j clusterJob, t0 time.Time) {
	t.Helper()
	ctx := context.Background()
	us, err := s.Jobs(ctx, time.Time{}, "", "", 0)
	if err != nil || len(us) != 1 {
		t.Fatalf("%s: jobs %+v %v, want job 5 once", j.cluster, us, err)
	}
	if u := us[0]; u.User != j.user || u.Account != j.account || u.GPUsPerNode != j.gpus || u.PeakMemMiB != int(j.memGiB<<10) {
		t.Errorf("%s: job 5 reads %+v, want user %s account %s %d GPUs peak %d MiB", j.cluster, u, j.user, j.account, j.gpus, j.memGiB<<10)
	}
	// history: east's run is usage; west's ran out of GPU memory with its 4
	// GPUs (an OOM run is not usage)
	h, err := s.HistoryByKey(ctx, "train-key", 10)
	switch {
	case err != nil:
		t.Fatal(err)
	case j.oom && (h.LastOOM == nil || h.LastOOM.GPUsPerNode != j.gpus || h.Jobs != 0):
		t.Errorf("%s: history %+v (OOM %+v), want its out-of-memory run with %d GPUs", j.cluster, h, h.LastOOM, j.gpus)
	case !j.oom && (h.LastOOM != nil || h.Jobs != 1 || h.PeakPerGPUMiB != int(j.memGiB<<10)):
		t.Errorf("%s: history %+v, want one run peaking at %d MiB", j.cluster, h, j.memGiB<<10)
	}
	runs, err := s.JobRuns(ctx, []string{"5"})
	if err != nil {
		t.Fatal(err)
	}
	r := runs["5"]
	if r.Instances != 1 || r.Attempts != j.attempt || r.Decision == nil || r.Decision.Reason != "cheapest for "+j.cluster {
		t.Errorf("%s: job 5's runs %+v (decision %+v), want its one instance, attempt %d and its decision", j.cluster, r, r.Decision, j.attempt)
	}
	if len(r.Interruptions) != 1 || r.Interruptions[0].InstanceID != j.instance || r.Interruptions[0].Signal != "USR1-"+j.cluster {
		t.Errorf("%s: job 5's spot notices %+v, want its own instance's", j.cluster, r.Interruptions)
	}
	if live, err := s.LiveJobIDs(ctx, j.account); err != nil || len(live) != 1 {
		t.Errorf("%s: live jobs of %s %v %v, want job 5", j.cluster, j.account, live, err)
	}
	// the ledger attaches each cluster's run to its own instance of the
	// node name both use
	rows, err := s.Rows(ctx, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if len(row.Runs) != 1 || row.Runs[0].Account != map[string]string{"i-east": "nlp", "i-west": "cv"}[row.ID] {
			t.Errorf("%s: ledger row %s (cluster %s) has runs %+v, want its own cluster's one", j.cluster, row.ID, row.Cluster, row.Runs)
		}
	}
}

// Migration 00010 keeps every row of the per-job tables; the first sizer
// to migrate (cluster.name ml-prod) takes them, with the instances from
// before clusters were kept; another cluster's sizer sees none of them.
// Down brings the old keys back, rows kept.
func TestMigratesJobsIntoClusters(t *testing.T) { forDrivers(t, testMigratesJobsIntoClusters) }

func testMigratesJobsIntoClusters(t *testing.T, d driverCase) {
	ctx := context.Background()
	tg := d.fresh(t)
	raw := rawDB(t, tg.cfg)
	p, err := provider(raw, tg.cfg.Driver)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, jobsPerCluster-1); err != nil {
		t.Fatalf("migrating to %d: %v", jobsPerCluster-1, err)
	}
	for _, q := range []string{
		`INSERT INTO instances(instance_id, node, instance_type, zone, capacity, price, account, job_id, launched) VALUES('i-1', 'l4-1', 'g6.xlarge', 'us-east-1a', 'spot', 1, 'nlp', '5', 1000)`,
		`INSERT INTO jobs(job_id, job_name, user, account, class, gpu_model, gpus_per_node, nodes, gpu_mem_mib, updated, job_key, started) VALUES('5', 'ft', 'ann', 'nlp', 'l4', 'L4', 1, 1, 0, 1000, 'k1', 1000)`,
		`INSERT INTO job_runs(job_id, node, account, user, gpus, start) VALUES('5', 'l4-1', 'nlp', 'ann', 1, 1000)`,
		`INSERT INTO job_decisions(job_id, ts, class, reason) VALUES('5', 1000, 'l4', 'cheapest')`,
		`INSERT INTO job_attempts(job_id, attempt, ts) VALUES('5', 2, 1000)`,
		`INSERT INTO job_gpu(job_id, node, gpu, samples, util_sum, mem_peak, mem_total) VALUES('5', 'l4-1', 0, 1, 80, 3221225472, 23622320128)`,
		`INSERT INTO job_node(job_id, node, peak_mem, first_ts, last_ts) VALUES('5', 'l4-1', 3221225472, 1000, 1000)`,
		`INSERT INTO interruptions(instance_id, node, action, ts) VALUES('i-1', 'l4-1', 'terminate', 2000)`,
		`INSERT INTO interruption_jobs(instance_id, ts, job_id, signal, checkpointed, requeued, waited_ms) VALUES('i-1', 2000, '5', 'USR1', 1, 1, 10)`,
	} {
		if _, err := raw.ExecContext(ctx, rewrite(tg.cfg.Driver, q)); err != nil {
			t.Fatalf("filling the tables: %v\n%s", err, q)
		}
	}
	s := tg.open(t, ForCluster("ml-prod"))
	if cur, newest, err := s.SchemaVersion(ctx); err != nil || cur != newest || cur < jobsAdopted {
		t.Fatalf("schema version %d of %d: %v", cur, newest, err)
	}
	for _, tb := range append([]string{"instances"}, perJobTables...) {
		var n, mine int
		if err := raw.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(CASE WHEN cluster = 'ml-prod' THEN 1 ELSE 0 END), 0) FROM `+tb).Scan(&n, &mine); err != nil || n != 1 || mine != 1 {
			t.Errorf("%s after migrating: %d rows, %d of cluster ml-prod (%v), want 1 and 1", tb, n, mine, err)
		}
	}
	runs, err := s.JobRuns(ctx, []string{"5"})
	if err != nil {
		t.Fatal(err)
	}
	if r := runs["5"]; r.Instances != 1 || r.Attempts != 2 || r.Decision == nil || r.Decision.Reason != "cheapest" || len(r.Interruptions) != 1 || r.Interruptions[0].Signal != "USR1" {
		t.Errorf("job 5 after migrating: %+v, want its instance, attempt 2, decision and spot notice", r)
	}
	if h, err := s.HistoryByKey(ctx, "k1", 10); err != nil || h.Jobs != 1 || h.PeakPerGPUMiB != 3<<10 {
		t.Errorf("history after migrating: %+v %v, want the one run at 3072 MiB", h, err)
	}
	other := tg.open(t, ForCluster("ml-dev"))
	if us, err := other.Jobs(ctx, time.Time{}, "", "", 0); err != nil || len(us) != 0 {
		t.Errorf("another cluster reads jobs %+v %v, want none", us, err)
	}
	// a second cluster's job 5, then back to the old keys: one job 5 stays
	if err := other.UpsertJob(ctx, sizerapi.Job{JobID: "5", User: "bob", Account: "cv", JobName: "eval", GPUsPerNode: 1, Nodes: 1}, time.UnixMilli(3000)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	other.Close()
	if _, err := p.DownTo(ctx, jobsPerCluster-1); err != nil {
		t.Fatalf("migrating back to %d: %v", jobsPerCluster-1, err)
	}
	for _, tb := range perJobTables {
		var n int
		if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM `+tb+` WHERE job_id = '5'`).Scan(&n); err != nil || n != 1 {
			t.Errorf("after migrating back, %s has %d rows of job 5 (%v), want 1", tb, n, err)
		}
	}
	var user string
	if err := raw.QueryRowContext(ctx, rewrite(tg.cfg.Driver, `SELECT user FROM jobs WHERE job_id = '5'`)).Scan(&user); err != nil || user != "bob" {
		t.Errorf("after migrating back, job 5 is %q's (%v), want ml-dev's (bob: the first cluster by name)", user, err)
	}
}
