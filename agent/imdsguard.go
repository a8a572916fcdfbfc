package main

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/agent/imdsguard"
	"github.com/burst-hpc/burst/internal/bootstrap"
	"github.com/burst-hpc/burst/internal/slurm"
)

// imdsGuardFlags are run's flags of the IMDS firewall re-check.
func imdsGuardFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "imds-firewall", EnvVars: []string{bootstrap.EnvIMDSFirewall}, Usage: "the endpoints the bootstrap's IMDS firewall closes to non-root users (space-separated, set by burst-agent bootstrap): re-checked every --imds-guard-interval; the node is drained when the rules are gone"},
		&cli.DurationFlag{Name: "imds-guard-interval", Value: time.Minute, EnvVars: []string{"BURST_IMDS_GUARD_INTERVAL"}, Usage: "how often the IMDS firewall is re-checked"},
		&cli.StringFlag{Name: "nft", Value: "/usr/sbin/nft", EnvVars: []string{"BURST_NFT"}, Usage: "the nftables command (reads the IMDS firewall)"},
	}
}

// imdsGuard re-checks the bootstrap's IMDS firewall (the endpoints in fw)
// through nft and drains the node when it is gone.
func imdsGuard(c *cli.Context, fw string, sc slurm.Client, node string, log *slog.Logger) (*imdsguard.Guard, error) {
	var want []bootstrap.Endpoint
	for _, s := range strings.Fields(fw) {
		e, err := bootstrap.ParseEndpoint(s)
		if err != nil {
			return nil, fmt.Errorf("--imds-firewall: %w", err)
		}
		want = append(want, e)
	}
	nft := c.String("nft")
	list := func(ctx context.Context) ([]byte, error) {
		var stderr strings.Builder
		cmd := exec.CommandContext(ctx, nft, "-j", "list", "table", "inet", bootstrap.FirewallTable)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("%s -j list table inet %s: %w: %s", nft, bootstrap.FirewallTable, err, strings.TrimSpace(stderr.String()))
		}
		return out, nil
	}
	return imdsguard.New(list, sc, imdsguard.Options{Node: node, Want: want, Interval: c.Duration("imds-guard-interval"), Logger: log.With("component", "imds-guard")})
}
