package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/breaker"
	"github.com/burst-hpc/burst/internal/breaker/breakermetrics"
	"github.com/burst-hpc/burst/internal/cmdline"
	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/reconcile"
)

// DefaultReconcileGrace is how old an instance must be before the
// reconciler takes it for an orphan or a duplicate.
const DefaultReconcileGrace = 2 * time.Minute

func reconcileCommand() *cli.Command {
	return &cli.Command{
		Name:  "reconcile",
		Usage: "run one reconciliation pass: terminate orphaned instances, hand back nodes whose instance is gone",
		Description: `Compares the cluster's tagged instances with Slurm's nodes and prints every action
with its reason. burst-sizer serve runs the same pass every sizer.reconcile_interval.`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "dry-run", Usage: "print what would be done; change nothing"},
			&cli.DurationFlag{Name: "grace", Value: DefaultReconcileGrace, Usage: "how old an instance must be to count as an orphan or duplicate"},
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
		},
		Action: func(c *cli.Context) error {
			cfg, err := compose.Load(cmdline.ConfigPath(c), os.Getenv)
			if err != nil {
				return err
			}
			log := compose.CommandLogger(c.App.ErrWriter, cfg)
			r, err := newReconciler(c.Context, cfg, reconcile.Options{DryRun: c.Bool("dry-run"), Grace: c.Duration("grace"), Logger: log})
			if err != nil {
				return err
			}
			rep, runErr := r.RunOnce(c.Context)
			if c.Bool("json") {
				out := reconcileJSON{At: rep.At, DryRun: rep.DryRun, Instances: rep.Instances, Nodes: rep.Nodes, Actions: []reconcileActionJSON{}}
				for _, x := range rep.Results {
					e := ""
					if x.Err != nil {
						e = x.Err.Error()
					}
					out.Actions = append(out.Actions, reconcileActionJSON{x.Action, x.Jobs, e})
				}
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				if err := enc.Encode(out); err != nil {
					return err
				}
				return runErr
			}
			w := c.App.Writer
			mode := ""
			if rep.DryRun {
				mode = " (dry run: nothing changed)"
			}
			fmt.Fprintf(w, "%d instances, %d burst nodes, %d actions%s\n", rep.Instances, rep.Nodes, len(rep.Results), mode)
			for _, x := range rep.Results {
				line := x.Action.String()
				if len(x.Jobs) > 0 {
					line += fmt.Sprintf(" [requeue jobs %v]", x.Jobs)
				}
				if x.Err != nil {
					line += " FAILED: " + x.Err.Error()
				}
				fmt.Fprintln(w, line)
			}
			return runErr
		},
	}
}

// newReconciler builds a reconciler for burst.yaml: the EC2 provider and
// Slurm's command-line tools, as burst-resume builds them.
func newReconciler(ctx context.Context, cfg *config.Config, o reconcile.Options) (*reconcile.Reconciler, error) {
	prov, err := compose.Cloud(ctx, cfg, o.Logger)
	if err != nil {
		return nil, fmt.Errorf("the reconciler: %w", err)
	}
	sl, err := compose.Slurm(cfg, os.Getenv, o.Logger)
	if err != nil {
		return nil, fmt.Errorf("the reconciler: %w", err)
	}
	o.Owned = func(n string) bool { _, ok := cfg.ClassOfNode(n); return ok }
	if o.ResumeTimeout <= 0 {
		o.ResumeTimeout = cfg.Slurm.ResumeTimeout.Duration
	}
	return reconcile.New(prov, sl, o)
}

// registerBreakerMetrics exports the launch breaker's state file of dir.
func registerBreakerMetrics(reg prometheus.Registerer, dir string, log *slog.Logger) {
	if err := reg.Register(breakermetrics.NewCollector(breaker.New(breaker.Options{Dir: dir, Logger: log}))); err != nil {
		log.Warn("exporting launch breaker metrics", "err", err)
	}
}

// startReconciler runs the reconciler loop of burst-sizer serve every
// sizer.reconcile_interval, and exports the launch breaker's state; it
// returns the reconciler's Kick (a pass now), nil when none runs. A
// reconciler that cannot be built (no EC2 credentials, say) is logged and
// the daemon serves without it.
func startReconciler(ctx context.Context, st *settings, reg prometheus.Registerer, grace time.Duration,
	terminated func(context.Context, string, time.Time) error, fence func(context.Context) error, log *slog.Logger) (kick func()) {
	registerBreakerMetrics(reg, st.cfg.Sizer.StateDir, log)
	r, err := newReconciler(ctx, st.cfg, reconcile.Options{Grace: grace, Logger: log, Registerer: reg, Terminated: terminated, Fence: fence})
	if err != nil {
		log.Error("reconciler not started: orphaned instances will not be reaped", "err", err)
		return nil
	}
	log.Info("reconciler started", "interval", st.cfg.Sizer.ReconcileInterval.Duration, "grace", grace)
	go r.Run(ctx, st.cfg.Sizer.ReconcileInterval.Duration)
	return r.Kick
}

// reconcileJSON is `burst-sizer reconcile --json`.
type reconcileJSON struct {
	At        time.Time             `json:"at"`
	DryRun    bool                  `json:"dry_run"`
	Instances int                   `json:"instances"`
	Nodes     int                   `json:"nodes"`
	Actions   []reconcileActionJSON `json:"actions"`
}

type reconcileActionJSON struct {
	reconcile.Action
	Jobs  []uint32 `json:"jobs,omitempty"`
	Error string   `json:"error,omitempty"`
}
