package dash

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/breaker"
	"github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/version"
	"github.com/burst-hpc/burst/sizer/store"
)

// Fleet is what runs now: every class's nodes with their Slurm state and
// the live instance behind each, the breaker, the pools burst skips after
// capacity errors, and the last day's spot notices. An account scope sees
// only nodes that run its instances or its jobs (the breaker and the
// capacity state are the pool's, shown to all).
func (s *Source) Fleet(ctx context.Context, sc Scope) (sizerapi.FleetView, error) {
	now := s.o.Now()
	v := sizerapi.FleetView{At: now, Account: sc.Account, Classes: []sizerapi.FleetClass{}, Unavailable: []sizerapi.UnavailablePool{}, Interruptions: []sizerapi.FleetInterruption{},
		SizerVersion: version.Version, PeerVersions: []sizerapi.PeerVersion{}}
	if s.o.Peers != nil && sc.All() { // node names of every account: not for an account's view
		v.PeerVersions = s.o.Peers()
	}
	var err error
	if v.GPUHealth, err = s.gpuHealth(ctx, sc, now); err != nil {
		return v, err
	}
	live, err := s.o.Store.Instances(ctx, time.Time{}, now.Add(time.Hour), "", true)
	if err != nil {
		return v, err
	}
	seen, err := s.o.Store.NodesSeen(ctx)
	if err != nil {
		return v, err
	}
	byNode := newestByNode(live)
	sn := s.slurmState(ctx)
	slurmStatus(&v, sn)
	breakers, err := s.launchState(&v)
	if err != nil {
		return v, err
	}
	known, err := s.nodeJobs(ctx, live, sn)
	if err != nil {
		return v, err
	}
	for _, c := range s.o.Policy.Classes() {
		fc := sizerapi.FleetClass{Class: c.Name, GPUModel: c.GPUModel, GPUsPerNode: c.GPUsPerNode, MaxNodes: c.MaxNodes, Nodes: []sizerapi.FleetNode{}, States: []sizerapi.FleetStateCount{}}
		b := breakers[c.Name]
		fc.Breaker = sizerapi.BreakerView{State: string(b.State), Failures: b.Failures, TotalFails: b.TotalFailures, TotalTrips: b.TotalTrips, LastFailure: b.Reason}
		if fc.Breaker.State == "" {
			fc.Breaker.State = string(breaker.Closed)
		}
		if b.State == breaker.Open || b.State == breaker.HalfOpen {
			fc.Breaker.Until = b.Until
		}
		for i := 1; i <= max(c.MaxNodes, 0); i++ {
			n := fleetNode(nodeName(c.Name, i), byNode, sn, known, seen) // internal/config's rule: <class>-<n>, n = 1..max_nodes
			if !sc.All() && !(n.Account == sc.Account) {
				continue
			}
			if n.InstanceID != "" {
				fc.Instances++
				fc.HourlyUSD += n.PriceUSD
			}
			fc.Nodes = append(fc.Nodes, n)
		}
		summarize(&fc, now)
		v.Instances += fc.Instances
		v.HourlyUSD += fc.HourlyUSD
		fc.HourlyUSD = round4(fc.HourlyUSD)
		v.Classes = append(v.Classes, fc)
	}
	v.HourlyUSD = round4(v.HourlyUSD)
	if err := s.addWaits(ctx, sc, now, &v); err != nil {
		return v, err
	}
	ints, err := s.o.Store.InterruptionsOf(ctx, now.Add(-24*time.Hour), sc.Account)
	if err != nil {
		return v, err
	}
	for _, it := range ints {
		v.Interruptions = append(v.Interruptions, sizerapi.FleetInterruption{Time: it.Time, InstanceID: it.InstanceID, Node: it.Node,
			InstanceType: it.InstanceType, Zone: it.Zone, Action: it.Action, Account: it.Account, JobID: it.JobID})
	}
	return v, nil
}

// newestByNode is each node's live instance: of two (a duplicate the
// reconciler will reap), the newer.
func newestByNode(live []store.Instance) map[string]store.Instance {
	byNode := map[string]store.Instance{}
	for _, in := range live {
		if old, ok := byNode[in.Node]; !ok || in.Launched.After(old.Launched) {
			byNode[in.Node] = in
		}
	}
	return byNode
}

// slurmStatus puts whether Slurm answered, and since when it has not, in
// the view (nothing without a Slurm client).
func slurmStatus(v *sizerapi.FleetView, sn *slurmSnap) {
	if sn == nil {
		return
	}
	v.Slurm = sn.err == nil
	if sn.err != nil {
		v.SlurmError = sn.err.Error()
	}
	if !sn.downSince.IsZero() {
		t := sn.downSince
		v.SlurmDownSince = &t
	}
}

