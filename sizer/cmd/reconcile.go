package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/breaker"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/reconcile"
	"github.com/burst-hpc/burst/internal/slurm"
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
			cfg, err := config.Load(config.ResolvePath(c.String("config")))
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))
			r, err := newReconciler(c.Context, cfg, reconcile.Options{DryRun: c.Bool("dry-run"), Grace: c.Duration("grace"), Logger: log})
			if err != nil {
				return err
			}
			rep, runErr := r.RunOnce(c.Context)
			if c.Bool("json") {
				type res struct {
					reconcile.Action
					Jobs  []uint32 `json:",omitempty"`
					Error string   `json:",omitempty"`
				}
				out := struct {
					At        time.Time
					DryRun    bool
					Instances int
					Nodes     int
					Actions   []res
				}{At: rep.At, DryRun: rep.DryRun, Instances: rep.Instances, Nodes: rep.Nodes, Actions: []res{}}
				for _, x := range rep.Results {
					e := ""
					if x.Err != nil {
						e = x.Err.Error()
					}
					out.Actions = append(out.Actions, res{x.Action, x.Jobs, e})
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
	api, err := ec2p.NewSDKClient(ctx, cfg.Cluster.Region, cfg.Cluster.EC2Endpoint)
	if err != nil {
		return nil, err
	}
	prov, err := ec2p.New(api, ec2p.Options{
		Cluster: cfg.Cluster.Name, Subnets: cfg.Network.Subnets, LaunchTemplateName: cfg.Image.LaunchTemplate,
		ImageID: cfg.Image.AMI, InstanceProfile: cfg.Image.InstanceProfile, SecurityGroupIDs: cfg.Network.SecurityGroups,
		StateDir: cfg.Sizer.StateDir, Logger: o.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("setting up the EC2 provider for the reconciler: %w", err)
	}
	conf := os.Getenv("SLURM_CONF")
	if conf == "" {
		conf = filepath.Join(cfg.Slurm.ConfDir, "slurm.conf")
	}
	sl := slurm.NewScontrol(slurm.ScontrolOptions{BinDir: cfg.Slurm.BinDir, Conf: conf, Logger: o.Logger, Timeout: 20 * time.Second})
	o.Owned = func(n string) bool { _, ok := cfg.ClassOfNode(n); return ok }
	if o.ResumeTimeout <= 0 {
		o.ResumeTimeout = cfg.Slurm.ResumeTimeout.Duration
	}
	return reconcile.New(prov, sl, o)
}

// startReconciler runs the reconciler loop of burst-sizer serve every
// sizer.reconcile_interval, and exports the launch breaker's state. A
// reconciler that cannot be built (no EC2 credentials, say) is logged and
// the daemon serves without it.
func startReconciler(ctx context.Context, st *settings, reg prometheus.Registerer, grace time.Duration,
	terminated func(context.Context, string, time.Time) error, log *slog.Logger) {
	if err := reg.Register(breaker.NewCollector(breaker.New(breaker.Options{Dir: st.cfg.Sizer.StateDir, Logger: log}))); err != nil {
		log.Warn("exporting launch breaker metrics", "err", err)
	}
	r, err := newReconciler(ctx, st.cfg, reconcile.Options{Grace: grace, Logger: log, Registerer: reg, Terminated: terminated})
	if err != nil {
		log.Error("reconciler not started: orphaned instances will not be reaped", "err", err)
		return
	}
	log.Info("reconciler started", "interval", st.cfg.Sizer.ReconcileInterval.Duration, "grace", grace)
	go r.Run(ctx, st.cfg.Sizer.ReconcileInterval.Duration)
}
