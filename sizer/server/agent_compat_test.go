package server

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/burst-hpc/burst/agent/telemetry"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

// TestAgentHTTPSinkCompat posts batches with burst-agent's own sink and
// record types: the server must accept them (strict decoding included),
// count a resend as duplicates, and derive the job's usage.
func TestAgentHTTPSinkCompat(t *testing.T) {
	f := start(t, nil)
	cred := filepath.Join(t.TempDir(), "cred")
	tok, inst := f.node(t, "gpu-7", "g5.xlarge", "us-east-1a", true)
	f.runs(55, "gpu-7")
	if err := writeFile(cred, tok+"\n"); err != nil {
		t.Fatal(err)
	}
	sink := &telemetry.HTTPSink{URL: f.url + "/v1/reports", CredentialFile: cred, Client: f.httpClient(t)}
	now := f.clk.Now()
	b := sizerapi.ReportBatch{Node: "gpu-7", InstanceID: inst, GPUSource: sizerapi.GPUSourceNVML, Records: []sizerapi.Record{
		{Seq: 1, Time: now, Kind: sizerapi.KindGPU, GPUs: []sizerapi.GPUReading{
			{Time: now, Index: 0, UUID: "GPU-0", Name: "NVIDIA A10G", UtilPercent: 77, MemoryUsedBytes: 9 << 30, MemoryTotalBytes: 24 << 30, PowerWatts: 120, TemperatureC: 60, PIDs: []int{42}, JobIDs: []uint32{55}},
			{Time: now, Index: 1, UUID: "GPU-1", Name: "NVIDIA A10G", MemoryTotalBytes: 24 << 30},
		}},
		{Seq: 2, Time: now, Kind: sizerapi.KindJobSummary, Summary: &sizerapi.JobSummary{JobID: 55, Start: now, End: now.Add(time.Minute), GPUs: []string{"GPU-0"}, PeakMemoryBytes: 9 << 30, MemoryTotalBytes: 24 << 30, MeanUtilPercent: 77}},
		{Seq: 3, Time: now, Kind: sizerapi.KindInterruption, Event: &sizerapi.Event{InstanceID: inst, Action: "terminate", NoticeTime: now, Deadline: now.Add(2 * time.Minute),
			Jobs: []sizerapi.JobEvent{{JobID: 55, Signal: "USR1", Checkpointed: true, Waited: time.Second, Requeued: true}}}},
	}}
	ctx := context.Background()
	if err := sink.Send(ctx, b); err != nil {
		t.Fatalf("agent sink: %v", err)
	}
	if err := sink.Send(ctx, b); err != nil {
		t.Fatalf("agent sink resend: %v", err)
	}
	st := f.srv.Store()
	if n, err := st.CountRecords(ctx); err != nil || n != 3 {
		t.Fatalf("stored %d records (%v), want 3", n, err)
	}
	if ins, _ := st.Interruptions(ctx, now.Add(-time.Minute)); len(ins) != 1 || ins[0].Node != "gpu-7" {
		t.Errorf("interruption %+v", ins)
	}
	if err := st.UpsertJob(ctx, sizerapi.Job{JobID: "55", JobName: "ft", User: "ann", Account: "a", GPUsPerNode: 2, GPUMemoryMiB: 24 << 10}, now); err != nil {
		t.Fatal(err)
	}
	jobs, err := st.Jobs(ctx, time.Time{}, "ann", "ft", 0)
	if err != nil || len(jobs) != 1 || jobs[0].GPUsUsed != 1 || jobs[0].PeakMemMiB != 9<<10 {
		t.Errorf("usage from agent records: %+v %v", jobs, err)
	}
	// Another node's credential cannot post this node's batch.
	other, _ := f.node(t, "gpu-8", "g5.xlarge", "us-east-1a", true)
	if err := writeFile(cred, other+"\n"); err != nil {
		t.Fatal(err)
	}
	if err := sink.Send(ctx, b); err == nil {
		t.Error("gpu-8's credential posted gpu-7's reports")
	}
}
