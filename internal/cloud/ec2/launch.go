package ec2

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/statefile"
)

// Launch implements cloud.Provider.
func (p *Provider) Launch(ctx context.Context, req cloud.LaunchRequest) (cloud.LaunchResult, error) {
	res := cloud.LaunchResult{Failed: map[string]error{}}
	if err := p.check(req); err != nil {
		return res, err
	}
	names := make([]string, len(req.Nodes))
	for i, n := range req.Nodes {
		names[i] = n.Node
	}
	unlock, err := p.lockNodes(names)
	if err != nil {
		return res, err
	}
	defer unlock()
	existing, err := p.liveFor(ctx, req)
	if err != nil {
		return res, err
	}
	todo := res.Reuse(req.Nodes, existing)
	if len(todo) == 0 {
		return res, nil
	}
	lt, err := p.launchTemplate(ctx)
	if err != nil {
		return res, err
	}
	offs := p.candidates(req)
	if req.AllOrNothing && len(res.Instances) > 0 {
		// Part of the job already runs (a node was lost): the rest must join it.
		zone := res.Instances[0].Zone
		offs = filterOfferings(offs, func(o cloud.Offering) bool { return o.Zone == zone })
	}
	if len(offs) == 0 {
		err := &cloud.Error{Kind: cloud.KindInvalid, Op: "launching " + strings.Join(names, ","),
			Message: "no offering has a subnet configured for its zone; add the zones to the provider's subnets", Offerings: req.Offerings}
		return res, p.failAll(&res, todo, err)
	}
	if req.AllOrNothing && len(todo) > 1 || len(todo) == 1 {
		ins, tried, err := p.launchGroup(ctx, lt, req, todo, offs)
		res.Tried = tried
		res.Instances = append(res.Instances, ins...)
		if err != nil {
			return res, p.failAll(&res, todo, err)
		}
		return res, nil
	}
	// Independent nodes: one fleet each, a few at a time.
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, p.opts.Concurrency)
	var lastErr error
	for _, n := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ins, tried, err := p.launchGroup(ctx, lt, req, []cloud.NodeSpec{n}, offs)
			mu.Lock()
			defer mu.Unlock()
			if len(tried) > len(res.Tried) {
				res.Tried = tried
			}
			res.Instances = append(res.Instances, ins...)
			if err != nil {
				res.Failed[n.Node] = err
				lastErr = err
			}
		}()
	}
	wg.Wait()
	if len(res.Instances) == 0 {
		return res, lastErr
	}
	return res, nil
}

// failAll records err for every node and returns it: the request failed.
func (p *Provider) failAll(res *cloud.LaunchResult, nodes []cloud.NodeSpec, err error) error {
	for _, n := range nodes {
		res.Failed[n.Node] = err
	}
	return err
}

func (p *Provider) check(req cloud.LaunchRequest) error {
	var probs []string
	if req.Cluster != "" && req.Cluster != p.opts.Cluster {
		probs = append(probs, fmt.Sprintf("request is for cluster %q but the provider manages %q", req.Cluster, p.opts.Cluster))
	}
	if len(req.Nodes) == 0 {
		probs = append(probs, "no nodes")
	}
	if len(req.Offerings) == 0 {
		probs = append(probs, "no offerings")
	}
	if req.SpotAllocationStrategy != "" && !slices.Contains(capacity.SpotStrategies, req.SpotAllocationStrategy) {
		probs = append(probs, fmt.Sprintf("spot allocation strategy %q is not one of %s", req.SpotAllocationStrategy, strings.Join(capacity.SpotStrategies, ", ")))
	}
	seen := map[string]bool{}
	for _, n := range req.Nodes {
		if n.Node == "" || strings.ContainsAny(n.Node, ", ") {
			probs = append(probs, fmt.Sprintf("bad node name %q", n.Node))
		}
		if seen[n.Node] {
			probs = append(probs, fmt.Sprintf("node %s listed twice", n.Node))
		}
		seen[n.Node] = true
	}
	for _, o := range req.Offerings {
		if !o.Capacity.Launchable() || o.InstanceType == "" || o.Zone == "" {
			probs = append(probs, fmt.Sprintf("bad offering %+v (want instance type, zone and capacity spot, on-demand or reserved)", o))
		}
		if (o.Capacity == capacity.Reserved) != (o.Reservation != "") {
			probs = append(probs, fmt.Sprintf("offering %s: a reserved offering names its capacity reservation, and only a reserved one does", o.Key()))
		}
	}
	if len(probs) > 0 {
		return &cloud.Error{Kind: cloud.KindInvalid, Op: "checking launch request", Message: strings.Join(probs, "; ")}
	}
	return nil
}

// candidates orders the offerings: the ranked ones (spot phase, then
// on-demand phase keep their rank order), the on-demand fallback copies,
// subnets filled in, offerings without a subnet dropped.
func (p *Provider) candidates(req cloud.LaunchRequest) []cloud.Offering {
	var out []cloud.Offering
	for _, o := range req.Candidates() {
		if o.SubnetID == "" {
			o.SubnetID = p.opts.Subnets[o.Zone]
		}
		if o.SubnetID == "" {
			p.log.Warn("skipping offering in a zone without a configured subnet", "offering", o.Key())
			continue
		}
		out = append(out, o)
	}
	return out
}

