package server

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm"
)

// TestNodeReportsTrustTheSizersRecords: what a node credential may make
// the sizer believe. Every refused attempt leaves the store as it was,
// table by table.
func TestNodeReportsTrustTheSizersRecords(t *testing.T) {
	f := start(t, nil)
	ctx := context.Background()
	spotCred, spot := f.node(t, "gpu-1", "g6.xlarge", "us-east-1a", true)
	odCred, _ := f.node(t, "gpu-2", "g5.xlarge", "us-east-1b", false)
	f.runs(10, "gpu-1") // gpu-1's job
	f.runs(20, "gpu-2") // another user's job on gpu-2
	nc, od := f.client(t, spotCred), f.client(t, odCred)
	now := f.clk.Now()

	before := f.dump(t)
	refusedAll := func(what string, err error, code string) {
		t.Helper()
		if err == nil || apiCode(err) != code {
			t.Errorf("%s: %v, want %s", what, err, code)
		}
		sameStore(t, what, before, f.dump(t))
	}
	// interruptions: the body names nothing the sizer believes
	refusedAll("interruption in 2100", nc.Interruption(ctx, sizerapi.Interruption{Action: "terminate", Time: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}), sizerapi.CodeBadRequest)
	refusedAll("interruption of another instance", nc.Interruption(ctx, sizerapi.Interruption{InstanceID: "i-0123456789abcdef0", Action: "terminate"}), sizerapi.CodeForbidden)
	refusedAll("interruption of another node", nc.Interruption(ctx, sizerapi.Interruption{Node: "gpu-2", Action: "terminate"}), sizerapi.CodeForbidden)
	refusedAll("interruption of another pool", nc.Interruption(ctx, sizerapi.Interruption{InstanceType: "p5.48xlarge", Zone: "us-east-1a", Action: "terminate"}), sizerapi.CodeForbidden)
	refusedAll("spot notice of an on-demand instance", od.Interruption(ctx, sizerapi.Interruption{Action: "terminate"}), sizerapi.CodeBadRequest)
	// a batch of only forged records: refused record by record, nothing stored
	forged := sizerapi.ReportBatch{GPUSource: sizerapi.GPUSourceNVML, Records: []sizerapi.Record{
		{Seq: 1, Time: now, Kind: sizerapi.KindInterruption, Event: &sizerapi.Event{Action: "terminate", NoticeTime: now.AddDate(50, 0, 0)}},
		{Seq: 2, Time: now, Kind: sizerapi.KindGPU, GPUs: []sizerapi.GPUReading{{Index: 0, UtilPercent: 1, MemoryUsedBytes: 1 << 20, MemoryTotalBytes: 24 << 30, JobIDs: []uint32{20}}}},
		{Seq: 3, Time: now, Kind: sizerapi.KindJobSummary, Summary: &sizerapi.JobSummary{JobID: 20, Start: now, End: now, MeanUtilPercent: 1}},
		{Seq: 4, Time: now, Kind: sizerapi.KindGPU, GPUs: []sizerapi.GPUReading{{Index: 0, UtilPercent: 1, JobIDs: []uint32{999}}}},
		{Seq: 5, Time: now, Kind: sizerapi.KindInterruption, Event: &sizerapi.Event{InstanceID: "i-0123456789abcdef0", Action: "terminate", NoticeTime: now}},
	}}
	res, err := nc.Report(ctx, forged)
	if err != nil || res.Accepted != 0 || res.Refused != 5 || len(res.Problems) != 5 {
		t.Errorf("forged batch: %+v %v", res, err)
	}
	sameStore(t, "a batch of forged records", before, f.dump(t))
	// batched interruption records: jobs, deadline and error are checked
	forged = sizerapi.ReportBatch{GPUSource: sizerapi.GPUSourceNVML, Records: []sizerapi.Record{
		// root on gpu-1 attaches "requeued, signal KILL" to gpu-2's job (issue 25)
		{Seq: 6, Time: now, Kind: sizerapi.KindInterruption, Event: &sizerapi.Event{Action: "terminate", NoticeTime: now, Deadline: now.Add(2 * time.Minute),
			Jobs: []sizerapi.JobEvent{{JobID: 20, Signal: "KILL", Requeued: true}}}},
		{Seq: 7, Time: now, Kind: sizerapi.KindInterruption, Event: &sizerapi.Event{Action: "terminate", NoticeTime: now, Deadline: now.Add(5 * time.Hour)}},
		{Seq: 8, Time: now, Kind: sizerapi.KindInterruption, Event: &sizerapi.Event{Action: "terminate", NoticeTime: now, Error: strings.Repeat("x", 5000)}},
	}}
	res, err = nc.Report(ctx, forged)
	if err != nil || res.Accepted != 0 || res.Refused != 3 || len(res.Problems) != 3 ||
		!strings.Contains(res.Problems[0], "names job 20, which did not run on node gpu-1") ||
		!strings.Contains(res.Problems[1], "deadline") || !strings.Contains(res.Problems[2], "error longer than") {
		t.Errorf("forged interruption records: %+v %v", res, err)
	}
	sameStore(t, "a batch of forged interruption records", before, f.dump(t))
	refusedAll("batch for another node", func() error { _, err := nc.Report(ctx, gpuBatch("gpu-2", 1, 1, 20, now)); return err }(), sizerapi.CodeForbidden)
	refusedAll("batch for another instance", func() error {
		b := gpuBatch("gpu-1", 1, 1, 10, now)
		b.InstanceID = "i-0123456789abcdef0"
		_, err := nc.Report(ctx, b)
		return err
	}(), sizerapi.CodeForbidden)

	// the node's own job counts; another job's samples on the same GPU are
	// stripped; times are clamped into [launch, now]
	mixed := sizerapi.ReportBatch{GPUSource: sizerapi.GPUSourceNVML, Records: []sizerapi.Record{
		{Seq: 10, Time: now.AddDate(1, 0, 0), Kind: sizerapi.KindGPU, GPUs: []sizerapi.GPUReading{{Index: 0, UtilPercent: 90, MemoryUsedBytes: 2 << 30, MemoryTotalBytes: 24 << 30, JobIDs: []uint32{10, 20}}}},
		{Seq: 11, Time: now.AddDate(-1, 0, 0), Kind: sizerapi.KindJobSummary, Summary: &sizerapi.JobSummary{JobID: 10, Start: now.AddDate(-1, 0, 0), End: now.AddDate(1, 0, 0), MeanUtilPercent: 90}},
	}}
	res, err = nc.Report(ctx, mixed)
	if err != nil || res.Accepted != 2 || res.Refused != 0 {
		t.Fatalf("own job: %+v %v", res, err)
	}
	after := f.dump(t)
	if !slicesContainsPrefix(after["job_gpu"], "10 | gpu-1 ") {
		t.Errorf("the node's own job's samples not stored: %q", after["job_gpu"])
	}
	for _, row := range after["job_gpu"] {
		if strings.HasPrefix(row, "20 ") {
			t.Errorf("another job's samples stored: %s", row)
		}
	}
	if len(after["reports_seen"]) == 0 {
		t.Fatal("no record of the node's reports stored: the clamping below checks nothing")
	}
	for _, row := range after["reports_seen"] {
		f := strings.Split(row, " | ")
		if ts, _ := strconv.ParseInt(f[len(f)-1], 10, 64); ts > now.Add(time.Minute).UnixMilli() || ts < now.Add(-time.Hour).UnixMilli() {
			t.Errorf("record time outside [launch, now]: %s", row)
		}
	}
	ins, _ := f.srv.Store().Interruptions(ctx, time.Time{})
	if len(ins) != 0 {
		t.Errorf("interruptions stored: %+v", ins)
	}
	// a real notice: instance, type and zone from the sizer's records
	if err := nc.Interruption(ctx, sizerapi.Interruption{Action: "terminate", Time: now}); err != nil {
		t.Fatal(err)
	}
	ins, _ = f.srv.Store().Interruptions(ctx, time.Time{})
	if len(ins) != 1 || ins[0].InstanceID != spot || ins[0].InstanceType != "g6.xlarge" || ins[0].Zone != "us-east-1a" || ins[0].Node != "gpu-1" || !ins[0].Time.Equal(now.Truncate(time.Millisecond)) {
		t.Errorf("stored interruption %+v", ins)
	}
	// a job of the same node name on an earlier instance is not this one's
	f.slurm.SetJobs(append(f.jobs(), slurm.Job{ID: 30, State: "COMPLETED", Nodes: "gpu-1", StartTime: now.Add(-24 * time.Hour)})...)
	if res, err := nc.Report(ctx, gpuBatch("gpu-1", 20, 1, 30, now)); err != nil || res.Refused != 1 {
		t.Errorf("a job that ran on the node name before this instance: %+v %v", res, err)
	}
	// Slurm unreachable: unverifiable now, retry later (the agent keeps its records)
	f.slurm.JobsErr = errors.New("slurmctld down")
	if _, err := nc.Report(ctx, gpuBatch("gpu-1", 30, 1, 11, now)); apiCode(err) != sizerapi.CodeUnverifiable {
		t.Errorf("Slurm down: %v", err)
	}
}

