package lifecycle_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/admit"
	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/journal"
	"github.com/burst-hpc/burst/internal/lifecycle"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm"
)

// admitRig is newRig with admission control and launch intents wired as
// compose wires them, spend from spend.
func admitRig(t *testing.T, spend admit.SpendFunc, edit func(*config.Config), jobs ...slurm.Job) *rig {
	t.Helper()
	g, _ := newRig(t, "none", jobs...)
	edit(g.cfg)
	g.r.Admit = compose.Admission(g.cfg, spend, nil)
	g.r.Intents = (&lifecycle.JournalRecorder{Dir: g.cfg.Sizer.StateDir}).Intent
	return g
}

const rf7 = `{"jobs":[{"job_id":7,"nodes":"l4-1"}],"all_nodes":"l4-1"}`

// TestResumeHoldsOverReservation: a job whose reservation does not fit its
// account's cap is held with the reason, its node handed back, nothing
// launched; with room, the launch's intent is journaled before it.
func TestResumeHoldsOverReservation(t *testing.T) {
	zero := func(context.Context, string) (sizerapi.AccountSpend, error) { return sizerapi.AccountSpend{}, nil }
	g := admitRig(t, zero, func(c *config.Config) { c.Budgets = []config.Budget{{Account: "nlp", MonthlyUSD: 0.1}} }, l4Job(7, "l4-1", 1))
	out := g.resume(t, "l4-1", rf7)
	j, _ := g.slurm.Job(7)
	if len(g.cloud.Launches()) != 0 || len(out.Launched) != 0 || j.Reason != "JobHeldAdmin" ||
		!strings.HasPrefix(j.AdminComment, "burst: held: account nlp has $0.00 of its $0.10 monthly budget spent or reserved; this job reserves $") {
		t.Fatalf("launches %d, job %+v, outcome %+v", len(g.cloud.Launches()), j, out)
	}
	if ups := g.slurm.Updates(); len(ups) != 1 || !strings.HasPrefix(ups[0].Reason, "burst: job 7 held: account nlp has") {
		t.Fatalf("hand-back %+v", ups)
	}

	g = admitRig(t, zero, func(c *config.Config) { c.Budgets = []config.Budget{{Account: "nlp", MonthlyUSD: 100}} }, l4Job(7, "l4-1", 1))
	out = g.resume(t, "l4-1", rf7)
	if _, ok := out.Launched["l4-1"]; !ok {
		t.Fatalf("not launched: %+v", out)
	}
	p, err := journal.In(g.cfg.Sizer.StateDir, nil).Read()
	if err != nil {
		t.Fatal(err)
	}
	es := p.Entries()
	if len(es) < 2 || es[0].Kind != journal.KindIntent || es[0].Intent.ClientToken == "" || es[0].Intent.JobID != "7" || es[0].Intent.Account != "nlp" ||
		strings.Join(es[0].Intent.Nodes, ",") != "l4-1" || es[1].Kind != journal.KindLaunch {
		t.Fatalf("journal %+v", es)
	}
	res, _ := compose.Admission(g.cfg, zero, nil).Reservations()
	if len(res) != 1 || res[0].JobID != 7 || res[0].ReserveUSD <= 0 {
		t.Fatalf("reservations %+v", res)
	}
}

// TestResumeWithoutSpendOrJobs: the spend of a capped account unknown
// holds its job (on_unknown hold) and launches an uncapped account's; a
// job squeue cannot show is not launched while budgets apply.
func TestResumeWithoutSpendOrJobs(t *testing.T) {
	down := func(context.Context, string) (sizerapi.AccountSpend, error) {
		return sizerapi.AccountSpend{}, errors.New("sizer unreachable; no state database")
	}
	bio := l4Job(8, "l4-2", 1)
	bio.Account = "bio"
	g := admitRig(t, down, func(c *config.Config) { c.Budgets = []config.Budget{{Account: "nlp", MonthlyUSD: 100}} }, l4Job(7, "l4-1", 1), bio)
	out := g.resume(t, "l4-[1-2]", `{"jobs":[{"job_id":7,"nodes":"l4-1"},{"job_id":8,"nodes":"l4-2"}],"all_nodes":"l4-[1-2]"}`)
	j, _ := g.slurm.Job(7)
	if _, ok := out.Launched["l4-2"]; !ok || len(out.Launched) != 1 || !strings.Contains(j.AdminComment, "spend of account nlp cannot be known now (sizer unreachable") {
		t.Fatalf("outcome %+v job 7 %+v", out, j)
	}
	g = admitRig(t, down, func(c *config.Config) { c.Budgets = []config.Budget{{Account: "nlp", MonthlyUSD: 100}} }, l4Job(7, "l4-1", 1))
	g.slurm.JobsErr = context.DeadlineExceeded
	out = g.resume(t, "l4-1", rf7)
	if len(g.cloud.Launches()) != 0 || !strings.Contains(out.Failed["l4-1"], "cannot look up job 7") {
		t.Fatalf("outcome %+v", out)
	}
}

