package compose

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/admit"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/journal"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

// Admission is the admission controller of burst.yaml: its budgets,
// limits and accounting.default_time_limit, over the admissions file of
// sizer.state_dir, reading spend through spend.
func Admission(cfg *config.Config, spend admit.SpendFunc, log *slog.Logger) *admit.Controller {
	return AdmissionOn(cfg, spend, log, nil)
}

// burstNodes are the plain names of every class's nodes.
func burstNodes(cfg *config.Config) []string {
	var out []string
	for _, cl := range cfg.Classes {
		ns, err := hostlist.Expand(cl.NodeNames())
		if err == nil {
			out = append(out, ns...)
		}
	}
	return out
}

// SharedAdmissions says whether admissions live in the sizer's database
// (sizer.store.driver postgres: several sizers and clusters decide against
// one document) rather than in the admissions file.
func SharedAdmissions(cfg *config.Config) bool { return cfg.Sizer.Store.Driver == "postgres" }

// AdmissionOn is Admission over shared admissions (nil: the file), whose
// entries are this cluster's (cluster.name).
func AdmissionOn(cfg *config.Config, spend admit.SpendFunc, log *slog.Logger, shared admit.Shared) *admit.Controller {
	o := admit.Options{Dir: cfg.Sizer.StateDir, Shared: shared, Cluster: cfg.Cluster.Name, Budgets: map[string]admit.Budget{}, DefaultTimeLimit: cfg.Accounting.DefaultTimeLimit.Duration,
		Spend: spend, Log: log, Owned: func(n string) bool { _, ok := cfg.ClassOfNode(n); return ok }, Nodes: burstNodes(cfg)}
	for _, b := range cfg.Budgets {
		ob := b.OnUnknown
		if ob == "" {
			ob = config.OnUnknownHold
		}
		o.Budgets[b.Account] = admit.Budget{CapUSD: b.MonthlyUSD, OnUnknown: ob}
	}
	for _, l := range cfg.Limits {
		o.Limits = append(o.Limits, admit.Limit{Account: l.Account, User: l.User, MaxGPUs: l.MaxGPUs, MaxNodes: l.MaxNodes})
	}
	return admit.New(o)
}

// Spend is how burst-resume and burst-suspend learn an account's spend
// for admission control: the sizer (after replaying the journal, plus what
// could not be replayed), else the local path: `burst-sizer spend --local`
// (the state database read-only plus the journal; the hook programs link
// no SQLite). An error means the spend cannot be known: the budget's
// on_unknown decides.
func (s *Stack) Spend(ctx context.Context, account string) (sizerapi.AccountSpend, error) {
	var sizerErr error
	if s.Sizer != nil {
		if _, err := s.Recorder.Flush(ctx); err != nil {
			s.Log.Warn("replaying the journal before a budget check", "err", err)
		}
		cctx, cancel := context.WithTimeout(ctx, s.Cfg.Sizer.Timeout.Duration)
		sp, err := s.Sizer.Spend(cctx, account)
		cancel()
		sizerErr = err
		if err == nil {
			// launches journaled but not replayed are spend the sizer lacks
			p, rerr := journal.In(s.Cfg.Sizer.StateDir, s.Log).Read()
			if rerr == nil {
				now := time.Now()
				extra, jobs := journal.Spend(p.Entries(), account, now, monthStart(now))
				sp.SpentUSD += extra
				for j, v := range jobs {
					if sp.Jobs == nil {
						sp.Jobs = map[string]float64{}
					}
					sp.Jobs[sizerapi.JobKey(s.Cfg.Cluster.Name, j)] += v // this cluster's launches
				}
				return sp, nil
			}
			sizerErr = fmt.Errorf("reading the journal: %w", rerr)
		}
	} else {
		sizerErr = errors.New("no sizer token")
	}
	sp, err := LocalSpend(ctx, s.Cfg, account)
	if err != nil {
		return sizerapi.AccountSpend{}, fmt.Errorf("sizer: %v; local: %w", short(sizerErr), err)
	}
	s.Log.Info("budget checked from the state database (sizer unavailable)", "account", account, "spent_usd", sp.SpentUSD, "sizer_err", sizerErr)
	return sp, nil
}

// LocalSpend runs `burst-sizer spend --local --json --account A` from
// slurm.burst_bin.
func LocalSpend(ctx context.Context, cfg *config.Config, account string) (sizerapi.AccountSpend, error) {
	bin := filepath.Join(cfg.Slurm.BurstBin, "burst-sizer")
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	args := []string{"spend", "--local", "--json", "--account", account}
	if cfg.Source != "" {
		args = append([]string{"--config", cfg.Source}, args...)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return sizerapi.AccountSpend{}, fmt.Errorf("%s spend --local: %w: %s", bin, err, short(errors.New(strings.TrimSpace(errb.String()))))
	}
	var sp sizerapi.AccountSpend
	if err := json.Unmarshal(out.Bytes(), &sp); err != nil {
		return sizerapi.AccountSpend{}, fmt.Errorf("%s spend --local answered %q: %w", bin, short(errors.New(out.String())), err)
	}
	return sp, nil
}

func short(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:197] + "..."
	}
	return s
}

func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// unreachableShared stands for shared admissions a program cannot reach:
// every decision fails (and the job waits) rather than falling back to a
// file no other head node sees.
type unreachableShared struct{ why string }

func (u unreachableShared) UpdateAdmissions(context.Context, func([]byte) ([]byte, bool, error)) error {
	return errors.New(u.why)
}

func (u unreachableShared) ReadAdmissions(context.Context) ([]byte, error) {
	return nil, errors.New(u.why)
}
