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

	"github.com/burst-hpc/burst/internal/admit"
	"github.com/burst-hpc/burst/internal/breaker"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/internal/slurm"
)

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
	if r.Admit != nil && g.jobID != 0 && g.job == nil && r.Admit.Configured() {
		// budgets or limits exist and the job's account is unknown: never
		// launch blind; Slurm requeues the job and resumes it again
		reason := fmt.Sprintf("burst: cannot look up job %d (squeue: %v); not launching while budgets or limits apply", g.jobID, r.jobsErr)
		log.Warn("not launching a job burst cannot look up", "err", r.jobsErr)
		failed[truncReason(reason)] = g.nodes
		return nil, failed
	}
	offers, source, err := r.Ranker.Rank(ctx, sizerapi.RankRequest{Class: g.class.Name, Job: jr, Zones: g.class.Zones})
	if err != nil {
		reason := r.noOffering(ctx, log, g, jr, source, err)
		failed[truncReason(reason)] = g.nodes
		return nil, failed
	}
	if r.Admit != nil && g.job != nil {
		if reason, ok := r.admitJob(ctx, log, g, jr, offers); !ok {
			failed[truncReason(reason)] = g.nodes
			return nil, failed
		}
	}
	cofs := make([]cloud.Offering, 0, len(offers))
	for _, o := range offers {
		o.SubnetID = r.Cfg.Network.Subnets[o.Zone] // never from the wire (json:"-")
		cofs = append(cofs, o)
	}
	best := offers[0]
	need := 1
	if g.jobID != 0 && (len(g.nodes) > 1 || g.multi) {
		need = len(g.nodes)
	}
	if g.class.Reservations.Any() {
		rl, _ := r.Cloud.(ReservationLister)
		var limit time.Duration
		if g.job != nil {
			limit = g.job.TimeLimit
		}
		cofs = withReservations(ctx, log, rl, g.class, cofs, r.Cfg.Network.Subnets, need, limit, nowOr(r.Now)())
		if len(cofs) == 0 {
			reason := "burst: the class launches only into its capacity reservations and none is active for this job's types and zones"
			log.Warn("no capacity reservation to launch into", "reservations", g.class.Reservations.IDs)
			failed[truncReason(reason)] = g.nodes
			return nil, failed
		}
	}
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
	insts := r.launchAll(ctx, log, g, jr, specs, cofs, attempt, failed)
	if r.Admit != nil && g.job != nil {
		r.settleAdmission(log, g, insts, cofs)
	}
	return insts, failed
}

// noOffering is the reason a job the ranker found no offering for fails
// to launch; an over-budget job is held.
func (r *Resumer) noOffering(ctx context.Context, log *slog.Logger, g group, jr sizerapi.JobRequest, source string, err error) string {
	reason := "burst: " + err.Error()
	if errors.Is(err, sizing.ErrOverBudget) {
		reason = admit.HeldPrefix + "account " + jr.Account + " is over its monthly GPU budget"
		if g.jobID != 0 {
			if herr := r.Slurm.Hold(ctx, g.jobID, reason); herr != nil {
				log.Error("holding over-budget job", "err", herr)
			}
		}
	}
	log.Warn("no offering for job", "source", source, "reason", reason, "err", err)
	return reason
}

// admitJob asks admission control for the job's GPUs and spend, and holds
// the job when refused; not ok with the reason its nodes fail.
func (r *Resumer) admitJob(ctx context.Context, log *slog.Logger, g group, jr sizerapi.JobRequest, offers []cloud.Offering) (string, bool) {
	need := admit.Need{JobID: g.jobID, Account: jr.Account, User: jr.User, GPUs: jr.GPUsPerNode * len(g.nodes), Nodes: len(g.nodes),
		PriceUSD: maxPrice(offers) * float64(len(g.nodes)), TimeLimit: g.job.TimeLimit}
	d, err := r.Admit.Admit(ctx, need, r.jobs)
	if err != nil {
		d = admit.Decision{Reason: admit.HeldPrefix + "admission control failed: " + err.Error()}
	}
	if !d.Admitted {
		if herr := r.Slurm.Hold(ctx, g.jobID, truncComment(d.Reason)); herr != nil {
			log.Error("holding a job admission control refused", "err", herr)
		}
		log.Warn("job held by admission control", "account", jr.Account, "user", jr.User, "reason", d.Reason)
		return fmt.Sprintf("burst: job %d held: %s", g.jobID, strings.TrimPrefix(d.Reason, admit.HeldPrefix)), false
	}
	log.Info("job admitted", "account", jr.Account, "user", jr.User, "reserve_usd", d.ReserveUSD, "gpus", need.GPUs, "nodes", need.Nodes)
	return "", true
}

// launchAll launches the group's nodes and adds the nodes that failed to
// failed, by reason.
func (r *Resumer) launchAll(ctx context.Context, log *slog.Logger, g group, jr sizerapi.JobRequest, specs []cloud.NodeSpec, cofs []cloud.Offering, attempt int, failed map[string][]string) []cloud.Instance {
	// a multi-node job gets all of its nodes or none (and a lone node of
	// one is looked up among the job's fleets); single nodes each launch on
	// their own (the provider runs them concurrently)
	var reqs [][]cloud.NodeSpec
	allOrNothing := g.jobID != 0 && (len(specs) > 1 || g.multi)
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
	return insts
}

