package classmatch

import (
	"testing"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/slurm"
)

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

func TestClassOf(t *testing.T) {
	cfg := matchConfig()
	for _, c := range []struct {
		job  slurm.Job
		want string
	}{
		{slurm.Job{Features: "a100"}, "a100"},
		{slurm.Job{Features: "a10"}, "a10"},
		{slurm.Job{}, "a10"}, // the first class that fits
		{slurm.Job{GRESPerNode: []slurm.GRES{{Name: "gpu", Count: 4}}}, "a100"},
		{slurm.Job{Features: "h100"}, ""},
	} {
		got := ""
		if cl := ClassOf(cfg, c.job); cl != nil {
			got = cl.Name
		}
		if got != c.want {
			t.Errorf("ClassOf(%+v) = %q, want %q", c.job, got, c.want)
		}
	}
	if Nodes(slurm.Job{}) != 1 || Nodes(slurm.Job{NodeCount: 3}) != 3 {
		t.Error("Nodes")
	}
}