// launchState reads the launch breakers (by class) and puts the pools EC2
// last found without capacity in the view; neither without a state
// directory.
func (s *Source) launchState(v *sizerapi.FleetView) (map[string]breaker.Status, error) {
	breakers := map[string]breaker.Status{}
	if s.o.StateDir != "" {
		sts, err := breaker.New(breaker.Options{Dir: s.o.StateDir}).Snapshot()
		if err != nil {
			return nil, fmt.Errorf("reading the launch breaker: %w", err)
		}
		for _, st := range sts {
			breakers[st.Class] = st
		}
		pools, err := ec2.NewUnavailableCache(s.o.StateDir, 0, s.o.Now).Pools()
		if err != nil {
			return nil, err
		}
		for _, p := range pools {
			v.Unavailable = append(v.Unavailable, sizerapi.UnavailablePool{InstanceType: p.InstanceType, Zone: p.Zone, Capacity: p.Capacity, Code: p.Code, Until: p.Until})
		}
	}
	return breakers, nil
}

// nodeJobs is what the store knows of the jobs the nodes run (the
// instances' and Slurm's), for names and accounts.
func (s *Source) nodeJobs(ctx context.Context, live []store.Instance, sn *slurmSnap) (map[string]jobInfo, error) {
	var jobIDs []string
	for _, in := range live {
		if in.JobID != "" {
			jobIDs = append(jobIDs, in.JobID)
		}
	}
	if sn != nil {
		for _, j := range sn.onNode {
			jobIDs = append(jobIDs, strconv.FormatUint(uint64(j.ID), 10))
		}
	}
	slices.Sort(jobIDs)
	jobIDs = slices.Compact(jobIDs)
	known := map[string]jobInfo{}
	if len(jobIDs) > 0 {
		us, err := s.o.Store.JobUsages(ctx, store.JobQuery{JobIDs: jobIDs})
		if err != nil {
			return nil, err
		}
		for _, u := range us {
			known[u.JobID] = jobInfo{name: u.JobName, user: u.User, account: u.Account}
		}
	}
	return known, nil
}

// fleetNode is one node's row: its live instance, Slurm's view of it (the
// last known while Slurm is unreachable), the job it runs and its agent's
// last report.
func fleetNode(name string, byNode map[string]store.Instance, sn *slurmSnap, known map[string]jobInfo, seen map[string]store.NodeSeen) sizerapi.FleetNode {
	n := sizerapi.FleetNode{Node: name}
	if in, ok := byNode[name]; ok {
		n.InstanceID, n.Type, n.Zone, n.Capacity, n.UpSince, n.PriceUSD = in.InstanceID, in.InstanceType, in.Zone, in.Capacity, in.Launched, in.PriceUSD
		n.JobID, n.Account = in.JobID, in.Account
	}
	if sn != nil { // while Slurm is unreachable: its last known state
		if sl, ok := sn.nodes[name]; ok {
			n.SlurmState, n.SlurmReason = slurmState(sl.State, sl.Flags), sl.Reason
		}
		if j, ok := sn.onNode[name]; ok {
			n.JobID, n.JobName, n.User, n.Account = strconv.FormatUint(uint64(j.ID), 10), j.Name, j.User, j.Account
		}
	}
	if ji, ok := known[n.JobID]; ok && n.JobID != "" {
		if n.JobName == "" {
			n.JobName, n.User = ji.name, ji.user
		}
		if n.Account == "" {
			n.Account = ji.account
		}
	}
	if ns, ok := seen[name]; ok && n.InstanceID != "" && !ns.Last.Before(n.UpSince) {
		n.LastReport = ns.Last
	}
	return n
}

type jobInfo struct{ name, user, account string }

func nodeName(class string, i int) string { return class + "-" + strconv.Itoa(i) }

// slurmState writes a node's state as scontrol does (IDLE+POWERED_DOWN),
// without the CLOUD flag every burst node has.
func slurmState(state string, flags []string) string {
	parts := []string{state}
	fs := slices.Clone(flags)
	sort.Strings(fs)
	for _, f := range fs {
		if f != "CLOUD" {
			parts = append(parts, f)
		}
	}
	return strings.Join(parts, "+")
}

// expandNodes expands a Slurm hostlist; a malformed one gives its
// comma-separated parts.
func expandNodes(expr string) []string {
	ns, err := hostlist.Expand(expr)
	if err != nil {
		return strings.Split(expr, ",")
	}
	return ns
}
