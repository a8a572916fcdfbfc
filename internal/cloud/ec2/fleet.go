package ec2

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
)

// fleet makes one CreateFleet call for nodes over offerings of one capacity
// type (phase is their phaseKey). It returns the instances (all of nodes, or none), the per-offering
// errors, or a whole-call error.
func (p *Provider) fleet(ctx context.Context, lt string, req cloud.LaunchRequest, nodes []cloud.NodeSpec, offs []cloud.Offering, phase string) ([]cloud.Instance, []*cloud.Error, error) {
	capType := offs[0].Capacity
	names := make([]string, len(nodes))
	for i, nd := range nodes {
		names[i] = nd.Node
	}
	op := "launching " + strings.Join(names, ",")
	configs, byKey, err := p.launchConfigs(ctx, lt, req, nodes, offs)
	if err != nil {
		return nil, nil, err
	}
	in := p.fleetInput(req, nodes, capType, configs, phase)
	if req.Intent != nil {
		if err := req.Intent(aws.ToString(in.ClientToken), nodes, offs); err != nil {
			return nil, nil, &cloud.Error{Kind: cloud.KindInvalid, Code: "LaunchIntentNotJournaled", Op: op, Message: "not launching without a journaled launch intent: " + err.Error()}
		}
	}
	out, err := p.api.CreateFleet(ctx, in)
	if err != nil {
		return p.fleetFailed(ctx, err, op, req, nodes, offs, capType, names)
	}
	ferrs := p.overrideErrors(out.Errors, byKey, op)
	var ids []string
	for _, fi := range out.Instances {
		ids = append(ids, fi.InstanceIds...)
	}
	if len(ids) == 0 {
		return nil, ferrs, nil
	}
	if len(ids) != len(nodes) {
		// Never leave a partial all-or-nothing job: CreateFleet's own
		// answer says how many instances it made.
		p.log.Warn("partial fleet terminated (all-or-nothing)", "nodes", names, "launched", len(ids), "wanted", len(nodes), "instances", ids)
		if _, terr := p.TerminateIDs(context.WithoutCancel(ctx), ids); terr != nil {
			p.log.Error("terminating a partial fleet", "ids", ids, "err", terr)
		}
		ferrs = append(ferrs, &cloud.Error{Kind: cloud.KindInsufficientCapacity, Code: "InsufficientInstanceCapacity", Op: op,
			Message: fmt.Sprintf("the fleet launched %d of %d instances; terminated them (all-or-nothing)", len(ids), len(nodes)), Offerings: offs})
		return nil, ferrs, nil
	}
	insts, described := p.launchedInstances(ctx, ids, out.Instances, nodes, capType, byKey, names)
	if len(nodes) > 1 {
		// A fleet's instances are alike (one type, one zone): give each its
		// node by CreateTags, in instance-id order. The node learns the name
		// from this tag; launch indexes, which EC2 does not promise to be
		// 0..n-1, play no part.
		if err := p.nameFleet(ctx, insts, names); err != nil {
			if _, terr := p.TerminateIDs(context.WithoutCancel(ctx), ids); terr != nil {
				p.log.Error("terminating a fleet whose instances could not be named", "ids", ids, "err", terr)
			}
			return nil, nil, wrapErr(err, op+": tagging each instance with its node", offs)
		}
	}
	if described && !p.identitiesOK(insts, names) {
		if _, terr := p.TerminateIDs(context.WithoutCancel(ctx), ids); terr != nil {
			p.log.Error("terminating a fleet with ambiguous identities", "ids", ids, "err", terr)
		}
		return nil, nil, &cloud.Error{Kind: cloud.KindUnknown, Code: "AmbiguousNodeTags", Op: op,
			Message: "the fleet's instances do not carry one node tag each; terminated the fleet"}
	}
	p.log.Info("launched", "nodes", names, "instances", ids, "capacity", capType, "described", described)
	return insts, ferrs, nil
}

// fleetInput is the CreateFleet call for nodes: an instant fleet of one
// capacity type, all of nodes or none when there are several.
func (p *Provider) fleetInput(req cloud.LaunchRequest, nodes []cloud.NodeSpec, capType capacity.Type, configs []types.FleetLaunchTemplateConfigRequest, phase string) *ec2.CreateFleetInput {
	n := int32(len(nodes))
	tags := p.tags(nodes, capType)
	in := &ec2.CreateFleetInput{
		Type:                  types.FleetTypeInstant,
		ClientToken:           aws.String(p.clientToken(req, nodes, phase)),
		LaunchTemplateConfigs: configs,
		TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       aws.Int32(n),
			DefaultTargetCapacityType: types.DefaultTargetCapacityType(capType),
		},
		TagSpecifications: []types.TagSpecification{
			{ResourceType: types.ResourceTypeInstance, Tags: tags},
			{ResourceType: types.ResourceTypeFleet, Tags: []types.Tag{{Key: aws.String(TagCluster), Value: aws.String(p.opts.Cluster)}}},
		},
	}
	var minCap *int32
	var single *bool
	if n > 1 {
		minCap, single = aws.Int32(n), aws.Bool(true)
	}
	if capType == capacity.Spot {
		in.SpotOptions = &types.SpotOptionsRequest{
			AllocationStrategy:     types.SpotAllocationStrategy(spotStrategy(req)),
			MinTargetCapacity:      minCap,
			SingleAvailabilityZone: single,
			SingleInstanceType:     single,
		}
	} else {
		in.OnDemandOptions = &types.OnDemandOptionsRequest{
			AllocationStrategy:     types.FleetOnDemandAllocationStrategyPrioritized,
			MinTargetCapacity:      minCap,
			SingleAvailabilityZone: single,
			SingleInstanceType:     single,
		}
	}
	return in
}

