package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// BenchmarkReleaseLatency measures, over 20 jobs, the time from a job's end
// (its last line prints the time) to the TerminateInstances call that
// releases its instance: event-driven release (EpilogSlurmctld) against
// SuspendTime-based release (the idle timer every other tool uses) in the
// same run. go test -run '^$' -bench ReleaseLatency ./test/e2e
func BenchmarkReleaseLatency(b *testing.B) {
	for _, mode := range []struct {
		name  string
		event bool
	}{{"epilog", true}, {"suspend-time-10s", false}} {
		b.Run(mode.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				lat := releaseLatencies(b, mode.event, 20)
				sort.Float64s(lat)
				b.ReportMetric(lat[len(lat)/2], "median-s")
				b.ReportMetric(lat[len(lat)-1], "worst-s")
				fmt.Printf("release %s: %d jobs, job end -> TerminateInstances median %.2f s, worst %.2f s\n",
					mode.name, len(lat), lat[len(lat)/2], lat[len(lat)-1])
			}
		})
	}
}

func releaseLatencies(b *testing.B, event bool, jobs int) []float64 {
	s, err := stack.Start(context.Background(), stack.Options{BinDir: binDir,
		Emulator: ec2emu.Options{BootDelay: time.Second, ShutdownDelay: time.Second},
		Configure: func(c *config.Config) {
			c.Classes[1].MaxNodes = 10
			c.Teardown.ReleaseOnCompletion = event
			c.Teardown.WarmReuse = config.D(0)
			c.Slurm.SuspendTime = config.D(10 * time.Second)
		}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop()
	ctx := context.Background()
	var ids []string
	for i := 0; i < jobs; i++ {
		id, err := s.Cluster.Sbatch(ctx, "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 2; date +END=%s.%N")
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		_, err := s.Cluster.WaitJobState(wctx, id, "COMPLETED")
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for len(liveInstances(s)) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	// instance -> job, and instance -> first TerminateInstances call naming it
	jobOf := map[string]string{}
	for _, in := range s.Emu.Instances() {
		jobOf[in.ID] = in.Tags[ec2p.TagJobID]
	}
	termAt := map[string]time.Time{}
	for _, c := range s.Emu.Calls() {
		if c.Action != "TerminateInstances" || c.Code != "" {
			continue
		}
		for k, v := range c.Params {
			if strings.HasPrefix(k, "InstanceId.") {
				if _, seen := termAt[v[0]]; !seen {
					termAt[v[0]] = c.At
				}
			}
		}
	}
	var lat []float64
	for inst, job := range jobOf {
		out, err := os.ReadFile(filepath.Join(s.Cluster.Dir(), "work", "slurm-"+job+".out"))
		if err != nil {
			continue
		}
		i := strings.LastIndex(string(out), "END=")
		if i < 0 {
			continue
		}
		end, err := strconv.ParseFloat(strings.TrimSpace(string(out[i+4:])), 64)
		at, ok := termAt[inst]
		if err != nil || !ok {
			continue
		}
		lat = append(lat, float64(at.UnixNano())/1e9-end)
	}
	if len(lat) == 0 {
		b.Fatal("no job end -> terminate pairs measured")
	}
	return lat
}

// BenchmarkResumeCost measures burst-resume's own wall time and CPU time
// (user+system, from the kernel's rusage of the process) for 1 and 1,000
// nodes against the emulator with no simulated API latency and no token
// limit, ranking in-process (no sizer). Slurm is not involved: no job
// lookups, and every launch succeeds so nothing is handed back.
func BenchmarkResumeCost(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			var wall, cpu time.Duration
			for i := 0; i < b.N; i++ {
				w, c := resumeOnce(b, n)
				wall, cpu = wall+w, cpu+c
			}
			b.ReportMetric(wall.Seconds()/float64(b.N), "wall-s/op")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			fmt.Printf("burst-resume %d nodes: wall %.3f s, cpu %.3f s per call\n", n, wall.Seconds()/float64(b.N), cpu.Seconds()/float64(b.N))
		})
	}
}

// resumeOnce runs burst-resume for n fresh nodes against a fresh emulator
// and returns its wall and CPU time.
func resumeOnce(b *testing.B, n int) (wall, cpu time.Duration) {
	emu := ec2emu.New(ec2emu.Options{BucketSize: -1, BootDelay: -1,
		Subnets: map[string]string{"subnet-0demo0000000000a": "us-east-1a", "subnet-0demo0000000000b": "us-east-1b"}})
	if err := emu.Start(); err != nil {
		b.Fatal(err)
	}
	defer emu.Close()
	dir := b.TempDir()
	cfg, err := config.Parse(config.DemoYAML, "demo.yaml")
	if err != nil {
		b.Fatal(err)
	}
	cfg.Classes[1].MaxNodes = 1000
	cfg.Classes[1].InstanceTypes = []string{"g5.xlarge"}
	cfg.Cluster.EC2Endpoint, cfg.Cluster.EC2StaticCredentials = emu.URL(), true
	cfg.Log.File = filepath.Join(dir, "burst.log")
	cfg.Sizer.StateDir = filepath.Join(dir, "state")
	cfg.Sizer.TokenFile = filepath.Join(dir, "missing-token")
	cfg.Slurm.ConfDir = dir
	raw, _ := yaml.Marshal(cfg)
	cfgPath := filepath.Join(dir, "burst.yaml")
	if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
		b.Fatal(err)
	}
	nodes := fmt.Sprintf("a10g-[1-%d]", n)
	if n == 1 {
		nodes = "a10g-1"
	}
	cmd := exec.Command(filepath.Join(binDir, "burst-resume"), "--config", cfgPath, nodes)
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	wall = time.Since(t0)
	if err != nil {
		b.Fatalf("burst-resume: %v\n%s", err, out)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if got := len(emu.Live()); got != n {
		log, _ := os.ReadFile(cfg.Log.File)
		b.Fatalf("%d live instances after resuming %d nodes; log tail:\n%s", got, n, tail(string(log), 10))
	}
	return wall, cpu
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
