package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/breaker"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
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
}

// group is the nodes of one job (or one manually resumed node) in one class.
type group struct {
	job   *slurm.Job // nil for a manual power-up or a job Slurm no longer knows
	jobID uint32
	class *config.Class
	nodes []string
}

// Outcome is what a resume did, for logs and tests.
type Outcome struct {
	Launched map[string]cloud.Instance // node -> instance
	Failed   map[string]string         // node -> reason given to Slurm
}

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
	if err := r.handBack(ctx, out.Failed); err != nil {
		log.Error("telling Slurm about failed nodes", "err", err)
		return out, err
	}
	if r.Cfg.Slurm.SetNodeAddr {
		r.setAddrs(ctx, out.Launched)
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
		js, err := r.Slurm.Jobs(ctx, ids...)
		if err != nil {
			// without the job's request burst still launches the class's
			// cheapest offering: a resume never waits on squeue
			log.Warn("looking up jobs failed; sizing from node classes only", "jobs", ids, "err", err)
		}
		for i := range js {
			jobs[js[i].ID] = &js[i]
		}
	}
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
		out = append(out, *byKey[k])
	}
	return out, bad, nil
}

// jobRequest describes a group's job to the sizer.
func jobRequest(g group) sizerapi.JobRequest {
	jr := sizerapi.JobRequest{GPUModel: g.class.GPUModel, GPUsPerNode: g.class.GPUsPerNode, Nodes: len(g.nodes)}
	if g.jobID != 0 {
		jr.JobID = fmt.Sprint(g.jobID)
	}
	if j := g.job; j != nil {
		jr.JobName, jr.User, jr.Account, jr.Partition = j.Name, j.User, j.Account, j.Partition
		jr.Comment, jr.NoRequeue, jr.UserConstraint = j.Comment, !j.Requeue, j.Features
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

func (r *Resumer) launchGroup(ctx context.Context, g group) ([]cloud.Instance, map[string][]string) {
	log := logOr(r.Log).With("job", g.jobID, "class", g.class.Name, "nodes", strings.Join(g.nodes, ","))
	failed := map[string][]string{}
	if r.Breaker != nil {
		if ok, until, reason := r.Breaker.Allow(g.class.Name); !ok {
			log.Warn("launches for the class are paused", "until", until, "reason", reason)
			failed[truncReason(reason)] = g.nodes
			return nil, failed
		}
	}
	jr := jobRequest(g)
	offers, source, err := r.Ranker.Rank(ctx, sizerapi.RankRequest{Class: g.class.Name, Job: jr, Zones: g.class.Zones})
	if err != nil {
		reason := "burst: " + err.Error()
		if errors.Is(err, sizing.ErrOverBudget) || strings.Contains(err.Error(), "over_budget") || strings.Contains(err.Error(), "over budget") {
			reason = "burst: account " + jr.Account + " is over its monthly GPU budget"
			if g.jobID != 0 {
				if herr := r.Slurm.Hold(ctx, g.jobID, reason); herr != nil {
					log.Error("holding over-budget job", "err", herr)
				}
			}
		}
		log.Warn("no offering for job", "source", source, "reason", reason, "err", err)
		failed[truncReason(reason)] = g.nodes
		return nil, failed
	}
	cofs := make([]cloud.Offering, 0, len(offers))
	for _, o := range offers {
		cofs = append(cofs, cloud.Offering{InstanceType: o.InstanceType, Zone: o.Zone, SubnetID: r.Cfg.Network.Subnets[o.Zone],
			Capacity: cloud.CapacityType(o.Capacity), PriceUSD: o.PriceUSD})
	}
	best := offers[0]
	log.Info("sized job", "source", source, "offerings", len(offers), "best", cofs[0].Key(), "price_usd_h", best.PriceUSD,
		"expected_usd_h", best.ExpectedUSD, "why", best.Reason, "account", jr.Account, "user", jr.User, "gpus_per_node", jr.GPUsPerNode)
	specs := make([]cloud.NodeSpec, len(g.nodes))
	for i, n := range g.nodes {
		specs[i] = cloud.NodeSpec{Node: n, JobID: g.jobID, Account: jr.Account, User: jr.User, Class: g.class.Name}
	}
	// the attempt makes a launch idempotent: a job's attempt changes when
	// Slurm requeues it; a manual power-up (no job) is a new attempt each
	// time (a repeat within the same second is caught by the provider's
	// check of the node's live instances)
	attempt := int(nowOr(r.Now)().Unix())
	if g.job != nil {
		attempt = int(g.job.RestartCount) + 1
	}
	// a multi-node job gets all of its nodes or none; single nodes each
	// launch on their own (the provider runs them concurrently)
	var reqs [][]cloud.NodeSpec
	allOrNothing := g.jobID != 0 && len(specs) > 1
	if allOrNothing {
		reqs = [][]cloud.NodeSpec{specs}
	} else {
		for _, s := range specs {
			reqs = append(reqs, []cloud.NodeSpec{s})
		}
	}
	var insts []cloud.Instance
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, rs := range reqs {
		wg.Add(1)
		go func(rs []cloud.NodeSpec) {
			defer wg.Done()
			got, f := r.launch(ctx, log, g, jr, rs, cofs, allOrNothing, attempt)
			mu.Lock()
			defer mu.Unlock()
			insts = append(insts, got...)
			for k, v := range f {
				failed[k] = append(failed[k], v...)
			}
		}(rs)
	}
	wg.Wait()
	return insts, failed
}

func (r *Resumer) launch(ctx context.Context, log *slog.Logger, g group, jr sizerapi.JobRequest, specs []cloud.NodeSpec, offers []cloud.Offering, aon bool, attempt int) ([]cloud.Instance, map[string][]string) {
	now := nowOr(r.Now)
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Node
	}
	failed := map[string][]string{}
	req := cloud.LaunchRequest{Cluster: r.Cfg.Cluster.Name, Nodes: specs, Offerings: offers, AllOrNothing: aon, Attempt: attempt}
	if aon {
		req.PlacementGroup = g.class.PlacementGroup
	}
	if r.UserData != nil {
		ud, err := r.UserData(specs, now())
		if err != nil {
			failed[truncReason("burst: rendering user data: "+err.Error())] = names
			return nil, failed
		}
		req.UserData = ud
	}
	t0 := now()
	res, err := r.Cloud.Launch(ctx, req)
	if r.Breaker != nil {
		if err == nil && len(res.Instances) > 0 {
			r.Breaker.Success(g.class.Name)
		} else if err != nil && breaker.Counts(err) {
			r.Breaker.Failure(g.class.Name, strings.TrimPrefix(cloud.Reason(err), "burst: "))
		}
	}
	log.Info("launch", "launch_nodes", strings.Join(names, ","), "all_or_nothing", aon, "attempt", attempt,
		"launched", len(res.Instances), "reused", len(res.Reused), "tried", len(res.Tried), "seconds", now().Sub(t0).Seconds(), "err", err)
	for _, in := range res.Instances {
		log.Info("instance", "node", in.Node, "instance_id", in.ID, "type", in.InstanceType, "zone", in.Zone,
			"capacity", in.Capacity, "ip", in.PrivateIP)
		if r.Recorder != nil {
			ev := sizerapi.InstanceEvent{InstanceID: in.ID, Node: in.Node, InstanceType: in.InstanceType, Zone: in.Zone,
				Capacity: string(in.Capacity), Account: jr.Account, Time: in.LaunchTime}
			if jr.JobID != "" {
				// what the job asked for: the sizer sets it against what the
				// agents measure (requested vs used) and charges the spend to it
				ev.Job = &sizerapi.Job{JobID: jr.JobID, JobName: jr.JobName, User: jr.User, Account: jr.Account, Class: g.class.Name,
					GPUModel: g.class.GPUModel, GPUsPerNode: jr.GPUsPerNode, Nodes: jr.Nodes}
				if g.job != nil {
					ev.Job.Attempt = attempt // Slurm's restart count + 1
				}
				if t, ok := catalog.Default().Lookup(in.InstanceType); ok {
					ev.Job.GPUMemoryMiB = t.GPUMemoryMiB
				}
			}
			if ev.Time.IsZero() {
				ev.Time = now()
			}
			for _, o := range offers {
				if o.InstanceType == in.InstanceType && o.Capacity == in.Capacity {
					ev.PriceUSD = o.PriceUSD
					break
				}
			}
			if rerr := r.Recorder.Launched(ctx, ev); rerr != nil {
				log.Warn("recording launch", "instance_id", in.ID, "err", rerr)
			}
		}
	}
	got := map[string]bool{}
	for _, in := range res.Instances {
		got[in.Node] = true
	}
	for n, ferr := range res.Failed {
		failed[truncReason(cloud.Reason(ferr))] = append(failed[truncReason(cloud.Reason(ferr))], n)
		got[n] = true
	}
	var rest []string
	for _, n := range names {
		if !got[n] {
			rest = append(rest, n)
		}
	}
	if len(rest) > 0 {
		reason := "burst: launch failed"
		if err != nil {
			reason = cloud.Reason(err)
		}
		failed[truncReason(reason)] = append(failed[truncReason(reason)], rest...)
	}
	return res.Instances, failed
}

// truncReason keeps a node reason short enough for scontrol and sinfo.
func truncReason(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// handBack powers failed nodes down at once with the reason, so Slurm
// requeues their jobs now instead of after ResumeTimeout.
func (r *Resumer) handBack(ctx context.Context, failed map[string]string) error {
	if len(failed) == 0 {
		return nil
	}
	byReason := map[string][]string{}
	for n, reason := range failed {
		byReason[reason] = append(byReason[reason], n)
	}
	var ups []slurm.NodeUpdate
	for reason, ns := range byReason {
		sort.Strings(ns)
		ups = append(ups, slurm.NodeUpdate{Names: ns, State: "POWER_DOWN_FORCE", Reason: reason})
		logOr(r.Log).Warn("handing nodes back", "nodes", strings.Join(ns, ","), "reason", reason)
	}
	return r.Slurm.UpdateNodes(ctx, ups...)
}

func (r *Resumer) setAddrs(ctx context.Context, launched map[string]cloud.Instance) {
	var ups []slurm.NodeUpdate
	for n, in := range launched {
		if in.PrivateIP != "" {
			ups = append(ups, slurm.NodeUpdate{Names: []string{n}, Addr: in.PrivateIP, Hostname: n})
		}
	}
	if len(ups) == 0 {
		return
	}
	if err := r.Slurm.UpdateNodes(ctx, ups...); err != nil {
		logOr(r.Log).Error("setting node addresses", "err", err)
	}
}
