package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/sizer/tlsca"
	"github.com/burst-hpc/burst/test/ec2emu"
)

// BenchmarkResumeCost measures burst-resume's own wall time and CPU time
// (user+system, from the kernel's rusage of the process) for 1 and 1,000
// nodes against the emulator with no simulated API latency and no token
// limit, ranking in-process (no sizer). Slurm is not involved: no job
// lookups, and every launch succeeds so nothing is handed back. With -short
// (what `make test` runs, once) only the 1-node size.
func BenchmarkResumeCost(b *testing.B) {
	sizes := []int{1, 1000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	for _, n := range sizes {
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
	cfg.Slurm.ConfDir = dir
	cfgPath := writeBenchConfig(b, cfg, dir, emu)
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
		log, _ := os.ReadFile(filepath.Join(dir, "burst.log"))
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

// writeBenchConfig writes cfg as dir/burst.yaml for a benchmark's
// burst-resume against emulator emu: the emulator's endpoint and dummy
// credentials, a log and a state directory in dir, no sizer token (ranking
// in-process), and the sizer CA that user data carries for the node to pin
// (burst-resume refuses to launch without it: the sizer is HTTPS-only).
func writeBenchConfig(b *testing.B, cfg *config.Config, dir string, emu *ec2emu.Server) string {
	cfg.Cluster.EC2Endpoint, cfg.Cluster.EC2StaticCredentials = emu.URL(), true
	cfg.Log.File = filepath.Join(dir, "burst.log")
	cfg.Sizer.StateDir = filepath.Join(dir, "state")
	cfg.Sizer.TokenFile = filepath.Join(dir, "missing-token")
	ca := tlsca.Paths{CAFile: filepath.Join(dir, "sizer-ca.pem"), CAKey: filepath.Join(dir, "sizer-ca.key"),
		CertFile: filepath.Join(dir, "sizer.pem"), KeyFile: filepath.Join(dir, "sizer.key")}
	if _, err := tlsca.Init(tlsca.Options{Paths: ca, Hosts: []string{"127.0.0.1"}, Cluster: "bench"}); err != nil {
		b.Fatal(err)
	}
	cfg.Sizer.TLS.CAFile = ca.CAFile
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "burst.yaml")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}
