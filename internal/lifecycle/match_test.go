package lifecycle

import (
	"testing"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/slurm"
)

func TestMatchConstraint(t *testing.T) {
	a100 := map[string]bool{"burst": true, "a100": true, "a100x8": true, "nvlink": true}
	for _, c := range []struct {
		expr string
		want bool
		err  bool
	}{
		{"a100", true, false},
		{"a10", false, false}, // the bug of substring matching: a10 is not a100
		{"a1", false, false},
		{"A100", false, false}, // Slurm's names are case-sensitive
		{"a100&nvlink", true, false},
		{"a100&ib", false, false},
		{"a100,nvlink", true, false},
		{"a10|a100", true, false},
		{"a10|l4", false, false},
		{"[a10|a100]", true, false},
		{"[a10*2|a100*4]", true, false},
		{"(a10|a100)&nvlink", true, false},
		{"(a10|a100)&!nvlink", false, false},
		{"!a10", true, false},
		{" a100 & burst ", true, false},
		{"", false, true},
		{"a100&", false, true},
		{"(a100", false, true},
		{"[a100)", false, true},
		{"a100)", false, true},
		{"a100*x", false, true},
		{"a100;rm", false, true},
	} {
		got, err := MatchConstraint(c.expr, a100)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("MatchConstraint(%q) = %v, %v; want %v, error %v", c.expr, got, err, c.want, c.err)
		}
	}
	deep := ""
	for range 40 {
		deep += "("
	}
	if _, err := MatchConstraint(deep+"a100", a100); err == nil {
		t.Error("40 nested parentheses: no error")
	}
}

func matchConfig() *config.Config {
	c := config.Default()
	c.Classes = []config.Class{
		{Name: "a10", GPUModel: "a10g", GPUsPerNode: 1, MaxNodes: 4},
		{Name: "a100", GPUModel: "a100", GPUsPerNode: 8, MaxNodes: 4, Features: []string{"nvlink"}},
	}
	c.Slurm.Partitions = []config.Partition{{Name: "gpu", Default: true}, {Name: "big", Classes: []string{"a100"}}}
	return c
}

func TestFits(t *testing.T) {
	cfg := matchConfig()
	a10, a100 := &cfg.Classes[0], &cfg.Classes[1]
	gres := func(s string) []slurm.GRES {
		g, err := slurm.ParseGRES(s)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	for _, c := range []struct {
		name string
		cl   *config.Class
		job  slurm.Job
		want bool
	}{
		{"no constraints fit", a10, slurm.Job{}, true},
		{"class a100 never on an a10 node", a10, slurm.Job{Features: "a100"}, false},
		{"class a10 never on an a100 node", a100, slurm.Job{Features: "a10"}, false},
		{"exact class", a100, slurm.Job{Features: "a100"}, true},
		{"gpu model feature", a10, slurm.Job{Features: "a10g"}, true},
		{"extra feature", a100, slurm.Job{Features: "a100&nvlink"}, true},
		{"unparsable constraint", a100, slurm.Job{Features: "a100&&"}, false},
		{"partition without the class", a10, slurm.Job{Partition: "big"}, false},
		{"partition with the class", a100, slurm.Job{Partition: "big"}, true},
		{"one of several partitions", a10, slurm.Job{Partition: "big,gpu"}, true},
		{"not burst's partition", a10, slurm.Job{Partition: "cpu"}, false},
		{"gres of another model", a10, slurm.Job{GRESPerNode: gres("gpu:a100:1")}, false},
		{"gres a10 prefix of a100", a100, slurm.Job{GRESPerNode: gres("gpu:a10:1")}, false},
		{"gres of the model", a10, slurm.Job{GRESPerNode: gres("gpu:a10g:1")}, true},
		{"untyped gres", a100, slurm.Job{GRESPerNode: gres("gpu:8")}, true},
		{"more gpus than a node", a10, slurm.Job{GRESPerNode: gres("gpu:2")}, false},
		{"other gres", a10, slurm.Job{GRESPerNode: gres("fpga:1")}, false},
		{"--gpus over nodes fit", a100, slurm.Job{NodeCount: 2, GRESPerJob: gres("gpu:16")}, true},
		{"--gpus over nodes too many", a100, slurm.Job{NodeCount: 2, GRESPerJob: gres("gpu:17")}, false},
		{"--gpus of another model", a100, slurm.Job{GRESPerJob: gres("gpu:a10g:1")}, false},
		{"--gpus on one node", a10, slurm.Job{GRESPerJob: gres("gpu:1")}, true},
	} {
		if got, why := Fits(cfg, c.cl, c.job); got != c.want {
			t.Errorf("%s: Fits(%s, %+v) = %v (%s), want %v", c.name, c.cl.Name, c.job, got, why, c.want)
		}
	}
}