// fleetFailed handles a CreateFleet call that failed as a whole: the
// instances of a concurrent resume with the same token, or the error.
func (p *Provider) fleetFailed(ctx context.Context, err error, op string, req cloud.LaunchRequest, nodes []cloud.NodeSpec, offs []cloud.Offering, capType capacity.Type, names []string) ([]cloud.Instance, []*cloud.Error, error) {
	werr := wrapErr(err, op, offs)
	if e, ok := cloud.AsError(werr); ok && e.Code == "IdempotentParameterMismatch" {
		// another resume of the same nodes and attempt (Slurm and an
		// admin, or two overlapping calls) launched with this token and
		// slightly different parameters (user data carries its issue
		// time): its instances are these nodes' instances
		live, lerr := p.liveFor(ctx, cloud.LaunchRequest{Cluster: req.Cluster, Nodes: nodes})
		if lerr == nil && len(live) == len(nodes) {
			got := make([]cloud.Instance, 0, len(nodes))
			for _, nd := range nodes {
				got = append(got, live[nd.Node])
			}
			p.log.Info("launch already made by a concurrent resume; using its instances", "nodes", names)
			return got, nil, nil
		}
	}
	// A call that failed as a whole may still have launched: EC2
	// answers 5xx (or the answer is lost) after launching part or all
	// of the fleet. Whatever carries exactly this launch's tags is
	// this launch's (the nodes' live instances were reused above,
	// under the nodes' locks): never leave it running unreported.
	p.abandon(context.WithoutCancel(ctx), nodes, capType, names)
	return nil, nil, werr
}

// overrideErrors are CreateFleet's per-override errors (with a nil Go
// error); an unavailable pool is remembered.
func (p *Provider) overrideErrors(errs []types.CreateFleetError, byKey map[string]cloud.Offering, op string) []*cloud.Error {
	var ferrs []*cloud.Error
	for _, fe := range errs {
		o, ok := offeringOf(fe.LaunchTemplateAndOverrides, byKey)
		code := aws.ToString(fe.ErrorCode)
		e := &cloud.Error{Code: code, Kind: Classify(code), Message: aws.ToString(fe.ErrorMessage), Op: op}
		if ok {
			e.Offerings = []cloud.Offering{o}
			if cachesPool(code) {
				if err := p.cache.Mark(code, o); err != nil {
					p.log.Warn("recording an unavailable offering", "offering", o.Key(), "err", err)
				}
			}
		}
		ferrs = append(ferrs, e)
	}
	return ferrs
}

// launchedInstances describes the launched instances, or takes them from
// CreateFleet's answer; described says which.
func (p *Provider) launchedInstances(ctx context.Context, ids []string, answer []types.CreateFleetInstance, nodes []cloud.NodeSpec, capType capacity.Type, byKey map[string]cloud.Offering, names []string) ([]cloud.Instance, bool) {
	// The launch succeeded: from here on nothing may turn it into a
	// failure but a node name that cannot be given or a wrong identity.
	// The describe that follows only adds what CreateFleet does not say
	// (private IP); when it is throttled past its budget, the instances
	// are taken from CreateFleet's answer and the reconciler checks them
	// later.
	insts, derr := p.describeLaunched(ctx, ids)
	described := derr == nil && len(insts) == len(ids)
	if described {
		// EC2 is eventually consistent: a new instance may be listed before
		// its tags (aws-parallelcluster #7265). One listed with no tag at
		// all has not got them yet, not wrong ones: CreateFleet's answer
		// stands for it, as for one not listed yet.
		var tagged []cloud.Instance
		for _, in := range insts {
			if len(in.Tags) > 0 {
				tagged = append(tagged, in)
			}
		}
		if len(tagged) < len(insts) {
			p.log.Warn("launched instances listed without their tags yet (EC2 eventual consistency); using CreateFleet's answer", "nodes", names,
				"instances", ids, "tagged", len(tagged))
			insts, described = tagged, false
		}
	}
	if !described {
		p.log.Warn("launched, but describing the new instances failed; using CreateFleet's answer", "nodes", names,
			"instances", ids, "described", len(insts), "err", derr)
		insts = p.fromFleetAnswer(answer, insts, nodes, capType, byKey)
	}
	return insts, described
}

