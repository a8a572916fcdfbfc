package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurmconf"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/harness"
)

// The emulator's launch token bucket as configured for the scale
// benchmark: EC2's documented RunInstances resource bucket (1,000
// instances, refilled at 2 a second). The bucket's own minimum for n
// launches from a full bucket is max(0, n-scaleBucket)/scaleRefill
// emulated seconds: computed here, never measured by the code under test.
const (
	scaleBucket = 1000
	scaleRefill = 2.0
)

// BenchmarkResumeScale resumes 10, 100 and 1,000 nodes (BURST_BENCH_NODES,
// e.g. "10,100,1000,10000": make bench-scale; -short: 10) through the real
// burst-resume binary against a real slurmctld holding as many CLOUD nodes
// as the largest size (the include burst-slurm-conf writes) and the EC2
// emulator with its real token bucket (scaleBucket, scaleRefill), its clock
// BURST_BENCH_SCALE (default 10: slow enough for this 2-core machine to
// keep up with the refill, so the bucket, not the machine, sets the pace)
// times the wall clock. Nodes the bucket
// throttles past the SDK's retries are handed back to Slurm by burst-resume;
// the benchmark resumes those again at once, as Slurm's next power-up
// would, until every node has its instance. Per size it prints one line:
//
//	resume-scale nodes=N seconds=S bucket_min_seconds=M ratio=S/M cpu_ms_per_node=C ...
//
// (seconds in emulated time; ratio "-" where the bucket never runs dry),
// then, at the largest size, one reconciliation pass over the instances and
// Slurm's nodes (burst-sizer reconcile --dry-run) with its peak memory.
func BenchmarkResumeScale(b *testing.B) {
	sizes := scaleSizes(b)
	timeScale := 10.0
	if v, err := strconv.ParseFloat(os.Getenv("BURST_BENCH_SCALE"), 64); err == nil && v > 0 {
		timeScale = v
	}
	largest := sizes[len(sizes)-1]
	c, cfg := scaleCluster(b, largest)
	b.Logf("%s, %d CLOUD nodes, emulated clock %gx", c.Slurm(), largest, timeScale)
	for _, n := range sizes {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			for range b.N {
				emu := scaleEmulator(b, timeScale)
				path := scaleConfig(b, c, cfg, emu)
				resumeScale(b, c, path, emu, timeScale, n)
				if n == largest {
					reconcileScale(b, c, path, emu)
				}
				emu.Close()
			}
		})
	}
}

