package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/burst-hpc/burst/internal/admit"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm"
)

// hookSlurm is what the prolog's and epilog's bookkeeping asks of Slurm.
type hookSlurm interface {
	RequeueHold(ctx context.Context, jobID uint32, reason string) error
	admit.Slurm
}

// RunRecorder records jobs' runs on burst nodes (*JournalRecorder).
type RunRecorder interface {
	Run(ctx context.Context, run sizerapi.JobRun) error
}

// Hooks is the spend and admission bookkeeping of PrologSlurmctld and
// EpilogSlurmctld.
type Hooks struct {
	Cfg      *config.Config
	Slurm    hookSlurm
	Admit    *admit.Controller // nil: no admission control
	Recorder RunRecorder       // may be nil
	Log      *slog.Logger
	Now      func() time.Time
}

// burstNodes keeps the nodes of a hostlist that are burst's.
func (h *Hooks) burstNodes(nodelist string) []string {
	ns, err := hostlist.Expand(nodelist)
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range ns {
		if _, ok := h.Cfg.ClassOfNode(n); ok {
			out = append(out, n)
		}
	}
	return out
}

func findJob(jobs []slurm.Job, id uint32) (slurm.Job, bool) {
	for _, j := range jobs {
		if j.ID == id {
			return j, true
		}
	}
	return slurm.Job{}, false
}

// Prolog admits a job that reached burst nodes without a resume (a warm
// node kept up for it): a job admission control refuses is requeued and
// held with the reason, before it runs. jobs is Slurm's view. It returns
// whether the job may run.
func (h *Hooks) Prolog(ctx context.Context, jobID uint32, nodelist string, jobs []slurm.Job) bool {
	log := logOr(h.Log).With("job", jobID, "nodes", nodelist)
	nodes := h.burstNodes(nodelist)
	if h.Admit == nil || len(nodes) == 0 || !h.Admit.Configured() {
		return true
	}
	j, ok := findJob(jobs, jobID)
	if !ok {
		log.Warn("prolog: the job is not in squeue; admitting it (its resume checked it, if it had one)")
		return true
	}
	// the most a node of its class costs: an upper bound of the instance it runs on
	price := 0.0
	for _, n := range nodes {
		cl, _ := h.Cfg.ClassOfNode(n)
		p := 0.0
		for _, t := range cl.Candidates(catalog.Default()) {
			p = max(p, t.OnDemandUSD)
		}
		price += p
	}
	gpus := int(j.GPUsPerNode()) * len(nodes)
	if gpus == 0 && len(j.GRESPerJob) > 0 {
		gpus = int(slurm.GPUs(j.GRESPerJob))
	}
	d, err := h.Admit.Admit(ctx, admit.Need{JobID: jobID, Account: j.Account, User: j.User, GPUs: gpus, Nodes: len(nodes), PriceUSD: price, TimeLimit: j.TimeLimit}, jobs)
	if err != nil {
		d = admit.Decision{Reason: admit.HeldPrefix + "admission control failed: " + err.Error()}
	}
	if d.Admitted {
		return true
	}
	log.Warn("prolog: admission control holds the job; requeueing it held", "reason", d.Reason)
	if err := h.Slurm.RequeueHold(ctx, jobID, truncComment(d.Reason)); err != nil {
		log.Error("requeueing a refused job held", "err", err)
	}
	return false
}

// RunStarted records the job's start on its burst nodes (the moment they
// are ready and the job starts).
func (h *Hooks) RunStarted(ctx context.Context, jobID uint32, nodelist, account, user string, gpusPerNode int) {
	nodes := h.burstNodes(nodelist)
	if h.Recorder == nil || len(nodes) == 0 {
		return
	}
	run := sizerapi.JobRun{JobID: fmt.Sprint(jobID), Account: account, User: user, Nodes: nodes, GPUsPerNode: gpusPerNode, Start: nowOr(h.Now)()}
	if err := h.Recorder.Run(ctx, run); err != nil {
		logOr(h.Log).Warn("recording the job's start", "job", jobID, "err", err)
	}
}

// Epilog records the end of the job's run, drops its admission and
// releases the held jobs that fit now that it ended (before the node's
// release decides whether to keep it warm for a waiting job). jobs is
// Slurm's view.
func (h *Hooks) Epilog(ctx context.Context, jobID uint32, nodelist string, jobs []slurm.Job) {
	log := logOr(h.Log).With("job", jobID)
	nodes := h.burstNodes(nodelist)
	j, known := findJob(jobs, jobID)
	if h.Recorder != nil && len(nodes) > 0 {
		end := nowOr(h.Now)()
		start := end
		if known {
			if !j.StartTime.IsZero() && j.StartTime.Before(end) {
				start = j.StartTime
			}
			if !j.EndTime.IsZero() && !j.EndTime.After(end) && !j.EndTime.Before(start) {
				end = j.EndTime
			}
		}
		run := sizerapi.JobRun{JobID: fmt.Sprint(jobID), Account: j.Account, User: j.User, Nodes: nodes, GPUsPerNode: int(j.GPUsPerNode()), Start: start, End: end}
		if err := h.Recorder.Run(ctx, run); err != nil {
			log.Warn("recording the job's end", "err", err)
		}
	}
	if h.Admit == nil || !h.Admit.Configured() {
		return
	}
	if err := h.Admit.Forget(jobID); err != nil {
		log.Warn("dropping the ended job's admission", "err", err)
	}
	others := make([]slurm.Job, 0, len(jobs))
	for _, x := range jobs {
		if x.ID != jobID {
			others = append(others, x)
		}
	}
	if ids, err := h.Admit.ReleaseHeld(ctx, others, h.Slurm); err != nil || len(ids) > 0 {
		log.Info("released held jobs at job end", "released", ids, "err", err)
	}
}
