package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/journal"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/ledger"
	"github.com/burst-hpc/burst/sizer/server"
	"github.com/burst-hpc/burst/sizer/spend"
	"github.com/burst-hpc/burst/sizer/store"
)

func spendCommand() *cli.Command {
	return &cli.Command{
		Name:  "spend",
		Usage: "an account's spend this month, as admission control reads it",
		Description: `With --local (what burst-resume runs when the daemon does not answer) it reads the
state database read-only and adds the journal's launches not yet replayed; it fails
when neither can be read, and the budget's on_unknown then decides.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "account", Required: true, Usage: "the Slurm account"},
			&cli.BoolFlag{Name: "local", Usage: "read the state database and the journal instead of asking the daemon"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: func(c *cli.Context) error {
			st, err := loadSettings(c)
			if err != nil {
				return err
			}
			var sp sizerapi.AccountSpend
			if c.Bool("local") {
				sp, err = localSpend(c.Context, st, c.String("account"), time.Now())
			} else {
				var cl *sizerclient.Client
				if cl, err = adminClient(st); err == nil {
					sp, err = cl.Spend(c.Context, c.String("account"))
				}
			}
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return json.NewEncoder(c.App.Writer).Encode(sp)
			}
			_, err = fmt.Fprintf(c.App.Writer, "account %s: spent $%.4f this month (%s, as of %s); burning $%.4f/h\n", sp.Account, sp.SpentUSD, sp.Source, sp.AsOf.UTC().Format(time.RFC3339), sp.BurnUSDPerHour)
			return err
		},
	}
}

// localSpend is an account's spend from the state database (read-only)
// plus the journal's launches the sizer has not received.
func localSpend(ctx context.Context, st *settings, account string, now time.Time) (sizerapi.AccountSpend, error) {
	s, err := store.OpenReadOnlyConfig(ctx, storeConfig(st.cfg))
	if err != nil {
		return sizerapi.AccountSpend{}, fmt.Errorf("local spend of account %s: %w", account, err)
	}
	defer s.Close()
	m, err := spend.Read(ctx, s, st.cfg.Accounting.IdleOwner, now)
	if err != nil {
		return sizerapi.AccountSpend{}, fmt.Errorf("local spend of account %s: reading %s: %w", account, s.Path(), err)
	}
	sp := m.Spend(account)
	p, err := journal.In(st.cfg.Sizer.StateDir, nil).Read()
	if err != nil {
		return sizerapi.AccountSpend{}, fmt.Errorf("local spend of account %s: %w", account, err)
	}
	extra, jobs := journal.Spend(p.Entries(), account, now, billing.MonthStart(now))
	sp.SpentUSD += extra
	for j, v := range jobs {
		sp.Jobs[sizerapi.JobKey(st.cfg.Cluster.Name, j)] += v // this cluster's launches
	}
	sp.Source = "local"
	return sp, nil
}

func adminClient(st *settings) (*sizerclient.Client, error) {
	tok, err := auth.LoadToken(st.cfg.Sizer.TokenFile)
	if err != nil {
		return nil, err
	}
	return sizerclient.New(st.cfg.Sizer.URL, tok, sizerclient.WithCAFile(st.cfg.Sizer.TLS.CAFile), sizerclient.WithFallbackURLs(st.cfg.Sizer.URLs...))
}

func ledgerCommand() *cli.Command {
	return &cli.Command{
		Name:  "ledger",
		Usage: "every instance's bill as burst computes it (EC2's rules), and the charges to jobs",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "sync", Usage: "first make the daemon read EC2's events and instances now"},
			&cli.BoolFlag{Name: "local", Usage: "read the state database instead of asking the daemon"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: func(c *cli.Context) error {
			st, err := loadSettings(c)
			if err != nil {
				return err
			}
			var l sizerapi.Ledger
			if c.Bool("local") {
				s, err := store.OpenReadOnlyConfig(c.Context, storeConfig(st.cfg))
				if err != nil {
					return err
				}
				defer s.Close()
				if l, err = spend.Ledger(c.Context, s, st.cfg.Accounting.IdleOwner, time.Now()); err != nil {
					return err
				}
			} else {
				cl, err := adminClient(st)
				if err != nil {
					return err
				}
				if c.Bool("sync") {
					res, err := cl.LedgerSync(c.Context)
					if err != nil {
						return err
					}
					fmt.Fprintf(c.App.ErrWriter, "synced: backfilled %v, closed %d, missing %v, %d open\n", res.Backfilled, len(res.Closed), res.Missing, res.Open)
				}
				if l, err = cl.Ledger(c.Context); err != nil {
					return err
				}
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(l)
			}
			return printLedger(c.App.Writer, l)
		},
	}
}

// printLedger writes the ledger as tables: the instances, then the
// capacity reservations.
func printLedger(w io.Writer, l sizerapi.Ledger) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tNODE\tTYPE\tCAPACITY\t$/h\tACCOUNT\tJOB\tBILLING START\tEND\tEND BY\tREASON\tSECONDS\t$\tNOTE")
	for _, in := range l.Instances {
		note := ""
		switch {
		case in.Open:
			note = "running"
		case in.Waived:
			note = "spot reclaimed in its first hour: not charged"
		}
		if in.StartSource != "ec2-event" {
			note += " (billed from launch: no running event)"
		}
		end := "-"
		if !in.End.IsZero() {
			end = in.End.UTC().Format("01-02 15:04:05")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.4f\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%.4f\t%s\n", in.InstanceID, in.Node, in.InstanceType, in.Capacity, in.PriceUSD, in.Account, in.JobID,
			in.BillingStart.UTC().Format("01-02 15:04:05"), end, in.EndSource, in.EndReason, in.BilledSeconds, in.USD, note)
	}
	if len(l.Reservations) > 0 {
		// billed whether used or not; their instances above are $0
		fmt.Fprintln(tw, "\nRESERVATION	COUNT	TYPE	ZONE	$/h EACH	MATCH	STATE	START	END	SECONDS	$")
		for _, r := range l.Reservations {
			end := "-"
			if !r.End.IsZero() {
				end = r.End.UTC().Format("01-02 15:04:05")
			}
			fmt.Fprintf(tw, "%s	%d	%s	%s	%.4f	%s	%s	%s	%s	%d	%.4f\n", r.ReservationID, r.Count, r.InstanceType, r.Zone, r.PriceUSD, r.Match, r.State,
				r.Start.UTC().Format("01-02 15:04:05"), end, r.Seconds, r.USD)
		}
	}
	return tw.Flush()
}

// startLedger runs the ledger beside the reconciler in burst-sizer serve:
// a sync with EC2 every reconcile interval, and a pass that releases the
// jobs admission control held once they fit. It returns the sync for POST
// /v1/ledger/sync (nil when the sizer has no EC2 access).
func startLedger(ctx context.Context, st *settings, srv *server.Server, spool *ledger.StateSpool, log *slog.Logger) func(context.Context) (sizerapi.LedgerSync, error) {
	prov, err := compose.Cloud(ctx, st.cfg, log)
	if err != nil {
		log.Error("ledger not started: spend is not reconciled with EC2", "err", err)
		return nil
	}
	o := ledger.Options{Cloud: prov, Store: srv.Store(), Spool: spool, Logger: log}
	for _, c := range st.cfg.Classes {
		o.ReservationIDs = append(o.ReservationIDs, c.Reservations.IDs...)
		for _, b := range c.Reservations.CapacityBlocks {
			if o.BlockPrices == nil {
				o.BlockPrices = map[string]float64{}
			}
			o.BlockPrices[b.ID] = b.PriceUSD
		}
	}
	if _, ok := st.cfg.Interruptions.Queue(); !ok {
		log.Warn("no interruptions.queue_url: the ledger bills from each launch (pending) time, a little more than EC2 does (EC2's state-change events come through that queue)")
	}
	l, err := ledger.New(o)
	if err != nil {
		log.Error("ledger not started", "err", err)
		return nil
	}
	interval := st.cfg.Sizer.ReconcileInterval.Duration
	go l.Run(ctx, interval)
	go releaseLoop(ctx, st, srv, interval, log)
	return l.Sync
}

// releaseLoop releases held jobs that fit now, every interval.
func releaseLoop(ctx context.Context, st *settings, srv *server.Server, interval time.Duration, log *slog.Logger) {
	sl, err := compose.Slurm(st.cfg, os.Getenv, log)
	if err != nil {
		log.Error("held jobs are not released: no Slurm client", "err", err)
		return
	}
	ac := compose.Admission(st.cfg, srv.AccountSpend, log)
	if compose.SharedAdmissions(st.cfg) {
		ac = compose.AdmissionOn(st.cfg, srv.AccountSpend, log, srv.Store())
	}
	t := time.NewTicker(min(interval, 10*time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := srv.Store().Fence(pctx) // releasing is leader-only work
		var jobs, lost []slurm.Job
		if err == nil {
			// the held jobs of the admissions, and the jobs holding burst
			// nodes (admit.View); then the held jobs without an entry
			jobs, err = ac.View(pctx, sl, true)
		}
		if err == nil {
			lost, err = ac.HeldWithoutEntry(pctx, sl)
			jobs = append(jobs, lost...)
		}
		if err == nil {
			_, err = ac.ReleaseHeld(pctx, jobs, sl)
		}
		cancel()
		if err != nil && !errors.Is(err, context.Canceled) {
			log.Warn("releasing held jobs", "err", err)
		}
	}
}
