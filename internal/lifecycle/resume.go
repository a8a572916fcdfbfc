package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/admit"
	"github.com/burst-hpc/burst/internal/breaker"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/jobmeta"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm"
)

// Resumer launches instances for nodes Slurm powers up.
type Resumer struct {
	Cfg      *config.Config
	Slurm    Slurm
	Cloud    cloud.Provider
	Ranker   Ranker
	Recorder Recorder     // may be nil
	UserData UserDataFunc // may be nil: the launch template's user data
	Log      *slog.Logger
	Now      func() time.Time
	// Parallel bounds concurrent launch requests (default 16).
	Parallel int
	// Breaker stops launching for a class after repeated launch failures
	// (may be nil).
	Breaker *breaker.Breaker
	// Admit is admission control (budgets, queue limits); nil admits all.
	Admit Admitter
	// Intents journals a launch intent before each CreateFleet (may be nil).
	Intents func(sizerapi.LaunchIntent) error

	jobs    []slurm.Job // Slurm's view of the jobs resumed for (and admission's: admit.View), read once per resume
	jobsErr error
}

// Admitter is admission control as the lifecycle uses it (*admit.Controller).
type Admitter interface {
	Admit(ctx context.Context, need admit.Need, jobs []slurm.Job) (admit.Decision, error)
	View(ctx context.Context, sl admit.Reader, withHeld bool, ids ...uint32) ([]slurm.Job, error)
	Adjust(jobID uint32, priceUSD float64) error
	Forget(jobID uint32) error
	Applies(account, user string) bool
	Configured() bool
}

// group is the nodes of one job (or one manually resumed node) in one class.
type group struct {
	job   *slurm.Job // nil for a manual power-up or a job Slurm no longer knows
	jobID uint32
	class *config.Class
	nodes []string
	// multi: the job has several nodes, also when this group holds fewer
	// (the rest already up, or launched by an earlier call)
	multi bool
}

// Outcome is what a resume did, for logs and tests.
type Outcome struct {
	Launched map[string]cloud.Instance // node -> instance
	Failed   map[string]string         // node -> reason given to Slurm
}

// TellSlurmTimeout is how long a resume may take, once its launches are
// over (its deadline reached or not), to hand failed nodes back and set
// the launched nodes' addresses: the margin burst-resume leaves between
// its deadline and Slurm's ResumeTimeout.
const TellSlurmTimeout = 10 * time.Second

// Resume handles one ResumeProgram call: arg is the hostlist Slurm passed,
// rf the parsed SLURM_RESUME_FILE (nil when there was none). It returns an
// error only when it could not even tell Slurm what went wrong.
func (r *Resumer) Resume(ctx context.Context, arg string, rf *slurm.ResumeFile) (Outcome, error) {
	log, now := logOr(r.Log), nowOr(r.Now)
	start := now()
	out := Outcome{Launched: map[string]cloud.Instance{}, Failed: map[string]string{}}
	nodes, err := hostlist.Expand(arg)
	if err != nil {
		return out, fmt.Errorf("reading the node list Slurm passed: %w", err)
	}
	groups, bad, err := r.plan(ctx, nodes, rf)
	if err != nil {
		return out, err
	}
	var mu sync.Mutex
	fail := func(nodes []string, reason string) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range nodes {
			out.Failed[n] = reason
		}
	}
	for reason, ns := range bad {
		fail(ns, reason)
	}
	par := r.Parallel
	if par <= 0 {
		par = 16
	}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Add(1)
		sem <- struct{}{}
		go func(g group) {
			defer wg.Done()
			defer func() { <-sem }()
			insts, failed := r.launchGroup(ctx, g)
			mu.Lock()
			for _, in := range insts {
				out.Launched[in.Node] = in
			}
			mu.Unlock()
			for reason, ns := range failed {
				fail(ns, reason)
			}
		}(g)
	}
	wg.Wait()
	// the launches may have used ctx up (the resume's deadline, a long
	// throttled burst): Slurm must still hear of the failed nodes now,
	// not at ResumeTimeout, and of the launched nodes' addresses
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), TellSlurmTimeout)
	defer cancel()
	if err := r.handBack(tctx, out.Failed); err != nil {
		log.Error("telling Slurm about failed nodes", "err", err)
		return out, err
	}
	if r.Cfg.Slurm.SetNodeAddr {
		r.setAddrs(tctx, out.Launched)
	}
	log.Info("resume done", "nodes", len(nodes), "launched", len(out.Launched), "failed", len(out.Failed),
		"seconds", now().Sub(start).Seconds())
	return out, nil
}

