package cmd

import (
	"fmt"
	"sort"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/sizer/policy"
	"github.com/burst-hpc/burst/sizer/server"
)

// settings is what the sizer takes from burst.yaml.
type settings struct {
	cfg              *config.Config
	classes          []policy.Class
	classPartitions  map[string][]string // class -> partitions that hold it
	budgets          map[string]float64
	zones            []string
	burstPartitions  []string
	defaultPartition string
}

func loadSettings(path string) (*settings, error) {
	cfg, err := config.Load(config.ResolvePath(path))
	if err != nil {
		return nil, err
	}
	return settingsFrom(cfg, catalog.Default()), nil
}

// settingsFrom maps burst.yaml onto the sizer's own option types.
func settingsFrom(cfg *config.Config, cat *catalog.Catalog) *settings {
	s := &settings{cfg: cfg, classPartitions: map[string][]string{}, budgets: map[string]float64{}}
	for _, p := range cfg.Slurm.Partitions {
		s.burstPartitions = append(s.burstPartitions, p.Name)
		if p.Default {
			s.defaultPartition = p.Name
		}
		names := p.Classes
		if len(names) == 0 {
			for _, c := range cfg.Classes {
				names = append(names, c.Name)
			}
		}
		for _, n := range names {
			s.classPartitions[n] = append(s.classPartitions[n], p.Name)
		}
	}
	zones := map[string]bool{}
	for i := range cfg.Classes {
		c := &cfg.Classes[i]
		pc := policy.Class{Name: c.Name, GPUModel: c.GPUModel, GPUsPerNode: c.GPUsPerNode, MaxNodes: c.MaxNodes, Capacity: policy.Capacity(c.Capacity)}
		for _, t := range c.Candidates(cat) {
			pc.InstanceTypes = append(pc.InstanceTypes, t.Name)
		}
		if ps := s.classPartitions[c.Name]; len(ps) > 0 {
			pc.Partition = ps[0]
		}
		s.classes = append(s.classes, pc)
		for _, z := range c.Zones {
			zones[z] = true
		}
	}
	for z := range zones {
		s.zones = append(s.zones, z)
	}
	sort.Strings(s.zones)
	for _, b := range cfg.Budgets {
		s.budgets[b.Account] = b.MonthlyUSD
	}
	return s
}

func (s *settings) policy() (*policy.Policy, error) {
	p, err := policy.New(catalog.Default(), s.cfg.Cluster.Region, s.classes, policy.DefaultParams())
	if err != nil {
		return nil, fmt.Errorf("building sizing policy from %s: %w", s.cfg.Source, err)
	}
	return p, nil
}

func (s *settings) serverOptions() server.Options {
	return server.Options{
		Listen:    s.cfg.Sizer.Listen,
		TokenFile: s.cfg.Sizer.TokenFile,
		StateDir:  s.cfg.Sizer.StateDir,
		Budgets:   s.budgets,
		Classes:   s.classes,
		Region:    s.cfg.Cluster.Region,
		Zones:     s.zones,
	}
}

// PolicyFromConfig is the sizing policy for burst.yaml, built exactly as
// burst-sizer builds it; burst-resume ranks with it when the daemon does not
// answer (one policy, never two).
func PolicyFromConfig(cfg *config.Config) (*policy.Policy, error) {
	return settingsFrom(cfg, catalog.Default()).policy()
}