// TestResumeNoIntentNoLaunch: when the intent cannot be journaled (disk
// full, say), nothing is launched.
func TestResumeNoIntentNoLaunch(t *testing.T) {
	g := admitRig(t, nil, func(c *config.Config) { c.Budgets = nil }, l4Job(7, "l4-1", 1))
	g.r.Intents = func(sizerapi.LaunchIntent) error { return os.ErrPermission }
	out := g.resume(t, "l4-1", rf7)
	if len(out.Launched) != 0 || len(g.cloud.Live()) != 0 || !strings.Contains(out.Failed["l4-1"], "LaunchIntentNotJournaled") {
		t.Fatalf("outcome %+v", out)
	}
}

// TestPrologAdmitsWarmReuse: a job that reaches a warm node without a
// resume is checked against its account's GPU limit: over it, requeued
// held with the reason; under it, admitted; the epilog's end of a job
// releases the held one.
func TestPrologAdmitsWarmReuse(t *testing.T) {
	g, _ := newRig(t, "none")
	g.cfg.Limits = []config.Limit{{Account: "nlp", MaxGPUs: 1}}
	ac := compose.Admission(g.cfg, nil, nil)
	running := l4Job(5, "l4-1", 1)
	running.State = "RUNNING"
	warm := l4Job(6, "l4-2", 1)
	g.slurm.SetJobs(running, warm)
	h := &lifecycle.Hooks{Cfg: g.cfg, Slurm: g.slurm, Admit: ac, Now: time.Now}
	// what burst-resume's prolog reads: the job, and the jobs on burst nodes
	jobs, err := ac.View(context.Background(), g.slurm, false, 6)
	if err != nil {
		t.Fatal(err)
	}
	if h.Prolog(context.Background(), 6, "l4-2", jobs) {
		t.Fatal("admitted over the limit")
	}
	j, _ := g.slurm.Job(6)
	if j.State != "PENDING" || j.Reason != "JobHeldAdmin" || j.AdminComment != "burst: held: account nlp holds 1 of its 1 GPUs, this job needs 1; it starts when others end" {
		t.Fatalf("held job %+v", j)
	}
	// the epilog's: the ended job, the jobs on burst nodes, the held entries'
	g.slurm.SetJobs(slurm.Job{ID: 5, State: "COMPLETED", Account: "nlp", Nodes: "l4-1"}, j)
	if jobs, err = ac.View(context.Background(), g.slurm, true, 5); err != nil {
		t.Fatal(err)
	}
	h.Epilog(context.Background(), 5, "l4-1", jobs)
	if j, _ := g.slurm.Job(6); j.Reason == "JobHeldAdmin" {
		t.Fatalf("not released at the other job's end: %+v (calls %v)", j, g.slurm.Calls())
	}
}

// TestResumeReadsOnlyItsJobs: a resume reads only the jobs of its resume
// file (a small answer however long the queue); with admission control
// also the jobs holding burst nodes and its admissions' (admit.View), here
// none but job 7: never the queue.
func TestResumeReadsOnlyItsJobs(t *testing.T) {
	queue := []slurm.Job{l4Job(7, "l4-1", 1)}
	for id := uint32(100); id < 600; id++ {
		queue = append(queue, slurm.Job{ID: id, State: "PENDING", Reason: "JobHeldUser", NodeCount: 1})
	}
	g := admitRig(t, nil, func(c *config.Config) { c.Budgets = nil }, queue...)
	if out := g.resume(t, "l4-1", rf7); len(out.Launched) != 1 {
		t.Fatalf("outcome %+v", out)
	}
	if r := g.slurm.JobReads(); len(r) != 1 || !slices.Equal(r[0], []uint32{7}) {
		t.Errorf("Jobs calls %v, want one for job 7", r)
	}
	zero := func(context.Context, string) (sizerapi.AccountSpend, error) { return sizerapi.AccountSpend{}, nil }
	g = admitRig(t, zero, func(c *config.Config) { c.Budgets = []config.Budget{{Account: "nlp", MonthlyUSD: 1000}} }, queue...)
	if out := g.resume(t, "l4-1", rf7); len(out.Launched) != 1 {
		t.Fatalf("with a budget: outcome %+v", out)
	}
	if r := g.slurm.JobReads(); len(r) != 1 || !slices.Equal(r[0], []uint32{7}) {
		t.Errorf("Jobs calls %v with a budget, want one for job 7", r)
	}
}