// plan groups nodes by job and class; nodes that cannot be launched come
// back in bad, by reason.
func (r *Resumer) plan(ctx context.Context, nodes []string, rf *slurm.ResumeFile) ([]group, map[string][]string, error) {
	log := logOr(r.Log)
	bad := map[string][]string{}
	jobOf := map[string]uint32{}
	var ids []uint32
	if rf != nil {
		for _, j := range rf.Jobs {
			ns, err := hostlist.Expand(j.Nodes)
			if err != nil {
				log.Warn("resume file names bad nodes for a job; resuming them on their own", "job", j.JobID, "nodes", j.Nodes, "err", err)
				continue
			}
			for _, n := range ns {
				jobOf[n] = j.JobID
			}
			ids = append(ids, j.JobID)
		}
	}
	jobs := map[uint32]*slurm.Job{}
	if len(ids) > 0 {
		if r.Admit != nil && r.Admit.Configured() {
			// and what admission control counts: the jobs on burst nodes
			// and its entries' (admit.View), not the queue
			r.jobs, r.jobsErr = r.Admit.View(ctx, r.Slurm, false, ids...)
		} else {
			// only the jobs resumed for: a small answer however long the queue
			r.jobs, r.jobsErr = r.Slurm.Jobs(ctx, ids...)
		}
		if r.jobsErr != nil {
			// without the job's request burst still launches the class's
			// cheapest offering: a resume never waits on squeue (unless
			// admission control needs the job's account, see launchGroup)
			log.Warn("looking up jobs failed; sizing from node classes only", "jobs", ids, "err", r.jobsErr)
		}
		for i := range r.jobs {
			if slices.Contains(ids, r.jobs[i].ID) {
				jobs[r.jobs[i].ID] = &r.jobs[i]
			}
		}
	}
	nodes, alloc := r.wholeJobs(ctx, nodes, rf, jobs, jobOf)
	byKey := map[string]*group{}
	var order []string
	for _, n := range nodes {
		cl, ok := r.Cfg.ClassOfNode(n)
		if !ok {
			reason := fmt.Sprintf("burst: node %s is in no class of %s", n, r.Cfg.Source)
			bad[reason] = append(bad[reason], n)
			continue
		}
		id := jobOf[n]
		key := fmt.Sprintf("%d/%s", id, cl.Name)
		if id == 0 {
			key = "manual/" + n // a manual power-up: each node on its own
		}
		g, ok := byKey[key]
		if !ok {
			g = &group{jobID: id, class: cl, job: jobs[id]}
			byKey[key] = g
			order = append(order, key)
		}
		g.nodes = append(g.nodes, n)
	}
	out := make([]group, 0, len(order))
	for _, k := range order {
		g := *byKey[k]
		g.multi = g.jobID != 0 && (alloc[g.jobID] != nil || g.job != nil && g.job.NodeCount > 1)
		if pos := alloc[g.jobID]; pos != nil {
			// the allocation's order, whichever call this is: concurrent
			// calls for one job then make the same launch (same client token)
			sort.SliceStable(g.nodes, func(i, j int) bool { return pos[g.nodes[i]] < pos[g.nodes[j]] })
		}
		out = append(out, g)
	}
	return out, bad, nil
}