// scaleSizes are the node counts to resume, growing: BURST_BENCH_NODES's
// comma-separated list, 10 with -short, else 10, 100 and 1,000.
func scaleSizes(b *testing.B) []int {
	env := os.Getenv("BURST_BENCH_NODES")
	if env == "" {
		if testing.Short() {
			return []int{10}
		}
		return []int{10, 100, 1000}
	}
	var sizes []int
	for _, f := range strings.Split(env, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || len(sizes) > 0 && n < sizes[len(sizes)-1] {
			b.Fatalf("BURST_BENCH_NODES=%q: want growing node counts separated by commas, e.g. 10,100,1000,10000", env)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// scaleCluster starts slurmctld (no slurmd: no node ever boots) with the
// a10g class's n CLOUD nodes, from the include burst-slurm-conf writes for
// the demo burst.yaml. Its ResumeProgram and SuspendProgram never run: the
// benchmark calls burst-resume itself, as slurmctld would.
func scaleCluster(b *testing.B, n int) (*harness.Cluster, *config.Config) {
	cfg, err := config.Parse(config.DemoYAML, "demo.yaml")
	if err != nil {
		b.Fatal(err)
	}
	cfg.Classes[0].MaxNodes = 1
	cfg.Classes[1].MaxNodes = n
	cfg.Classes[1].InstanceTypes = []string{"g5.xlarge"}
	cfg.Slurm.BurstBin = binDir
	cfg.Slurm.GresAutodetect = "off"
	cfg.Slurm.CliFilter = false
	sl, err := harness.SelectedSlurm()
	if err != nil {
		b.Fatal(err)
	}
	ver, err := slurm.ParseVersion(sl.Release)
	if err != nil {
		b.Fatal(err)
	}
	plan, err := slurmconf.Build(cfg, catalog.Default(), ver)
	if err != nil {
		b.Fatal(err)
	}
	c := harness.New(b, harness.Options{Slurm: &sl, Fragment: string(plan.Include()), GresConf: string(plan.GresConf()), Debug: "info"})
	return c, cfg
}

// scaleEmulator is a fresh EC2 emulator with the real token bucket; boots
// at once (no node runs anything).
func scaleEmulator(b *testing.B, timeScale float64) *ec2emu.Server {
	emu := ec2emu.New(ec2emu.Options{TimeScale: timeScale, BucketSize: scaleBucket, BucketRefill: scaleRefill, BootDelay: -1,
		Subnets: map[string]string{"subnet-0demo0000000000a": "us-east-1a", "subnet-0demo0000000000b": "us-east-1b"}})
	if err := emu.Start(); err != nil {
		b.Fatal(err)
	}
	return emu
}

// scaleConfig writes burst.yaml for one size: cluster c's Slurm, emulator
// emu, a fresh state directory, in-process ranking (no sizer runs).
func scaleConfig(b *testing.B, c *harness.Cluster, base *config.Config, emu *ec2emu.Server) string {
	cfg := *base
	dir := b.TempDir()
	ctld, _ := c.Ports()
	cfg.Slurm.Controller, cfg.Slurm.ControllerPort = c.ControllerAddr().String(), ctld
	cfg.Slurm.NodeConf, cfg.Slurm.ConfDir = c.ConfPath(), filepath.Dir(c.ConfPath())
	return writeBenchConfig(b, &cfg, dir, emu)
}

// resumeScale resumes a10g-[1-n] through burst-resume until each node has
// its instance (the nodes burst-resume hands back resumed again at once)
// and prints the figures.
func resumeScale(b *testing.B, c *harness.Cluster, cfgPath string, emu *ec2emu.Server, timeScale float64, n int) {
	all := make([]string, n)
	for i := range all {
		all[i] = fmt.Sprintf("a10g-%d", i+1)
	}
	left := all
	var cpu time.Duration
	runs := 0
	start, wall0 := emu.Now(), time.Now()
	for len(left) > 0 {
		if runs++; runs > 10000 {
			b.Fatalf("%d of %d nodes still without an instance after 10,000 resumes", len(left), n)
		}
		arg, err := hostlist.Compress(left)
		if err != nil {
			b.Fatal(err)
		}
		cmd := c.Command(context.Background(), filepath.Join(binDir, "burst-resume"), "--config", cfgPath, arg)
		runWall, runAt := time.Now(), emu.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("burst-resume (run %d, %d nodes): %v\n%s", runs, len(left), err, out)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		live := map[string]bool{}
		for _, in := range emu.Live() {
			live[in.Tags["burst:node"]] = true
		}
		before := len(left)
		left = slices.DeleteFunc(slices.Clone(left), func(s string) bool { return live[s] })
		b.Logf("resume %d: %d of %d nodes launched in %.1f s (%.0f emulated s), %.0f tokens left",
			runs, before-len(left), before, time.Since(runWall).Seconds(), emu.Now().Sub(runAt).Seconds(), emu.Tokens())
	}
	took, wall := emu.Now().Sub(start), time.Since(wall0)
	if got := len(emu.Live()); got != n {
		b.Fatalf("%d live instances after resuming %d nodes", got, n)
	}
	minimum := max(0, float64(n-scaleBucket)) / scaleRefill
	ratio := "-"
	if minimum > 0 {
		ratio = fmt.Sprintf("%.3f", took.Seconds()/minimum)
	}
	throttled := 0
	for _, call := range emu.Calls() {
		if call.Action == "CreateFleet" && call.Code == "RequestLimitExceeded" {
			throttled++
		}
	}
	fmt.Printf("resume-scale nodes=%d seconds=%.1f bucket_min_seconds=%.1f ratio=%s cpu_ms_per_node=%.3f wall_seconds=%.1f time_scale=%g refill_per_wall_second=%g resumes=%d createfleet_calls=%d throttled=%d\n",
		n, took.Seconds(), minimum, ratio, float64(cpu.Microseconds())/1000/float64(n), wall.Seconds(), timeScale, scaleRefill*timeScale,
		runs, emu.CallCount("CreateFleet"), throttled)
}

// reconcileScale runs one reconciliation pass (burst-sizer reconcile
// --dry-run: EC2's instances against Slurm's nodes) and prints its wall
// time, CPU and peak memory.
func reconcileScale(b *testing.B, c *harness.Cluster, cfgPath string, emu *ec2emu.Server) {
	cmd := c.Command(context.Background(), filepath.Join(binDir, "burst-sizer"), "--config", cfgPath, "reconcile", "--dry-run")
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(t0)
	if err != nil {
		b.Fatalf("burst-sizer reconcile: %v\n%s", err, out)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	fmt.Printf("reconcile-scale instances=%d seconds=%.2f cpu_seconds=%.2f max_rss_mib=%.1f report=%q\n",
		len(emu.Live()), wall.Seconds(), cpu.Seconds(), float64(ru.Maxrss)/1024, first)
}