// settleAdmission drops the admission of a job none of whose nodes
// launched, or sets its reservation to the price launched.
func (r *Resumer) settleAdmission(log *slog.Logger, g group, insts []cloud.Instance, cofs []cloud.Offering) {
	if len(insts) == 0 {
		if err := r.Admit.Forget(g.jobID); err != nil {
			log.Warn("dropping the admission of a job whose launch failed", "err", err)
		}
	} else if price := launchedPrice(insts, cofs); price > 0 {
		if err := r.Admit.Adjust(g.jobID, price*float64(len(g.nodes))/float64(len(insts))); err != nil {
			log.Warn("adjusting the job's reservation to its launch", "err", err)
		}
	}
}

// maxPrice is the most expensive of the ranked offerings (what a launch
// may cost per hour and node), the catalog's on-demand price when none is
// priced.
func maxPrice(offers []cloud.Offering) float64 {
	p := 0.0
	for _, o := range offers {
		p = max(p, o.PriceUSD)
		if t, ok := catalog.Default().Lookup(o.InstanceType); ok && o.PriceUSD <= 0 {
			p = max(p, t.OnDemandUSD)
		}
	}
	return p
}

// launchedPrice is what the launched instances cost per hour together.
func launchedPrice(insts []cloud.Instance, offers []cloud.Offering) float64 {
	t := 0.0
	for _, in := range insts {
		for _, o := range offers {
			if o.InstanceType == in.InstanceType && o.Capacity == in.Capacity && (o.Zone == in.Zone || o.Zone == "") {
				t += o.PriceUSD
				break
			}
		}
	}
	return t
}

// truncComment keeps an AdminComment within what scontrol takes in one word.
func truncComment(s string) string {
	s = truncReason(strings.ReplaceAll(s, "\n", " "))
	return s
}

func (r *Resumer) launch(ctx context.Context, log *slog.Logger, g group, jr sizerapi.JobRequest, specs []cloud.NodeSpec, offers []cloud.Offering, aon bool, attempt int) ([]cloud.Instance, map[string][]string) {
	now := nowOr(r.Now)
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Node
	}
	failed := map[string][]string{}
	req := cloud.LaunchRequest{Cluster: r.Cfg.Cluster.Name, Nodes: specs, Offerings: offers, AllOrNothing: aon, Attempt: attempt,
		SpotAllocationStrategy: g.class.SpotAllocationStrategy}
	if r.Intents != nil {
		req.Intent = r.intentFor(jr, g, now)
	}
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
	reused := map[string]bool{}
	for _, n := range res.Reused {
		reused[n] = true
	}
	for _, in := range res.Instances {
		if reused[in.Node] {
			// recorded by the resume that launched it
			log.Info("instance already running", "node", in.Node, "instance_id", in.ID)
			continue
		}
		log.Info("instance", "node", in.Node, "instance_id", in.ID, "type", in.InstanceType, "zone", in.Zone,
			"capacity", in.Capacity, "ip", in.PrivateIP, "unconfirmed", in.Unconfirmed)
		if r.Recorder != nil {
			r.recordLaunch(ctx, log, in, jr, g, offers, attempt, now)
		}
	}
	launchFailures(failed, names, res, err)
	return res.Instances, failed
}

// intentFor records a launch's intent (its client token, nodes and
// offerings) before EC2 is asked.
func (r *Resumer) intentFor(jr sizerapi.JobRequest, g group, now func() time.Time) func(string, []cloud.NodeSpec, []cloud.Offering) error {
	return func(token string, nodes []cloud.NodeSpec, offs []cloud.Offering) error {
		in := sizerapi.LaunchIntent{ClientToken: token, JobID: jr.JobID, Account: jr.Account, User: jr.User, Class: g.class.Name, Time: now()}
		for _, n := range nodes {
			in.Nodes = append(in.Nodes, n.Node)
		}
		for _, o := range offs {
			in.Capacity = string(o.Capacity)
			in.Offerings = append(in.Offerings, sizerapi.IntentOffer{InstanceType: o.InstanceType, Zone: o.Zone, PriceUSD: o.PriceUSD})
		}
		return r.Intents(in)
	}
}

// recordLaunch records a launched instance, and the job it runs, for the
// sizer's ledger.
func (r *Resumer) recordLaunch(ctx context.Context, log *slog.Logger, in cloud.Instance, jr sizerapi.JobRequest, g group, offers []cloud.Offering, attempt int, now func() time.Time) {
	ev := sizerapi.InstanceEvent{InstanceID: in.ID, Node: in.Node, InstanceType: in.InstanceType, Zone: in.Zone,
		Capacity: string(in.Capacity), Reservation: in.Reservation, Account: jr.Account, User: jr.User, Time: in.LaunchTime}
	if jr.JobID != "" {
		// what the job asked for: the sizer sets it against what the
		// agents measure (requested vs used) and charges the spend to it
		ev.Job = &sizerapi.Job{JobID: jr.JobID, JobName: jr.JobName, User: jr.User, Account: jr.Account, Class: g.class.Name,
			GPUModel: g.class.GPUModel, GPUsPerNode: jr.GPUsPerNode, Nodes: jr.Nodes, Comment: jr.Comment}
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

// launchFailures adds to failed, by reason, the nodes the launch failed or
// did not launch.
func launchFailures(failed map[string][]string, names []string, res cloud.LaunchResult, err error) {
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
