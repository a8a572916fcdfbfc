package slurmconf

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/slurm"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs from generated output (go test ./internal/slurmconf -update to accept):\n--- got\n%s", name, got)
	}
}

// versions are the Slurm releases the goldens are kept for (the ones the
// e2e tests run).
var versions = []string{"22.05", "24.11", "26.05"}

func mustVersion(t *testing.T, s string) slurm.Version {
	t.Helper()
	v, err := slurm.ParseVersion(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func examplePlanFor(t *testing.T, version string) *Plan {
	cfg, err := config.Load(filepath.Join("..", "..", "examples", "burst.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Source = "examples/burst.yaml"
	p, err := Build(cfg, catalog.Default(), mustVersion(t, version))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSacctmgrGolden(t *testing.T) {
	cfg, err := config.Load(filepath.Join("..", "..", "examples", "burst.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Source = "examples/burst.yaml"
	if len(cfg.Limits) < 3 {
		t.Fatalf("the example has %d limits; it should show an account, a user and a user within an account", len(cfg.Limits))
	}
	golden(t, "example.sacctmgr.sh", Sacctmgr(cfg, "ml-prod"))
	cfg.Limits = nil
	if got := string(Sacctmgr(cfg, "x")); !strings.Contains(got, "nothing to set") || strings.Contains(got, "sacctmgr -i") {
		t.Errorf("no limits: %s", got)
	}
}

func examplePlan(t *testing.T) *Plan { return examplePlanFor(t, "24.11") }

// TestGolden: burst.conf and gres.conf of the example and demo burst.yaml,
// per Slurm release (testdata/<release>/; -update rewrites them). The e2e
// tests (TestGeneratedConfigAccepted, TestAdminSetup) start real slurmctld
// of each release on these.
func TestGolden(t *testing.T) {
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			p := examplePlanFor(t, v)
			golden(t, v+"/example.burst.conf", p.Include())
			golden(t, v+"/example.gres.conf", p.GresConf())

			demo, err := config.Parse(config.DemoYAML, "demo.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if err := demo.Validate(); err != nil {
				t.Fatal(err)
			}
			dp, err := Build(demo, catalog.Default(), mustVersion(t, v))
			if err != nil {
				t.Fatal(err)
			}
			golden(t, v+"/demo.burst.conf", dp.Include())
			golden(t, v+"/demo.gres.conf", dp.GresConf())
		})
	}
}

// TestVersionDifferences pins what changes between releases, so a golden
// rewritten by -update cannot silently lose it.
func TestVersionDifferences(t *testing.T) {
	for _, c := range []struct {
		v                string
		regAddrs, autoNV bool
	}{{"22.05", true, false}, {"23.02", true, false}, {"23.11", false, false}, {"24.11", false, true}, {"26.05", false, true}} {
		p := examplePlanFor(t, c.v)
		inc, gres := string(p.Include()), string(p.GresConf())
		if got := strings.Contains(inc, "cloud_reg_addrs"); got != c.regAddrs {
			t.Errorf("Slurm %s: cloud_reg_addrs in SlurmctldParameters = %v, want %v", c.v, got, c.regAddrs)
		}
		if got := strings.Contains(gres, "AutoDetect=nvml"); got != c.autoNV {
			t.Errorf("Slurm %s: AutoDetect=nvml in gres.conf = %v, want %v", c.v, got, c.autoNV)
		}
		if !strings.Contains(gres, "NodeName=h100x8-[1-4] Name=gpu Type=h100 File=/dev/nvidia[0-7] Count=8") {
			t.Errorf("Slurm %s: gres.conf lacks the explicit h100x8 line:\n%s", c.v, gres)
		}
	}
	cfg, _ := config.Load(filepath.Join("..", "..", "examples", "burst.yaml"))
	for _, bad := range []slurm.Version{{}, {Major: 21, Minor: 8}} {
		if _, err := Build(cfg, catalog.Default(), bad); err == nil {
			t.Errorf("Build for Slurm %v: no error", bad)
		}
	}
}

func TestNodeShapes(t *testing.T) {
	p := examplePlan(t)
	byClass := map[string]NodeLine{}
	for _, n := range p.Nodes {
		byClass[n.Class] = n
	}
	// l4 candidates g6.xlarge (4 vCPU, 16 GiB) .. g6.4xlarge: the smallest wins
	l4 := byClass["l4"]
	if l4.CPUs != 4 || l4.MemMiB != 16384-1024 || l4.Gres != "gpu:l4:1" {
		t.Errorf("l4 node line: %+v", l4)
	}
	if p.Nodes[0].Class != "l4" || p.Nodes[0].Weight != 1 || byClass["h100x8"].Weight != 4 {
		t.Errorf("weights not ordered by price: %+v", p.Nodes)
	}
	if got := p.Partitions[1]; got.Name != "gpu-big" || len(got.Nodes) != 1 || got.Nodes[0] != "h100x8-[1-4]" {
		t.Errorf("gpu-big partition: %+v", got)
	}
}

func TestCheck(t *testing.T) {
	p := examplePlan(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, IncludeName), p.Include(), 0o644)
	main := "ClusterName=x\nSlurmctldHost=head\nInclude " + IncludeName + "\n"
	os.WriteFile(filepath.Join(dir, "slurm.conf"), []byte(main), 0o644)
	es, err := LoadFile(filepath.Join(dir, "slurm.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Check(es); len(d) != 0 {
		t.Fatalf("generated include should satisfy the plan, got %v", d)
	}
	// a hand-edited conf that drifted
	drift := strings.NewReplacer("ResumeTimeout=600", "ResumeTimeout=60", "PrivateData=cloud\n", "",
		"NodeName=l4-[1-32] CPUs=4", "NodeName=l4-[1-32] CPUs=8").Replace(string(p.Include()))
	os.WriteFile(filepath.Join(dir, IncludeName), []byte(drift), 0o644)
	es, err = LoadFile(filepath.Join(dir, "slurm.conf"))
	if err != nil {
		t.Fatal(err)
	}
	d := p.Check(es)
	var s []string
	for _, x := range d {
		s = append(s, x.String())
	}
	all := strings.Join(s, "\n")
	for _, want := range []string{"ResumeTimeout=60, burst needs 600", "PrivateData is not set", "has CPUs=8, burst needs 4"} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in:\n%s", want, all)
		}
	}
	if len(d) != 3 {
		t.Errorf("want 3 differences, got %d:\n%s", len(d), all)
	}
}

func TestParseErrors(t *testing.T) {
	for in, want := range map[string]string{
		"NodeName=a CPUs":       "is not Key=Value",
		"Include":               "Include takes one path",
		"ClusterName=x Extra=1": "one Key=Value per line",
		"=x":                    "is not Key=Value",
	} {
		if _, _, err := Parse([]byte(in), "s.conf"); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "s.conf:1") {
			t.Errorf("%q: got %v, want %q", in, err, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("ClusterName=x\nNodeName=a-[1-2] CPUs=1 # c\nInclude x.conf\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, _, err := Parse(data, "f")
		if err == nil {
			for _, e := range es {
				if e.Key == "" {
					t.Fatal("empty key accepted")
				}
			}
		}
	})
}
