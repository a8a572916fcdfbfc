// Package cloudfake is a stateful in-memory cloud.Provider for unit tests of
// the code above the cloud seam (lifecycle, reconciler). It keeps instances,
// gives each pool (instance type x zone x capacity) a capacity, tries a
// request's offerings in rank order, launches an all-or-nothing request in
// one pool or not at all, reuses a node's live instance instead of starting
// a second, and returns injected errors. It models what callers rely on from
// a provider, not EC2: the EC2 provider itself (internal/cloud/ec2) is
// tested against the EC2 emulator.
package cloudfake

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/cloud"
)

// Provider is the fake.
type Provider struct {
	mu        sync.Mutex
	cluster   string
	capacity  map[string]int
	instances []cloud.Instance
	launches  []cloud.LaunchRequest
	gone      []string // terminated through the fake
	next      int

	// LaunchErr fails every Launch; ListErr, TerminateErr fail List and
	// Terminate/TerminateIDs.
	LaunchErr, ListErr, TerminateErr error
	// Now stamps launches (default time.Now).
	Now func() time.Time
}

var _ cloud.Provider = (*Provider)(nil)

// New returns an empty fake for cluster; every pool has unlimited capacity
// until SetCapacity says otherwise.
func New(cluster string) *Provider {
	return &Provider{cluster: cluster, capacity: map[string]int{}}
}

// SetCapacity sets how many more instances the pool of o (its Key) can
// start; 0 makes it answer InsufficientInstanceCapacity.
func (p *Provider) SetCapacity(o cloud.Offering, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.capacity[o.Key()] = n
}

// Add puts instances in the cloud as they are (IDs kept).
func (p *Provider) Add(insts ...cloud.Instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.instances = append(p.instances, insts...)
}

// Instances is every instance the fake knows, terminated ones included.
func (p *Provider) Instances() []cloud.Instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.instances)
}

// Live is the pending and running instances.
func (p *Provider) Live() []cloud.Instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []cloud.Instance
	for _, in := range p.instances {
		if in.Live() {
			out = append(out, in)
		}
	}
	return out
}

// Launches are the launch requests received, in order.
func (p *Provider) Launches() []cloud.LaunchRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.launches)
}

// Terminated lists the ids of the instances terminated through the fake.
func (p *Provider) Terminated() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.gone)
}

func (p *Provider) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// Launch implements cloud.Provider.
func (p *Provider) Launch(_ context.Context, req cloud.LaunchRequest) (cloud.LaunchResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.launches = append(p.launches, req)
	res := cloud.LaunchResult{Failed: map[string]error{}}
	if req.Cluster != "" && req.Cluster != p.cluster {
		return res, &cloud.Error{Kind: cloud.KindInvalid, Op: "checking launch request", Message: fmt.Sprintf("request is for cluster %q, the fake manages %q", req.Cluster, p.cluster)}
	}
	live := map[string]cloud.Instance{}
	for _, n := range req.Nodes {
		if in, ok := p.liveFor(n.Node); ok {
			live[n.Node] = in
		}
	}
	todo := res.Reuse(req.Nodes, live)
	if len(todo) == 0 {
		return res, nil
	}
	offs := req.Candidates()
	if req.AllOrNothing && len(res.Instances) > 0 {
		zone := res.Instances[0].Zone
		offs = slices.DeleteFunc(offs, func(o cloud.Offering) bool { return o.Zone != zone })
	}
	if p.LaunchErr != nil {
		return res, failAll(&res, todo, p.LaunchErr)
	}
	if req.AllOrNothing || len(todo) == 1 {
		ins, err := p.group(todo, offs, &res)
		res.Instances = append(res.Instances, ins...)
		if err != nil {
			return res, failAll(&res, todo, err)
		}
		return res, nil
	}
	var last error
	launched := 0
	for _, n := range todo {
		ins, err := p.group([]cloud.NodeSpec{n}, offs, &res)
		res.Instances = append(res.Instances, ins...)
		launched += len(ins)
		if err != nil {
			res.Failed[n.Node] = err
			last = err
		}
	}
	if launched == 0 {
		return res, last
	}
	return res, nil
}

func failAll(res *cloud.LaunchResult, nodes []cloud.NodeSpec, err error) error {
	for _, n := range nodes {
		res.Failed[n.Node] = err
	}
	return err
}

// group launches nodes together in the first offering with room for all.
func (p *Provider) group(nodes []cloud.NodeSpec, offs []cloud.Offering, res *cloud.LaunchResult) ([]cloud.Instance, error) {
	var dry []cloud.Offering
	for _, o := range offs {
		if !slices.ContainsFunc(res.Tried, func(x cloud.Offering) bool { return x.Key() == o.Key() }) {
			res.Tried = append(res.Tried, o)
		}
		if left, limited := p.capacity[o.Key()]; limited && left < len(nodes) {
			dry = append(dry, o)
			continue
		}
		if _, limited := p.capacity[o.Key()]; limited {
			p.capacity[o.Key()] -= len(nodes)
		}
		var out []cloud.Instance
		for _, n := range nodes {
			p.next++
			in := cloud.Instance{ID: fmt.Sprintf("i-fake%05d", p.next), Node: n.Node, InstanceType: o.InstanceType, Zone: o.Zone,
				PrivateIP: fmt.Sprintf("10.0.%d.%d", p.next/250, p.next%250+1), State: "running", Capacity: o.Capacity,
				LaunchTime: p.now(), JobID: n.JobID,
				Tags: map[string]string{"burst:cluster": p.cluster, "burst:node": n.Node, "burst:account": n.Account, "burst:class": n.Class}}
			p.instances = append(p.instances, in)
			out = append(out, in)
		}
		return out, nil
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Node
	}
	return nil, &cloud.Error{Kind: cloud.KindInsufficientCapacity, Code: "InsufficientInstanceCapacity", Op: "launching " + strings.Join(names, ","),
		Message: "there is not enough capacity for the request", Offerings: dry}
}

func (p *Provider) liveFor(node string) (cloud.Instance, bool) {
	for _, in := range p.instances {
		if in.Node == node && in.Live() {
			return in, true
		}
	}
	return cloud.Instance{}, false
}

// Terminate implements cloud.Provider.
func (p *Provider) Terminate(_ context.Context, nodes []string) ([]cloud.Instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.TerminateErr != nil {
		return nil, p.TerminateErr
	}
	var out []cloud.Instance
	for i := range p.instances {
		if slices.Contains(nodes, p.instances[i].Node) && p.instances[i].Live() {
			p.terminate(i)
			out = append(out, p.instances[i])
		}
	}
	return out, nil
}

// TerminateIDs implements cloud.Provider; unknown ids are ignored.
func (p *Provider) TerminateIDs(_ context.Context, ids []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.TerminateErr != nil {
		return p.TerminateErr
	}
	for i := range p.instances {
		if slices.Contains(ids, p.instances[i].ID) && p.instances[i].State != "terminated" {
			p.terminate(i)
		}
	}
	return nil
}

func (p *Provider) terminate(i int) {
	p.instances[i].State = "shutting-down"
	p.gone = append(p.gone, p.instances[i].ID)
}

// List implements cloud.Provider: every instance that is not terminated.
func (p *Provider) List(context.Context) ([]cloud.Instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ListErr != nil {
		return nil, p.ListErr
	}
	var out []cloud.Instance
	for _, in := range p.instances {
		if in.State != "terminated" {
			out = append(out, in)
		}
	}
	return out, nil
}
