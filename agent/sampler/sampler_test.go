package sampler

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/burst-hpc/burst/agent/attrib"
	"github.com/burst-hpc/burst/agent/gpu/sim"
	"github.com/burst-hpc/burst/agent/telemetry"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

type captureSink struct {
	mu   sync.Mutex
	recs []sizerapi.Record
}

func (c *captureSink) Send(_ context.Context, b sizerapi.ReportBatch) error {
	c.mu.Lock()
	c.recs = append(c.recs, b.Records...)
	c.mu.Unlock()
	return nil
}

func startJobProcess(t testing.TB, job int) int {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.Env = append(os.Environ(), "SLURM_JOB_ID="+strconv.Itoa(job))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// TestTickAttributesAndSummarises runs the loop over simulated GPUs whose
// process is a real child started with SLURM_JOB_ID=31 (in no job cgroup
// here: attributed through AllowEnviron, what --attribute-environ turns on).
func TestTickAttributesAndSummarises(t *testing.T) {
	clock := time.Unix(1_800_000_000, 0)
	r, _ := sim.New(sim.Options{GPUs: 4, Seed: 3, Now: func() time.Time { clock = clock.Add(time.Second); return clock }})
	pid := startJobProcess(t, 31)
	r.Assign(0, "train", pid)
	sink := &captureSink{}
	rep, err := telemetry.New(sink, telemetry.Options{Node: "gpu-1", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close()
	s := New(r, &attrib.Resolver{AllowEnviron: true}, rep, Options{Interval: time.Second, JobGone: 3 * time.Second})
	ctx := context.Background()
	var want []uint32
	for i := 0; i < 10; i++ {
		want = append(want, sim.Curve(3, 0, "train", uint64(i)))
		if err := s.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	r.Assign(0, "")
	for i := 0; i < 5; i++ {
		if err := s.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := rep.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var gpuRecs int
	var sum *sizerapi.JobSummary
	for _, rec := range sink.recs {
		switch rec.Kind {
		case sizerapi.KindGPU:
			if len(rec.GPUs) != 4 {
				t.Fatalf("record %d has %d GPUs", rec.Seq, len(rec.GPUs))
			}
			if gpuRecs < 10 && (len(rec.GPUs[0].JobIDs) != 1 || rec.GPUs[0].JobIDs[0] != 31 || rec.GPUs[0].UtilPercent != want[gpuRecs]) {
				t.Fatalf("tick %d GPU 0 = %+v, want job 31 at %d%%", gpuRecs, rec.GPUs[0], want[gpuRecs])
			}
			gpuRecs++
		case sizerapi.KindJobSummary:
			if sum != nil {
				t.Fatal("two summaries")
			}
			sum = rec.Summary
		}
	}
	var total uint32
	for _, u := range want {
		total += u
	}
	if gpuRecs != 15 || sum == nil || sum.JobID != 31 || sum.GPUSeconds != 10 || sum.MeanUtilPercent != float64(total)/10 {
		t.Fatalf("gpu records %d, summary %+v; want 15 and job 31 with 10 GPU-seconds at mean %v", gpuRecs, sum, float64(total)/10)
	}
}

func TestSimJobs(t *testing.T) {
	r, _ := sim.New(sim.Options{GPUs: 2})
	if err := AssignSimJobs(r, []uint32{7, 8, 9}); err != nil {
		t.Fatal(err)
	}
	got, _ := r.Sample(context.Background())
	var res SimResolver
	id0, _ := res.JobOf(got[0].PIDs[0])
	id1, _ := res.JobOf(got[1].PIDs[0])
	if id0 != 9 || id1 != 8 { // job 9 replaced job 7 on GPU 0
		t.Fatalf("GPU jobs = %d, %d", id0, id1)
	}
}

type discardSink struct{}

func (discardSink) Send(_ context.Context, b sizerapi.ReportBatch) error {
	return json.NewEncoder(io.Discard).Encode(b)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func procStatusKB(field string) float64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return n
		}
	}
	return 0
}

// BenchmarkSampling8SimGPUs measures the agent's sampling loop over 8
// simulated GPUs (each with a real process of a job, attributed through
// /proc) at one sample a second, spooled to disk and sent every 15 samples
// to a sink that JSON-encodes and discards. It runs an hour of samples
// (3600 ticks, no sleeping) per iteration and reports CPU-seconds per
// hour of sampling (getrusage) against a baseline that only reads the
// simulated GPUs, and the process's resident memory.
func BenchmarkSampling8SimGPUs(b *testing.B) {
	const ticks = 3600
	r, _ := sim.New(sim.Options{GPUs: 8, Seed: 1})
	for i := 0; i < 8; i++ {
		r.Assign(i, "job-"+strconv.Itoa(100+i/2), startJobProcess(b, 100+i/2))
	}
	ctx := context.Background()
	// Baseline: reading the simulated GPUs alone.
	c0 := cpuTime()
	for i := 0; i < ticks; i++ {
		r.Sample(ctx)
	}
	base := cpuTime() - c0

	rep, err := telemetry.New(discardSink{}, telemetry.Options{Node: "gpu-1", Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer rep.Close()
	s := New(r, &attrib.Resolver{AllowEnviron: true}, rep, Options{})
	b.ResetTimer()
	var full time.Duration
	for n := 0; n < b.N; n++ {
		c := cpuTime()
		for i := 0; i < ticks; i++ {
			if err := s.Tick(ctx); err != nil {
				b.Fatal(err)
			}
			if i%15 == 14 {
				if err := rep.Flush(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		full += cpuTime() - c
	}
	perHour := full.Seconds() / float64(b.N)
	b.ReportMetric(perHour, "cpu-s/hour")
	b.ReportMetric(perHour/3600*100, "%cpu")
	b.ReportMetric(base.Seconds(), "baseline-cpu-s/hour")
	b.ReportMetric(perHour/base.Seconds(), "x-baseline")
	b.ReportMetric(procStatusKB("VmRSS")/1024, "rss-MiB")
	b.ReportMetric(procStatusKB("VmHWM")/1024, "peak-rss-MiB")
	if st := rep.Stats(); st.Spool.Pending != 0 {
		b.Fatalf("%d records left unsent", st.Spool.Pending)
	}
}