// abandon terminates the pending or running instances that carry every
// launch tag of this launch (cluster, capacity, node names, job, owner):
// what a CreateFleet that failed as a whole launched anyway. EC2's describe
// is eventually consistent, so an instance not yet visible is left to the
// reconciler (an orphan after its grace).
func (p *Provider) abandon(ctx context.Context, nodes []cloud.NodeSpec, capType capacity.Type, names []string) {
	filters := []types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}}}
	for _, t := range p.tags(nodes, capType) {
		filters = append(filters, types.Filter{Name: aws.String("tag:" + aws.ToString(t.Key)), Values: []string{aws.ToString(t.Value)}})
	}
	insts, err := p.describe(ctx, filters)
	if err != nil {
		p.log.Error("looking for instances a failed launch made anyway", "nodes", names, "err", err)
		return
	}
	if len(insts) == 0 {
		return
	}
	ids := make([]string, len(insts))
	for i, in := range insts {
		ids[i] = in.ID
	}
	done, err := p.TerminateIDs(ctx, ids)
	if err != nil {
		p.log.Error("terminating what a failed launch made anyway", "nodes", names, "ids", ids, "err", err)
		return
	}
	p.log.Warn("the launch failed as a whole but had launched instances; terminated them", "nodes", names, "ids", done)
}

// fromFleetAnswer builds the instances of a successful CreateFleet from its
// own answer, for those the describe did not return (described): id, type,
// zone and capacity from the answer, the tags burst launched them with,
// state pending. A single node's instance is that node; in a multi-node
// fleet EC2 names no launch index in the answer, so the nodes are matched
// to the ids in the answer's order. Either way the instance is marked
// Unconfirmed: a multi-node fleet's instances get their node tags by
// CreateTags next (nameFleet), each instance learns its node from its own
// tag, and the reconciler compares EC2 with Slurm later.
func (p *Provider) fromFleetAnswer(answer []types.CreateFleetInstance, described []cloud.Instance, nodes []cloud.NodeSpec, capType capacity.Type, byKey map[string]cloud.Offering) []cloud.Instance {
	tags := map[string]string{}
	for _, t := range p.tags(nodes, capType) {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	have := map[string]cloud.Instance{}
	taken := map[string]bool{}
	for _, in := range described {
		have[in.ID] = in
		taken[in.Node] = true
	}
	var free []cloud.NodeSpec
	for _, n := range nodes {
		if !taken[n.Node] {
			free = append(free, n)
		}
	}
	now := p.opts.Now()
	var out []cloud.Instance
	for _, fi := range answer {
		typ, zone := string(fi.InstanceType), ""
		if lto := fi.LaunchTemplateAndOverrides; lto != nil && lto.Overrides != nil {
			if typ == "" {
				typ = string(lto.Overrides.InstanceType)
			}
			zone = aws.ToString(lto.Overrides.AvailabilityZone)
			if o, ok := offeringOf(lto, byKey); ok && zone == "" {
				zone = o.Zone
			}
		}
		c := capType
		switch fi.Lifecycle {
		case types.InstanceLifecycleSpot:
			c = capacity.Spot
		case types.InstanceLifecycleOnDemand:
			c = capacity.OnDemand
		}
		for _, id := range fi.InstanceIds {
			if in, ok := have[id]; ok {
				out = append(out, in)
				continue
			}
			in := cloud.Instance{ID: id, InstanceType: typ, Zone: zone, Capacity: c, State: "pending", LaunchTime: now, Tags: tags}
			in.Unconfirmed = true
			if len(free) > 0 {
				in.Node, free = free[0].Node, free[1:]
			}
			if nodes[0].JobID != 0 {
				in.JobID = nodes[0].JobID
			}
			out = append(out, in)
		}
	}
	return out
}

func offeringOf(lto *types.LaunchTemplateAndOverridesResponse, byKey map[string]cloud.Offering) (cloud.Offering, bool) {
	if lto == nil || lto.Overrides == nil {
		return cloud.Offering{}, false
	}
	o, ok := byKey[string(lto.Overrides.InstanceType)+"/"+aws.ToString(lto.Overrides.SubnetId)]
	return o, ok
}

// nameFleet tags each instance of a multi-node fleet with one node name
// and records it in insts.
func (p *Provider) nameFleet(ctx context.Context, insts []cloud.Instance, names []string) error {
	sort.Slice(insts, func(i, j int) bool { return insts[i].ID < insts[j].ID })
	for i := range insts {
		in := &insts[i]
		if _, err := p.api.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{in.ID},
			Tags: []types.Tag{{Key: aws.String(TagNode), Value: aws.String(names[i])}}}); err != nil {
			return err
		}
		if in.Tags == nil {
			in.Tags = map[string]string{}
		}
		in.Tags[TagNode], in.Node = names[i], names[i]
	}
	return nil
}
