package cmd

import (
	"crypto/x509"
	"fmt"
	"os"
	"sort"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/cmdline"
	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/munge"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/identity"
	"github.com/burst-hpc/burst/sizer/server"
	"github.com/burst-hpc/burst/sizer/spend"
	"github.com/burst-hpc/burst/sizer/store"
)

// settings is what the sizer takes from burst.yaml.
type settings struct {
	cfg              *config.Config
	classes          []sizing.Class
	classPartitions  map[string][]string // class -> partitions that hold it
	budgets          map[string]float64
	onUnknown        map[string]string
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
	s := &settings{cfg: cfg, classPartitions: compose.ClassPartitions(cfg), budgets: map[string]float64{}, onUnknown: map[string]string{},
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
		s.onUnknown[b.Account] = b.OnUnknown
		if b.OnUnknown == "" {
			s.onUnknown[b.Account] = config.OnUnknownHold
		}
	}
	return s
}

func (s *settings) budgetOptions() spend.BudgetOptions {
	return spend.BudgetOptions{Caps: s.budgets, OnUnknown: s.onUnknown, IdleOwner: s.cfg.Accounting.IdleOwner, StateDir: s.cfg.Sizer.StateDir, Cluster: s.cfg.Cluster.Name}
}

func (s *settings) policy() (*sizing.Policy, error) { return compose.Policy(s.cfg) }

func (s *settings) serverOptions() server.Options {
	return server.Options{
		Listen:        s.cfg.Sizer.Listen,
		TokenFile:     s.cfg.Sizer.TokenFile,
		StateDir:      s.cfg.Sizer.StateDir,
		Store:         storeConfig(s.cfg),
		Budgets:       s.budgets,
		OnUnknown:     s.onUnknown,
		IdleOwner:     s.cfg.Accounting.IdleOwner,
		Classes:       s.classes,
		Region:        s.cfg.Cluster.Region,
		Zones:         s.zones,
		TLSCertFile:   s.cfg.Sizer.CertPath(),
		TLSKeyFile:    s.cfg.Sizer.KeyPath(),
		MetricsListen: s.cfg.Sizer.MetricsListen,
		RouteAuth:     s.routeAuth(),
		Cluster:       s.cfg.Cluster.Name,
		Account:       s.cfg.Sizer.Account,
		CredentialTTL: s.cfg.Sizer.CredentialTTL.Duration,
		Params:        compose.SizingParams(s.cfg),

		AcceptSimulatedGPUs: s.cfg.Sizer.AcceptSimulatedGPUs,
	}
}

// identityCerts reads sizer.identity_cert.
func (s *settings) identityCerts() ([]*x509.Certificate, error) {
	b, err := os.ReadFile(s.cfg.Sizer.IdentityCert)
	if err != nil {
		return nil, fmt.Errorf("reading sizer.identity_cert (AWS's RSA-2048 certificate for %s, from the EC2 User Guide): %w", s.cfg.Cluster.Region, err)
	}
	c, err := identity.ParseCertificates(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.cfg.Sizer.IdentityCert, err)
	}
	return c, nil
}

// routeAuth is the route requests' user authentication sizer.route_auth
// selects: MUNGE through slurm.munge_socket, or none (token).
func (s *settings) routeAuth() server.RouteAuthenticator {
	if s.cfg.Sizer.RouteAuth != "munge" {
		return nil
	}
	return munge.Runner{Socket: s.cfg.Slurm.MungeSocket}
}

// storeConfig is the store sizer.store names.
func storeConfig(cfg *config.Config) store.Config {
	c := cfg.Sizer.Store
	return store.Config{Driver: c.Driver, Dir: cfg.Sizer.StateDir, Postgres: store.Postgres{URL: c.URL, PasswordFile: c.PasswordFile,
		TLSMode: c.TLS.Mode, CAFile: c.TLS.CAFile, CertFile: c.TLS.CertFile, KeyFile: c.TLS.KeyFile, MaxConns: c.MaxConns}, Cluster: cfg.Cluster.Name}
}