// wholeJobs adds to nodes the rest of each multi-node job's allocation that
// Slurm has not resumed yet, and returns each such job's nodes in
// allocation order.
//
// From 24.05 ResumeRate is a token bucket: a job's nodes can come in
// several ResumeProgram calls (nodes_resume a subset of nodes_alloc), and
// 22.05 splits them the same way with ResumeRate, naming only the nodes
// resumed now. Launching each call's nodes on their own would break the
// job's all-or-nothing launch (one fleet, one pool). So the first call
// launches the whole allocation: every allocated node that Slurm shows
// powered down or powering up (not one already up, e.g. kept warm, whose
// instance runs). Slurm accepts a node that registers before its own
// resume call and then makes none for it; a later call for a node still
// booting finds the job's instances and launches nothing (the provider
// reuses live instances). The allocation is nodes_alloc (23.02+) or, on
// 22.05, the job's node list from squeue. When the node states cannot be
// read, only the nodes of this call launch, as before.
func (r *Resumer) wholeJobs(ctx context.Context, nodes []string, rf *slurm.ResumeFile, jobs map[uint32]*slurm.Job, jobOf map[string]uint32) ([]string, map[uint32]map[string]int) {
	if rf == nil {
		return nodes, nil
	}
	log := logOr(r.Log)
	inCall := map[string]bool{}
	for _, n := range nodes {
		inCall[n] = true
	}
	alloc := map[uint32]map[string]int{}
	var more []string
	moreJob := map[string]uint32{}
	for _, j := range rf.Jobs {
		hl := j.NodesAlloc
		if hl == j.Nodes && jobs[j.JobID] != nil && jobs[j.JobID].Nodes != "" {
			hl = jobs[j.JobID].Nodes // 22.05: the resume file names only this call's nodes
		}
		all, err := hostlist.Expand(hl)
		if err != nil || len(all) < 2 {
			continue
		}
		pos := map[string]int{}
		for i, n := range all {
			pos[n] = i
			if !inCall[n] && jobOf[n] == 0 {
				if _, ours := r.Cfg.ClassOfNode(n); ours {
					more = append(more, n)
					moreJob[n] = j.JobID
				}
			}
		}
		alloc[j.JobID] = pos
	}
	if len(more) == 0 {
		return nodes, alloc
	}
	ns, err := r.Slurm.Nodes(ctx, more...)
	if err != nil {
		log.Warn("reading the states of the rest of a job's nodes failed; launching only the nodes Slurm resumes now", "nodes", strings.Join(more, ","), "err", err)
		return nodes, alloc
	}
	waiting := map[string]bool{}
	for _, n := range ns {
		if (n.HasFlag("POWERED_DOWN") || n.HasFlag("POWERING_UP")) && !n.HasFlag("POWER_DOWN") && !n.HasFlag("POWERING_DOWN") {
			waiting[n.Name] = true
		}
	}
	added := map[uint32][]string{}
	for _, n := range more {
		if waiting[n] {
			nodes = append(nodes, n)
			jobOf[n] = moreJob[n]
			added[moreJob[n]] = append(added[moreJob[n]], n)
		}
	}
	for id, ns := range added {
		log.Info("partial resume: launching the job's whole allocation at once", "job", id, "nodes_not_yet_resumed", strings.Join(ns, ","))
	}
	return nodes, alloc
}

// jobRequest describes a group's job to the sizer.
func jobRequest(g group) sizerapi.JobRequest {
	jr := sizerapi.JobRequest{GPUModel: g.class.GPUModel, GPUsPerNode: g.class.GPUsPerNode, Nodes: len(g.nodes)}
	if g.jobID != 0 {
		jr.JobID = fmt.Sprint(g.jobID)
	}
	if j := g.job; j != nil {
		jr.JobName, jr.User, jr.Account, jr.Partition = j.Name, j.User, j.Account, j.Partition
		jr.Comment, jr.NoRequeue, jr.UserConstraint = jobmeta.Combine(j.Comment, j.Extra), !j.Requeue, j.Features
		if n := j.GPUsPerNode(); n > 0 {
			jr.GPUsPerNode = int(n)
		}
		if j.NodeCount > 0 {
			jr.CPUsPerNode = int(j.CPUs / j.NodeCount)
		}
		jr.MemoryMiBPerNode = int(j.MemoryPerNodeMB)
		jr.TimeLimitSeconds = j.TimeLimit.Seconds()
	}
	return jr
}