func TestNodeRateAndSizeLimits(t *testing.T) {
	f := start(t, nil, func(o *Options) { o.NodeRate, o.NodeBurst, o.NodeMaxRecords = 1, 3, 50 })
	ctx := context.Background()
	cred, _ := f.node(t, "gpu-1", "g5.xlarge", "us-east-1a", false)
	f.runs(1, "gpu-1")
	c := f.client(t, cred)
	if _, err := c.Report(ctx, gpuBatch("gpu-1", 1, 51, 1, f.clk.Now())); !isStatus(err, 413) {
		t.Errorf("51 records from a node: %v", err)
	}
	var limited error
	for i := range 5 {
		if _, err := c.Report(ctx, gpuBatch("gpu-1", uint64(100+i), 1, 1, f.clk.Now())); err != nil {
			limited = err
		}
	}
	if apiCode(limited) != sizerapi.CodeRateLimited {
		t.Errorf("5 requests at once with a burst of 3: %v", limited)
	}
	// the admin is not limited
	for range 5 {
		if _, err := f.client(t, f.token).Budgets(ctx); err != nil {
			t.Fatal(err)
		}
	}
	f.clk.Add(10 * time.Second)
	if _, err := c.Report(ctx, gpuBatch("gpu-1", 200, 1, 1, f.clk.Now())); err != nil {
		t.Errorf("after the bucket refilled: %v", err)
	}
}

func slicesContainsPrefix(rows []string, p string) bool {
	for _, r := range rows {
		if strings.HasPrefix(r, p) {
			return true
		}
	}
	return false
}
