package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/sizer/dash"
	"github.com/burst-hpc/burst/sizer/ledger"
	"github.com/burst-hpc/burst/sizer/report"
	"github.com/burst-hpc/burst/sizer/server"
	"github.com/burst-hpc/burst/sizer/spend"
	"github.com/burst-hpc/burst/sizer/store"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the sizer daemon (HTTP API, metrics, state, reconciler, warm pool, EventBridge interruption queue)",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "no-reconcile", Usage: "do not run the reconciler loop"},
			&cli.DurationFlag{Name: "reconcile-grace", Value: DefaultReconcileGrace, Usage: "how old an instance must be to count as an orphan or duplicate"},
			&cli.BoolFlag{Name: "no-ui", Usage: "serve the API without the dashboard (/ui)"},
			&cli.DurationFlag{Name: "idle-timeout", Value: dash.DefaultIdleTimeout, Usage: "idle time of the money view's idle-timeout counterfactual (ParallelCluster's default: 10m)"},
		},
		Action: func(c *cli.Context) error {
			st, err := loadSettings(c)
			if err != nil {
				return err
			}
			log := compose.StderrLogger(c.App.ErrWriter, st.cfg.Log.Level, "burst-sizer", false)
			o := st.serverOptions()
			o.Logger = log
			o.NoUI, o.IdleTimeout = c.Bool("no-ui"), c.Duration("idle-timeout")
			if o.IdentityCerts, err = st.identityCerts(); err != nil {
				return err
			}
			if o.EC2, err = compose.EC2API(c.Context, compose.EC2Options(st.cfg)); err != nil {
				return err
			}
			// the dashboard shows Slurm's node and job states
			sl, err := compose.Slurm(st.cfg, os.Getenv, log)
			if err != nil {
				return err
			}
			o.Slurm = sl
			o.Registry = prometheus.NewRegistry()
			o.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			var sync leaderSync[ledgerFunc]
			o.LedgerSync = leaderLedgerSync(&sync)
			srv, err := server.New(ctx, o)
			if err != nil {
				return err
			}
			// EC2 state changes the database cannot take now (locked by
			// another process, a full disk) wait in a spool beside it
			spool := ledger.NewStateSpool(srv.Store(), st.cfg.Sizer.StateDir, log)
			go spool.Run(ctx, 5*time.Second)
			// work that must run once runs on the leader (SQLite: this
			// sizer; PostgreSQL: whichever holds the election); every
			// replica serves the API and the dashboard. lctx carries the
			// term: the store refuses its writes once a newer leader is
			// elected (fencing), and each loop asks Fence before acting
			lead := func(lctx context.Context, _ store.Term) {
				reg := newTermRegistry(o.Registry)
				fence := srv.Store().Fence
				var kick func()
				var ledgerSync ledgerFunc
				if !c.Bool("no-reconcile") {
					if f := startLedger(lctx, st, srv, spool, log); f != nil {
						ledgerSync = func(rctx context.Context) (sizerapi.LedgerSync, error) { return f(store.WithTermOf(rctx, lctx)) }
					}
					kick = startReconciler(lctx, st, reg, c.Duration("reconcile-grace"), func(ctx context.Context, id string, at time.Time) error {
						_, err := srv.Store().RecordTerminate(ctx, id, at)
						return err
					}, fence, log)
				}
				startEvents(lctx, st, srv.Store(), spool.Record, kick, reg, log)
				startBlockWatch(lctx, st, fence, log)
				startWarmPool(lctx, st, reg, fence, log)
				sync.lead(ledgerSync)
				onTermEnd(lctx, func() { sync.stand(); reg.end() })
			}
			go srv.Store().Lead(ctx, store.LeaderOptions{Holder: holder(), Cluster: st.cfg.Cluster.Name, Log: log}, lead)
			return srv.ListenAndServe(ctx)
		},
	}
}

// ledgerFunc runs a ledger pass (POST /v1/ledger/sync).
type ledgerFunc = func(context.Context) (sizerapi.LedgerSync, error)

// leaderLedgerSync runs the leader's ledger pass; a standby answers
// not_leader so that clients move on.
func leaderLedgerSync(sync *leaderSync[ledgerFunc]) ledgerFunc {
	return func(ctx context.Context) (sizerapi.LedgerSync, error) {
		f, leading := sync.get()
		if !leading {
			return sizerapi.LedgerSync{}, fmt.Errorf("the ledger runs on the leading sizer (this one stands by; a client with sizer.urls moves on to the next): %w", server.ErrNotLeader)
		}
		if f == nil {
			return sizerapi.LedgerSync{}, errors.New("the ledger is not running here (no EC2 access, or --no-reconcile)")
		}
		return f(ctx)
	}
}

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "GPUs and GPU memory requested vs used, spend vs budget, right-sizing advice (this month)",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}, &cli.BoolFlag{Name: "local", Usage: "read the state database instead of asking the daemon"}},
		Action: func(c *cli.Context) error {
			st, err := loadSettings(c)
			if err != nil {
				return err
			}
			rep, err := buildReport(c.Context, st, c.Bool("local"))
			if err != nil {
				return err
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return report.WriteText(c.App.Writer, rep)
		},
	}
}

func buildReport(ctx context.Context, st *settings, local bool) (sizerapi.UsageReport, error) {
	if !local && st.cfg.Sizer.URL != "" {
		if tok, err := auth.LoadToken(st.cfg.Sizer.TokenFile); err == nil {
			if cl, err := sizerclient.New(st.cfg.Sizer.URL, tok, sizerclient.WithCAFile(st.cfg.Sizer.TLS.CAFile), sizerclient.WithFallbackURLs(st.cfg.Sizer.URLs...)); err == nil {
				rep, err := cl.UsageReport(ctx)
				if err == nil {
					return rep, nil
				}
				if !errors.Is(err, sizerclient.ErrUnavailable) {
					return sizerapi.UsageReport{}, err
				}
			}
		}
	}
	s, err := store.OpenReadOnlyConfig(ctx, storeConfig(st.cfg))
	if err != nil {
		return sizerapi.UsageReport{}, fmt.Errorf("building report: the daemon is unreachable and %w", err)
	}
	defer s.Close()
	now := time.Now()
	sts, err := spend.BudgetStatuses(ctx, s, st.budgetOptions(), now)
	if err != nil {
		return sizerapi.UsageReport{}, err
	}
	return server.BuildReport(ctx, s, sts, st.cfg.Accounting.IdleOwner, now)
}
