package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurmconf"
	"github.com/burst-hpc/burst/test/harness"
	"github.com/burst-hpc/burst/test/stack"
)

// TestGeneratedConfigAccepted: the slurm.conf include and gres.conf that
// burst-slurm-conf generates from the demo burst.yaml are accepted by a
// real slurmctld of each version, which lists every cloud node powered down (idle~)
// with the class's GRES and features.
func TestGeneratedConfigAccepted(t *testing.T) {
	s := start(t, stack.Options{NoSizer: true})
	out, err := s.Cluster.Run(context.Background(), "sinfo", "-h", "-N", "-o", "%N|%T|%G|%f")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{}
	for i := 1; i <= 4; i++ {
		want["l4-"+string(rune('0'+i))] = [2]string{"gpu:l4:1", "burst,l4"}
		want["a10g-"+string(rune('0'+i))] = [2]string{"gpu:a10g:1", "burst,a10g"}
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 4 {
			t.Fatalf("sinfo line %q", line)
		}
		w, ok := want[f[0]]
		if !ok {
			t.Errorf("unexpected node %s", f[0])
			continue
		}
		seen++
		if f[1] != "idle~" || !strings.HasPrefix(f[2], w[0]) || f[3] != w[1] {
			t.Errorf("node %s: state %s gres %s features %s; want idle~ %s %s", f[0], f[1], f[2], f[3], w[0], w[1])
		}
	}
	if seen != len(want) {
		t.Errorf("sinfo listed %d of %d burst nodes:\n%s", seen, len(want), out)
	}
}

// TestExampleConfAccepted: what burst-slurm-conf writes for a real site
// (examples/burst.yaml: gres_autodetect nvml, configless nodes) is accepted
// by slurmctld of each version, which lists every class's nodes powered
// down with their GPUs. Slurm 22.05 exits at start-up on a gres.conf with
// AutoDetect for CLOUD nodes ("fatal: Cannot use AutoDetect on cloud
// node"), so its gres.conf holds only explicit lines.
func TestExampleConfAccepted(t *testing.T) {
	sl, err := harness.SelectedSlurm()
	if err != nil {
		t.Fatal(err)
	}
	v, err := slurm.ParseVersion(sl.Release)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(filepath.Join(repoRoot(t), "examples", "burst.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// 26.05 refuses to start when PrologSlurmctld does not exist: the
	// hooks are the built binaries (never run here: no job is submitted)
	cfg.Slurm.BurstBin = binDir
	plan, err := slurmconf.Build(cfg, catalog.Default(), v)
	if err != nil {
		t.Fatal(err)
	}
	gres := string(plan.GresConf())
	if cfg.Slurm.GresAutodetect != "nvml" {
		t.Fatalf("examples/burst.yaml has gres_autodetect %q; this test is about nvml", cfg.Slurm.GresAutodetect)
	}
	t.Logf("gres.conf for %s:\n%s", sl, gres)
	// the example's CliFilterPlugins needs its Lua file beside slurm.conf
	frag := strings.ReplaceAll(string(plan.Include()), "CliFilterPlugins=cli_filter/lua", "")
	c := harness.New(t, harness.Options{Slurm: &sl, Fragment: frag, GresConf: gres, Binds: []string{binDir}})
	out, err := c.Run(context.Background(), "sinfo", "-h", "-N", "-o", "%N|%T|%G")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"l4-32": "gpu:l4:1", "a10g-1": "gpu:a10g:1", "a10gx4-8": "gpu:a10g:4", "h100x8-4": "gpu:h100:8"}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "|")
		if g, ok := want[f[0]]; ok {
			if f[1] != "idle~" || !strings.HasPrefix(f[2], g) {
				t.Errorf("node %s: %s %s, want idle~ %s", f[0], f[1], f[2], g)
			}
			delete(want, f[0])
		}
	}
	if len(want) > 0 {
		t.Errorf("sinfo lists none of %v:\n%s", want, out)
	}
}
