package cmd

import (
	"os"
	"sort"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/cmdline"
	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/server"
)

// settings is what the sizer takes from burst.yaml.
type settings struct {
	cfg              *config.Config
	classes          []sizing.Class
	classPartitions  map[string][]string // class -> partitions that hold it
	budgets          map[string]float64
	zones            []string
	burstPartitions  []string
	defaultPartition string
}

func loadSettings(c *cli.Context) (*settings, error) {
	cfg, err := compose.Load(cmdline.ConfigPath(c), os.Getenv)
	if err != nil {
		return nil, err
	}
	return settingsFrom(cfg, catalog.Default()), nil
}

// settingsFrom maps burst.yaml onto the sizer's own option types.
func settingsFrom(cfg *config.Config, cat *catalog.Catalog) *settings {
	s := &settings{cfg: cfg, classPartitions: compose.ClassPartitions(cfg), budgets: map[string]float64{},
		classes: compose.SizingClasses(cfg, cat)}
	for _, p := range cfg.Slurm.Partitions {
		s.burstPartitions = append(s.burstPartitions, p.Name)
		if p.Default {
			s.defaultPartition = p.Name
		}
	}
	zones := map[string]bool{}
	for _, c := range cfg.Classes {
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

func (s *settings) policy() (*sizing.Policy, error) { return compose.Policy(s.cfg) }

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
