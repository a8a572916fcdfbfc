package store

import (
	"context"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

func gpuBatch(node, instance, source string, seq uint64, t time.Time, job uint32, memGiB uint64, totalGiB uint64) sizerapi.ReportBatch {
	return sizerapi.ReportBatch{Node: node, InstanceID: instance, GPUSource: source, Records: []sizerapi.Record{{Seq: seq, Time: t, Kind: sizerapi.KindGPU,
		GPUs: []sizerapi.GPUReading{{Index: 0, UtilPercent: 80, MemoryUsedBytes: memGiB * gib, MemoryTotalBytes: totalGiB * gib, JobIDs: []uint32{job}}}}}}
}

// TestDedupeByInstance: a new instance that reuses a node name starts its
// seq at 1 again; its records are new, not duplicates.
func TestDedupeByInstance(t *testing.T) { forDrivers(t, testDedupeByInstance) }

func testDedupeByInstance(t *testing.T, d driverCase) {
	ctx := context.Background()
	s := d.fresh(t).open(t)
	defer s.Close()
	now := time.Now()
	for _, c := range []struct {
		inst      string
		acc, dups int
	}{{"i-1", 1, 0}, {"i-1", 0, 1}, {"i-2", 1, 0}} {
		res, err := s.AddBatch(ctx, gpuBatch("l4-1", c.inst, sizerapi.GPUSourceNVML, 1, now, 7, 3, 22))
		if err != nil || res.Accepted != c.acc || res.Duplicates != c.dups {
			t.Errorf("%s seq 1: %+v %v, want %d accepted %d duplicates", c.inst, res, err, c.acc, c.dups)
		}
	}
	if n, _ := s.CountRecords(ctx); n != 2 {
		t.Errorf("%d records stored, want 2", n)
	}
}

// TestSimulatedReportsAreNotLearnedFrom: simulated (or unlabelled) GPU
// readings are acknowledged but never become usage, unless the store is a
// test stack's.
func TestSimulatedReportsAreNotLearnedFrom(t *testing.T) {
	forDrivers(t, testSimulatedReportsAreNotLearnedFrom)
}

func testSimulatedReportsAreNotLearnedFrom(t *testing.T, d driverCase) {
	ctx := context.Background()
	now := time.Now()
	for _, c := range []struct {
		source  string
		accept  bool
		ignored int
		usage   bool
	}{{sizerapi.GPUSourceSim, false, 1, false}, {"", false, 1, false}, {sizerapi.GPUSourceNVML, false, 0, true}, {sizerapi.GPUSourceSim, true, 0, true}, {"", true, 1, false}} {
		var opts []Option
		if c.accept {
			opts = append(opts, AcceptSimulatedGPUs())
		}
		s := d.fresh(t).open(t, opts...)
		res, err := s.AddBatch(ctx, gpuBatch("n-1", "i-1", c.source, 1, now, 9, 5, 22))
		if err != nil || res.Accepted != 1 || res.Ignored != c.ignored {
			t.Errorf("source %q accept %v: %+v %v", c.source, c.accept, res, err)
		}
		if err := s.StartRun(ctx, "key", sizerapi.JobStart{Job: sizerapi.Job{JobID: "9", User: "u", JobName: "j", GPUsPerNode: 1, Nodes: 1, GPUMemoryMiB: 22 << 10}, Start: now}); err != nil {
			t.Fatal(err)
		}
		h, err := s.HistoryByKey(ctx, "key", 10)
		if err != nil || (h.Jobs == 1) != c.usage {
			t.Errorf("source %q accept %v: history %+v %v", c.source, c.accept, h, err)
		}
		s.Close()
	}
}

// TestHistoryByKey: runs of a recurring job across nodes; the newest ended
// run decides whether it ran out of GPU memory (its output, or a failure
// with a full GPU).
func TestHistoryByKey(t *testing.T) { forDrivers(t, testHistoryByKey) }

func testHistoryByKey(t *testing.T, d driverCase) {
	ctx := context.Background()
	s := d.fresh(t).open(t)
	defer s.Close()
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	start := func(id string, at time.Time, nodes int) {
		t.Helper()
		if err := s.StartRun(ctx, "k", sizerapi.JobStart{Job: sizerapi.Job{JobID: id, User: "ann", JobName: "ft", Class: "l4", GPUModel: "l4", GPUsPerNode: 1, Nodes: nodes, GPUMemoryMiB: 22 << 10}, Start: at}); err != nil {
			t.Fatal(err)
		}
	}
	// run 1: two nodes, 3 and 4 GiB; run 2: one node, 6 GiB.
	start("1", t0, 2)
	s.AddBatch(ctx, gpuBatch("l4-1", "i-1", sizerapi.GPUSourceNVML, 1, t0, 1, 3, 22))
	s.AddBatch(ctx, gpuBatch("l4-2", "i-2", sizerapi.GPUSourceNVML, 1, t0, 1, 4, 22))
	s.EndRun(ctx, sizerapi.JobEnd{JobID: "1", End: t0.Add(time.Hour)})
	start("2", t0.Add(2*time.Hour), 1)
	s.AddBatch(ctx, gpuBatch("l4-1", "i-3", sizerapi.GPUSourceNVML, 1, t0.Add(2*time.Hour), 2, 6, 22))
	s.EndRun(ctx, sizerapi.JobEnd{JobID: "2", End: t0.Add(3 * time.Hour)})
	h, err := s.HistoryByKey(ctx, "k", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := struct{ jobs, nodes, peakNode, peakGPU, peakJob, jobMem int }{2, 2, 6 << 10, 6 << 10, 7 << 10, 2 * 22 << 10}
	if h.Jobs != want.jobs || h.NodesAllocated != want.nodes || h.PeakGPUMemoryMiB != want.peakNode || h.PeakPerGPUMiB != want.peakGPU ||
		h.PeakJobGPUMemoryMiB != want.peakJob || h.JobGPUMemoryMiB != want.jobMem || h.GPUsUsed != 1 || h.LastOOM != nil {
		t.Errorf("history %+v, want %+v", h, want)
	}
	// run 3 ends out of GPU memory (its output said so)
	start("3", t0.Add(4*time.Hour), 1)
	if known, err := s.EndRun(ctx, sizerapi.JobEnd{JobID: "3", End: t0.Add(5 * time.Hour), ExitCode: 1, OOM: true, Evidence: "CUDA out of memory in slurm-3.out"}); err != nil || !known {
		t.Fatal(known, err)
	}
	h, _ = s.HistoryByKey(ctx, "k", 10)
	if o := h.LastOOM; o == nil || o.JobID != "3" || o.TotalMiB() != 22<<10 || o.Evidence == "" || h.Jobs != 2 {
		t.Errorf("after an OOM run: %+v %+v", h, h.LastOOM)
	}
	// a run that is still going does not hide it, nor does a later clean
	// (larger) run: the job keeps more than the OOM run had
	start("4", t0.Add(6*time.Hour), 2)
	if h, _ = s.HistoryByKey(ctx, "k", 10); h.LastOOM == nil {
		t.Error("a running job hid the last run's OOM")
	}
	s.EndRun(ctx, sizerapi.JobEnd{JobID: "4", End: t0.Add(7 * time.Hour)})
	if h, _ = s.HistoryByKey(ctx, "k", 10); h.LastOOM == nil || h.LastOOM.JobID != "3" {
		t.Errorf("a clean run after the OOM dropped it: %+v", h.LastOOM)
	}
	// out of the window, it is forgotten
	if h, _ = s.HistoryByKey(ctx, "k", 1); h.LastOOM != nil {
		t.Errorf("an OOM outside the window: %+v", h.LastOOM)
	}
	// a failure with a GPU at 21.5 of 22 GiB (>= 97%) counts as out of memory
	start("5", t0.Add(8*time.Hour), 1)
	b := gpuBatch("l4-1", "i-5", sizerapi.GPUSourceNVML, 1, t0.Add(8*time.Hour), 5, 0, 22)
	b.Records[0].GPUs[0].MemoryUsedBytes = 21*gib + gib/2
	s.AddBatch(ctx, b)
	s.EndRun(ctx, sizerapi.JobEnd{JobID: "5", End: t0.Add(9 * time.Hour), ExitCode: 1})
	if h, _ = s.HistoryByKey(ctx, "k", 10); h.LastOOM == nil || h.LastOOM.JobID != "5" || h.LastOOM.Evidence == "" {
		t.Errorf("failed at a full GPU: %+v", h.LastOOM)
	}
	if known, _ := s.EndRun(ctx, sizerapi.JobEnd{JobID: "nope"}); known {
		t.Error("unknown job known")
	}
	if h, _ := s.HistoryByKey(ctx, "other", 10); h.Jobs != 0 || h.Key != "other" {
		t.Errorf("other key: %+v", h)
	}
}
