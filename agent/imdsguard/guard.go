// Package imdsguard re-checks, while the node runs, the IMDS firewall the
// bootstrap installed (instance metadata for root only) and drains the node
// when it is gone: an `nft flush ruleset`, a firewall service's reload or a
// package's post-install script would otherwise silently give every job
// the instance role's credentials and the user data. The node is drained,
// not repaired: something on it removes rules, and an admin should look
// (`sinfo -R` shows why) before it takes jobs again.
package imdsguard

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/bootstrap"
	"github.com/burst-hpc/burst/internal/slurm"
)

// Lister returns `nft -j list table inet burst_imds` (or its error).
type Lister func(ctx context.Context) ([]byte, error)

// Drainer is the part of slurm.Client the guard uses.
type Drainer interface {
	UpdateNodes(ctx context.Context, u ...slurm.NodeUpdate) error
}

// Options configure a Guard.
type Options struct {
	Node     string
	Want     []bootstrap.Endpoint // what the bootstrap closed
	Interval time.Duration        // default 1 minute
	Logger   *slog.Logger
}

// Guard checks the firewall every Interval.
type Guard struct {
	list    Lister
	drain   Drainer
	o       Options
	drained bool
}

// New returns a guard; Want must name at least one endpoint.
func New(list Lister, drain Drainer, o Options) (*Guard, error) {
	if len(o.Want) == 0 {
		return nil, fmt.Errorf("imds guard: no endpoints to check")
	}
	if o.Interval <= 0 {
		o.Interval = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Guard{list: list, drain: drain, o: o}, nil
}

// Check runs one check; it returns the problem ("" when the rules close
// every endpoint) and drains the node the first time there is one.
func (g *Guard) Check(ctx context.Context) string {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	out, err := g.list(lctx)
	cancel()
	missing, err := bootstrap.CheckFirewall(out, err, g.o.Want)
	var problem string
	switch {
	case err != nil:
		problem = err.Error()
	case len(missing) > 0:
		names := make([]string, len(missing))
		for i, e := range missing {
			names[i] = e.String()
		}
		problem = "no rule closes " + strings.Join(names, ", ") + " to non-root users"
	}
	if problem == "" {
		if g.drained {
			g.o.Logger.Warn("the IMDS firewall is back; the node stays drained until an admin resumes it (scontrol update nodename=" + g.o.Node + " state=resume)")
		}
		return ""
	}
	if !g.drained {
		reason := "security: IMDS firewall gone (" + problem + ")"
		if len(reason) > 120 {
			reason = reason[:117] + "..."
		}
		dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := g.drain.UpdateNodes(dctx, slurm.NodeUpdate{Names: []string{g.o.Node}, State: "DRAIN", Reason: reason})
		cancel()
		if err != nil {
			g.o.Logger.Error("the IMDS firewall is gone and draining the node failed; retrying at the next check", "problem", problem, "err", err)
			return problem
		}
		g.drained = true
		g.o.Logger.Error("the IMDS firewall is gone: instance metadata is open to every user; drained the node", "problem", problem, "reason", reason)
	}
	return problem
}

// Run checks every Interval until ctx ends.
func (g *Guard) Run(ctx context.Context) error {
	t := time.NewTicker(g.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			g.Check(ctx)
		}
	}
}
