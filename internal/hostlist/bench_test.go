package hostlist

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// benchExpr names 10,000 hosts.
const benchExpr = "r[1-20]-n[001-500]"

// reportVsScontrol measures the same work done by exec'ing scontrol (a few
// runs, in this process) and reports its time and the ratio to ours.
func reportVsScontrol(b *testing.B, oursNs float64, args ...string) {
	b.Helper()
	if _, err := os.Stat(scontrolPath); err != nil {
		b.Logf("no %s (%v): scontrol baseline not measured", scontrolPath, err)
		return
	}
	conf := filepath.Join(b.TempDir(), "slurm.conf")
	if err := os.WriteFile(conf, []byte("ClusterName=x\nSlurmctldHost=localhost\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	const runs = 5
	start := time.Now()
	for range runs {
		cmd := exec.Command(scontrolPath, args...)
		cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
		if out, err := cmd.CombinedOutput(); err != nil || strings.Contains(string(out), "Invalid") {
			b.Fatalf("scontrol %v: %v", args[:2], err)
		}
	}
	sc := float64(time.Since(start).Nanoseconds()) / runs
	b.ReportMetric(sc, "scontrol-ns/op")
	b.ReportMetric(sc/oursNs, "speedup-vs-scontrol")
}

func BenchmarkExpand10k(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		names, err := Expand(benchExpr)
		if err != nil || len(names) != 10_000 {
			b.Fatal(len(names), err)
		}
	}
	reportVsScontrol(b, float64(b.Elapsed().Nanoseconds())/float64(b.N), "show", "hostnames", benchExpr)
}

func benchCompress(b *testing.B, names []string) {
	b.ReportAllocs()
	var out string
	for b.Loop() {
		var err error
		if out, err = Compress(names); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(out)), "out-bytes")
	reportVsScontrol(b, float64(b.Elapsed().Nanoseconds())/float64(b.N), "show", "hostlist", strings.Join(names, ","))
}

func BenchmarkCompress10k(b *testing.B) {
	names, _ := Expand(benchExpr)
	benchCompress(b, names)
}

// Every other node: 10,000 single-number ranges, the worst case for length.
func BenchmarkCompress10kGaps(b *testing.B) {
	names := make([]string, 10_000)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", 2*i+1)
	}
	benchCompress(b, names)
}

func BenchmarkChunk10kGaps(b *testing.B) {
	names := make([]string, 10_000)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", 2*i+1)
	}
	b.ReportAllocs()
	var chunks []string
	for b.Loop() {
		var err error
		if chunks, err = Chunk(names, 4096); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(chunks)), "chunks")
}
