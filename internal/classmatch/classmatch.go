// Package classmatch says, exactly, whether a Slurm job could run on the
// nodes of a burst node class: for keeping a node warm for a waiting job
// (burst-suspend) and for counting a job towards its class's warm-pool
// forecast (burst-sizer serve).
package classmatch

import (
	"fmt"
	"strings"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/slurm"
)

// NodeFeatures is the feature set burst-slurm-conf gives a class's nodes
// (internal/slurmconf): "burst", the class name, its GPU model and its extra
// features.
func NodeFeatures(cl *config.Class) map[string]bool {
	f := map[string]bool{"burst": true, cl.Name: true, cl.GPUModel: true}
	for _, x := range cl.Features {
		f[x] = true
	}
	return f
}

// Fits reports whether a pending job could run on nodes of class cl, matched
// exactly, for keeping a node warm for it:
//   - its --constraint, evaluated over the class's node features with whole
//     feature names ("a10" does not match a node of class "a100");
//   - its partition (one of them, for a job submitted to several) holds the
//     class; a job naming no partition goes to the default one;
//   - every per-node GRES (--gres) is a GPU of the class's model (or untyped)
//     and no more than the class has per node;
//   - GPUs per job (--gpus) spread over its nodes fit a node, of the model.
//
// A constraint burst cannot parse never fits: a wrong guess keeps a node
// up for nothing, a refusal only costs the boot the job would pay anyway.
func Fits(cfg *config.Config, cl *config.Class, j slurm.Job) (bool, string) {
	if j.Features != "" {
		ok, err := slurm.MatchConstraint(j.Features, NodeFeatures(cl))
		if err != nil {
			return false, fmt.Sprintf("constraint %q: %v", j.Features, err)
		}
		if !ok {
			return false, fmt.Sprintf("constraint %q does not match class %s", j.Features, cl.Name)
		}
	}
	if !partitionHolds(cfg, j.Partition, cl.Name) {
		return false, fmt.Sprintf("partition %q does not hold class %s", j.Partition, cl.Name)
	}
	for _, g := range j.GRESPerNode {
		if g.Name != "gpu" {
			return false, fmt.Sprintf("gres %s: class %s has only gpu", g.Name, cl.Name)
		}
		if g.Type != "" && g.Type != cl.GPUModel {
			return false, fmt.Sprintf("gres gpu:%s: class %s has %s", g.Type, cl.Name, cl.GPUModel)
		}
		if g.Count > uint64(cl.GPUsPerNode) {
			return false, fmt.Sprintf("gres gpu:%d per node: class %s has %d", g.Count, cl.Name, cl.GPUsPerNode)
		}
	}
	for _, g := range j.GRESPerJob {
		if g.Name != "gpu" {
			return false, fmt.Sprintf("gpus-per-job %s: class %s has only gpu", g.Name, cl.Name)
		}
		if g.Type != "" && g.Type != cl.GPUModel {
			return false, fmt.Sprintf("--gpus %s:%d: class %s has %s", g.Type, g.Count, cl.Name, cl.GPUModel)
		}
		nodes := uint64(max(j.NodeCount, 1))
		if per := (g.Count + nodes - 1) / nodes; per > uint64(cl.GPUsPerNode) {
			return false, fmt.Sprintf("--gpus %d over %d node(s): class %s has %d per node", g.Count, nodes, cl.Name, cl.GPUsPerNode)
		}
	}
	return true, ""
}

// partitionHolds: the job's partition list (squeue shows "a,b" for a job
// submitted to several) has one of burst's partitions that holds the class.
func partitionHolds(cfg *config.Config, list, class string) bool {
	names := strings.Split(list, ",")
	if strings.TrimSpace(list) == "" {
		names = nil
		for _, p := range cfg.Slurm.Partitions {
			if p.Default {
				names = append(names, p.Name)
			}
		}
	}
	for _, n := range names {
		n = strings.TrimSpace(n)
		for _, p := range cfg.Slurm.Partitions {
			if p.Name != n {
				continue
			}
			if len(p.Classes) == 0 {
				return true
			}
			for _, c := range p.Classes {
				if c == class {
					return true
				}
			}
		}
	}
	return false
}

// ClassOf is the class a job would run on: the first class of burst.yaml
// that fits it (with cli_filter.lua every job names its class in
// --constraint, so at most one fits), and nil when none does.
func ClassOf(cfg *config.Config, j slurm.Job) *config.Class {
	for i := range cfg.Classes {
		if ok, _ := Fits(cfg, &cfg.Classes[i], j); ok {
			return &cfg.Classes[i]
		}
	}
	return nil
}

// Nodes is how many nodes the job asks for (at least 1).
func Nodes(j slurm.Job) int { return int(max(j.NodeCount, 1)) }