func filterOfferings(offs []cloud.Offering, keep func(cloud.Offering) bool) []cloud.Offering {
	var out []cloud.Offering
	for _, o := range offs {
		if keep(o) {
			out = append(out, o)
		}
	}
	return out
}

// launchGroup launches nodes as one fleet per capacity type phase until one
// succeeds. len(nodes) > 1 means all-or-nothing.
func (p *Provider) launchGroup(ctx context.Context, lt string, req cloud.LaunchRequest, nodes []cloud.NodeSpec, offs []cloud.Offering) ([]cloud.Instance, []cloud.Offering, error) {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Node
	}
	op := "launching " + strings.Join(names, ",")
	unavailable, err := p.cache.Snapshot()
	if err != nil {
		p.log.Warn("ignoring the unavailable-offerings cache", "err", err)
		unavailable = nil
	}
	var skipped []cloud.Offering
	var phases [][]cloud.Offering
	var keys []string
	phaseOf := map[string]int{}
	strategy := spotStrategy(req)
	for _, o := range offs {
		if _, bad := unavailable[o.Key()]; bad {
			skipped = append(skipped, o)
			continue
		}
		k := phaseKey(strategy, o)
		i, ok := phaseOf[k]
		if !ok {
			i = len(phases)
			phaseOf[k] = i
			phases = append(phases, nil)
			keys = append(keys, k)
		}
		phases[i] = append(phases[i], o)
	}
	var tried []cloud.Offering
	var errs []*cloud.Error
	for i, phase := range phases {
		tried = append(tried, phase...)
		var ins []cloud.Instance
		var ferrs []*cloud.Error
		if phase[0].Capacity == capacity.Reserved {
			ins, ferrs, err = p.reserved(ctx, lt, req, nodes, phase[0], keys[i])
		} else {
			ins, ferrs, err = p.fleet(ctx, lt, req, nodes, phase, keys[i])
		}
		if err != nil {
			return nil, tried, err // a whole-call error (throttled, unauthorized...): stop here
		}
		if len(ins) == len(nodes) {
			return ins, tried, nil
		}
		errs = append(errs, ferrs...)
	}
	return nil, tried, summarize(op, errs, skipped, tried)
}

// summarize turns per-offering failures into one error for the nodes.
func summarize(op string, errs []*cloud.Error, skipped, tried []cloud.Offering) error {
	if len(errs) == 0 {
		if len(skipped) > 0 {
			return &cloud.Error{Kind: cloud.KindInsufficientCapacity, Code: "InsufficientInstanceCapacity", Op: op,
				Message: "every offering failed for lack of capacity within the last few minutes (unavailable-offerings cache)", Offerings: skipped}
		}
		return &cloud.Error{Kind: cloud.KindInsufficientCapacity, Code: "InsufficientInstanceCapacity", Op: op,
			Message: "the fleet launched no instance and gave no reason", Offerings: tried}
	}
	// Report the most common code, with every offering that failed with it.
	count := map[string]int{}
	for _, e := range errs {
		count[e.Code]++
	}
	best := errs[0].Code
	for c, n := range count {
		if n > count[best] || n == count[best] && c < best {
			best = c
		}
	}
	out := &cloud.Error{Code: best, Kind: Classify(best), Op: op}
	for _, e := range errs {
		if e.Code == best {
			out.Offerings = append(out.Offerings, e.Offerings...)
			if out.Message == "" {
				out.Message = e.Message
			}
		}
	}
	return out
}

// clientToken is stable for (cluster, nodes, job, attempt, phase): the
// phase is the fleet's capacity type, with its instance type for a spot
// fleet of one type (phaseKey).
func (p *Provider) clientToken(req cloud.LaunchRequest, nodes []cloud.NodeSpec, phase string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%s", p.opts.Cluster, req.Attempt, phase)
	for _, n := range nodes {
		fmt.Fprintf(h, "\x00%s/%d", n.Node, n.JobID)
	}
	return "burst-" + hex.EncodeToString(h.Sum(nil))[:40]
}

// lockNodes serializes launches of the same nodes across burst-resume
// processes on this host (Slurm's ResumeProgram and an admin's, or two
// overlapping calls): each node's lock (StateDir/launch/<node>.lock) is
// held from the check of its live instances to the end of its launch, so
// a second resume sees the first one's instance instead of launching
// another. Locks are taken in name order (no deadlock between overlapping
// sets). Without a StateDir (tests) nothing is locked.
func (p *Provider) lockNodes(names []string) (func(), error) {
	if p.opts.StateDir == "" {
		return func() {}, nil
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	var unlocks []func()
	release := func() {
		for i := len(unlocks) - 1; i >= 0; i-- {
			unlocks[i]()
		}
	}
	for i, n := range sorted {
		if i > 0 && n == sorted[i-1] {
			continue
		}
		u, err := statefile.Lock(filepath.Join(p.opts.StateDir, "launch", n), 0o600)
		if err != nil {
			release()
			return nil, fmt.Errorf("locking the launch of node %s: %w", n, err)
		}
		unlocks = append(unlocks, u)
	}
	return release, nil
}
