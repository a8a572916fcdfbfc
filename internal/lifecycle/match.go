package lifecycle

import (
	"fmt"
	"strconv"
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
		ok, err := MatchConstraint(j.Features, NodeFeatures(cl))
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

// MatchConstraint evaluates a Slurm --constraint expression over a node's
// features: names joined by & (and; also ","), | (or), grouped with ( ) or
// [ ] (Slurm's matching or, which for a single node is an or), each name
// optionally with a *count (ignored: one node) and, in Slurm 23.02 and
// later, negated with !. Names match whole, case-sensitively, as in Slurm.
func MatchConstraint(expr string, features map[string]bool) (bool, error) {
	p := &constraintParser{s: expr, f: features}
	v, err := p.or()
	if err != nil {
		return false, err
	}
	p.space()
	if p.i < len(p.s) {
		return false, fmt.Errorf("unexpected %q at column %d", p.s[p.i], p.i+1)
	}
	return v, nil
}

type constraintParser struct {
	s string
	i int
	f map[string]bool
	d int // nesting depth
}

func (p *constraintParser) space() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *constraintParser) or() (bool, error) {
	v, err := p.and()
	if err != nil {
		return false, err
	}
	for {
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != '|' {
			return v, nil
		}
		p.i++
		w, err := p.and()
		if err != nil {
			return false, err
		}
		v = v || w
	}
}

func (p *constraintParser) and() (bool, error) {
	v, err := p.unary()
	if err != nil {
		return false, err
	}
	for {
		p.space()
		if p.i >= len(p.s) || (p.s[p.i] != '&' && p.s[p.i] != ',') {
			return v, nil
		}
		p.i++
		w, err := p.unary()
		if err != nil {
			return false, err
		}
		v = v && w
	}
}

func (p *constraintParser) unary() (bool, error) {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == '!' {
		p.i++
		v, err := p.unary()
		return !v, err
	}
	if p.i < len(p.s) && (p.s[p.i] == '(' || p.s[p.i] == '[') {
		open := p.s[p.i]
		closeCh := byte(')')
		if open == '[' {
			closeCh = ']'
		}
		p.i++
		if p.d++; p.d > 32 {
			return false, fmt.Errorf("nested more than 32 deep")
		}
		v, err := p.or()
		if err != nil {
			return false, err
		}
		p.d--
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != closeCh {
			return false, fmt.Errorf("missing %q at column %d", closeCh, p.i+1)
		}
		p.i++
		return v, p.count()
	}
	start := p.i
	for p.i < len(p.s) && isFeatureByte(p.s[p.i]) {
		p.i++
	}
	if p.i == start {
		if p.i >= len(p.s) {
			return false, fmt.Errorf("a feature name is missing at the end")
		}
		return false, fmt.Errorf("unexpected %q at column %d", p.s[p.i], p.i+1)
	}
	name := p.s[start:p.i]
	return p.f[name], p.count()
}

// count skips a "*N" suffix.
func (p *constraintParser) count() error {
	if p.i >= len(p.s) || p.s[p.i] != '*' {
		return nil
	}
	p.i++
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	if _, err := strconv.Atoi(p.s[start:p.i]); err != nil {
		return fmt.Errorf("count after '*' at column %d is not a number", start+1)
	}
	return nil
}

func isFeatureByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':' || c == '=' || c == '+' || c == '/'
}
