package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

const gib = 1 << 30

func gpuRecord(seq uint64, t time.Time, job uint32, utils []uint32, memGiB []uint64) sizerapi.Record {
	r := sizerapi.Record{Seq: seq, Time: t, Kind: sizerapi.KindGPU}
	for i := range utils {
		g := sizerapi.GPUReading{Index: i, UtilPercent: utils[i], MemoryUsedBytes: memGiB[i] * gib, MemoryTotalBytes: 40 * gib}
		if utils[i] > 0 || memGiB[i] > 0 {
			g.JobIDs = []uint32{job}
		}
		r.GPUs = append(r.GPUs, g)
	}
	return r
}

func TestStoreReportsUsageAndHistory(t *testing.T) { forDrivers(t, testStoreReportsUsageAndHistory) }

func testStoreReportsUsageAndHistory(t *testing.T, d driverCase) {
	ctx := context.Background()
	tg := d.fresh(t)
	s := tg.open(t)
	dir := tg.cfg.Dir
	for _, p := range []string{dir, filepath.Join(dir, FileName)} {
		if d.name != DriverSQLite {
			break
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v; want no group/other access", p, fi.Mode().Perm())
		}
	}
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	for i, id := range []string{"101", "102"} {
		if err := s.RecordLaunch(ctx, sizerapi.InstanceEvent{InstanceID: "i-" + id, Node: "gpu-1", InstanceType: "p4d.24xlarge", Zone: "us-east-1a", Capacity: "spot", Time: now.Add(time.Duration(i) * time.Hour),
			Job: &sizerapi.Job{JobID: id, JobName: "eval", User: "dan", Account: "phys", GPUsPerNode: 8, GPUMemoryMiB: 40960}}, 10); err != nil {
			t.Fatal(err)
		}
	}
	utils := []uint32{90, 0, 0, 0, 0, 0, 0, 0}
	mem := []uint64{12, 0, 0, 0, 0, 0, 0, 0}
	batch := sizerapi.ReportBatch{Node: "gpu-1", GPUSource: sizerapi.GPUSourceNVML, Records: []sizerapi.Record{
		gpuRecord(1, now, 101, utils, mem),
		gpuRecord(2, now.Add(time.Minute), 101, []uint32{70, 3, 0, 0, 0, 0, 0, 0}, []uint64{20, 1, 0, 0, 0, 0, 0, 0}),
	}}
	res, err := s.AddBatch(ctx, batch)
	if err != nil || res.Accepted != 2 || res.Duplicates != 0 {
		t.Fatalf("first send: %+v %v", res, err)
	}
	// The agent resends the batch plus one more record: only the new one counts.
	batch.Records = append(batch.Records, gpuRecord(3, now.Add(2*time.Minute), 101, utils, mem))
	res, err = s.AddBatch(ctx, batch)
	if err != nil || res.Accepted != 1 || res.Duplicates != 2 {
		t.Fatalf("resend: %+v %v", res, err)
	}
	// Job 102 only sent a summary.
	_, err = s.AddBatch(ctx, sizerapi.ReportBatch{Node: "gpu-1", GPUSource: sizerapi.GPUSourceNVML, Records: []sizerapi.Record{{Seq: 4, Time: now, Kind: sizerapi.KindJobSummary,
		Summary: &sizerapi.JobSummary{JobID: 102, Start: now, End: now.Add(time.Hour), GPUs: []string{"GPU-a", "GPU-b"}, PeakMemoryBytes: 10 * gib, MemoryTotalBytes: 40 * gib, MeanUtilPercent: 40}}}})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := s.Jobs(ctx, time.Time{}, "dan", "eval", 0)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("jobs %+v %v", jobs, err)
	}
	byID := map[string]sizerapi.JobUsage{}
	for _, j := range jobs {
		byID[j.JobID] = j
	}
	j := byID["101"]
	// GPU 0 busy (mean 83%); GPU 1 mean 1% is not "used". Peak per node: 21 GiB (20 + 1).
	if !j.Reported || j.GPUsUsed != 1 || j.PeakMemMiB != 21*1024 || j.AllocatedMemMiB() != 8*40960 {
		t.Errorf("job 101 usage %+v", j)
	}
	if want := (250.0/3 + 3) / 8; j.MeanUtilPct < want-0.01 || j.MeanUtilPct > want+0.01 {
		t.Errorf("mean util %.3f want %.3f", j.MeanUtilPct, want)
	}
	if j2 := byID["102"]; !j2.Reported || j2.GPUsUsed != 2 || j2.PeakMemMiB != 20*1024 || j2.MeanUtilPct != 10 {
		t.Errorf("job 102 from summary %+v", j2)
	}
	h, err := s.History(ctx, "dan", "eval", 10)
	if err != nil || h.Jobs != 2 || h.GPUsAllocated != 8 || h.GPUsUsed != 2 || h.PeakGPUMemoryMiB != 21*1024 {
		t.Errorf("history %+v %v", h, err)
	}

	// Interruptions get their type and zone from the launch record.
	_, err = s.AddBatch(ctx, sizerapi.ReportBatch{Node: "gpu-1", InstanceID: "i-101", GPUSource: sizerapi.GPUSourceNVML, Records: []sizerapi.Record{{Seq: 5, Time: now, Kind: sizerapi.KindInterruption, Event: &sizerapi.Event{Action: "terminate", NoticeTime: now}}}})
	if err != nil {
		t.Fatal(err)
	}
	ins, err := s.Interruptions(ctx, now.Add(-time.Minute))
	if err != nil || len(ins) != 1 || ins[0].InstanceType != "p4d.24xlarge" || ins[0].Zone != "us-east-1a" {
		t.Fatalf("interruptions %+v %v", ins, err)
	}
	// one notice per instance: a second batched record with another time
	// adds its job events to the first notice, not a second notice
	later := now.Add(30 * time.Second)
	_, err = s.AddBatch(ctx, sizerapi.ReportBatch{Node: "gpu-1", InstanceID: "i-101", GPUSource: sizerapi.GPUSourceNVML, Records: []sizerapi.Record{{Seq: 8, Time: later, Kind: sizerapi.KindInterruption,
		Event: &sizerapi.Event{Action: "terminate", NoticeTime: later, Jobs: []sizerapi.JobEvent{{JobID: 101, Signal: "USR1", Requeued: true}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if ins, err := s.Interruptions(ctx, now.Add(-time.Minute)); err != nil || len(ins) != 1 || !ins[0].Time.Equal(now.Truncate(time.Millisecond)) {
		t.Fatalf("after a second notice of i-101: %+v %v; want the first one only", ins, err)
	}
	if known, err := s.RecordTerminate(ctx, "i-101", now.Add(2*time.Hour)); err != nil || !known {
		t.Fatal(known, err)
	}
	if known, _ := s.RecordTerminate(ctx, "i-nope", now); known {
		t.Error("unknown instance reported known")
	}
	rows, err := s.Rows(ctx, now, now.Add(24*time.Hour))
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows %+v %v", rows, err)
	}
	for _, r := range rows {
		if r.ID == "i-101" && (r.End.Sub(r.Launched) != 2*time.Hour || r.Account != "phys" || r.User != "dan" || r.EndSource != "burst") {
			t.Errorf("row %+v", r)
		}
	}
	// A bad record kind rolls the whole batch back.
	if _, err := s.AddBatch(ctx, sizerapi.ReportBatch{Node: "gpu-1", GPUSource: sizerapi.GPUSourceNVML, Records: []sizerapi.Record{gpuRecord(6, now, 101, utils, mem), {Seq: 7, Kind: "bogus"}}}); err == nil {
		t.Fatal("bogus kind accepted")
	}
	if res, _ := s.AddBatch(ctx, sizerapi.ReportBatch{Node: "gpu-1", GPUSource: sizerapi.GPUSourceNVML, Records: []sizerapi.Record{gpuRecord(6, now, 101, utils, mem)}}); res.Accepted != 1 {
		t.Errorf("seq 6 should not have been kept from the failed batch: %+v", res)
	}

	// Everything survives close and reopen, and a read-only open sees it.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var ro *Store
	if d.name == DriverSQLite {
		var err error
		if ro, err = OpenReadOnly(dir); err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
	} else {
		ro = tg.open(t)
	}
	h2, err := ro.History(ctx, "dan", "eval", 10)
	if err != nil || h2.Jobs != 2 {
		t.Fatalf("read-only history %+v %v", h2, err)
	}
	if err := ro.UpsertJob(ctx, sizerapi.Job{JobID: "x"}, now); d.name == DriverSQLite && err == nil {
		t.Error("read-only store accepted a write")
	}
	if _, err := OpenReadOnly(t.TempDir()); !errors.Is(err, ErrNoState) {
		t.Errorf("missing db: %v", err)
	}
}

// A damaged database file is refused with an error that names it and says
// what to do, and the file is left as it was.
func TestOpenDamaged(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	garbage := []byte(strings.Repeat("not a database page\n", 2048))
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := Open(context.Background(), dir)
	if err == nil {
		st.Close()
		t.Fatal("opened a damaged database")
	}
	for _, want := range []string{path, "damaged or not a SQLite database", "move it aside", "restore it from a backup"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != string(garbage) {
		t.Error("the damaged file was changed")
	}
}
