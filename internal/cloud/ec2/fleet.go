package ec2

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/internal/cloud"
)

// fleet makes one CreateFleet call for nodes over offerings of one capacity
// type. It returns the instances (all of nodes, or none), the per-offering
// errors, or a whole-call error.
func (p *Provider) fleet(ctx context.Context, lt string, req cloud.LaunchRequest, nodes []cloud.NodeSpec, offs []cloud.Offering) ([]cloud.Instance, []*cloud.Error, error) {
	n := int32(len(nodes))
	capacity := offs[0].Capacity
	names := make([]string, len(nodes))
	for i, nd := range nodes {
		names[i] = nd.Node
	}
	op := "launching " + strings.Join(names, ",")
	overrides := make([]types.FleetLaunchTemplateOverridesRequest, len(offs))
	byKey := map[string]cloud.Offering{}
	for i, o := range offs {
		overrides[i] = types.FleetLaunchTemplateOverridesRequest{
			InstanceType: types.InstanceType(o.InstanceType),
			SubnetId:     aws.String(o.SubnetID),
			Priority:     aws.Float64(float64(i)),
		}
		if req.PlacementGroup != "" && len(nodes) > 1 {
			overrides[i].Placement = &types.Placement{GroupName: aws.String(req.PlacementGroup)}
		}
		byKey[o.InstanceType+"/"+o.SubnetID] = o
	}
	spec := &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(lt), Version: aws.String(p.opts.LaunchTemplateVersion)}
	if req.UserData != "" {
		spec.LaunchTemplateSpecificationUserData = aws.String(base64.StdEncoding.EncodeToString([]byte(req.UserData)))
	}
	tags := p.tags(nodes, capacity)
	in := &ec2.CreateFleetInput{
		Type:        types.FleetTypeInstant,
		ClientToken: aws.String(p.clientToken(req, nodes, capacity)),
		LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: spec,
			Overrides:                   overrides,
		}},
		TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       aws.Int32(n),
			DefaultTargetCapacityType: types.DefaultTargetCapacityType(capacity),
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
	if capacity == cloud.Spot {
		in.SpotOptions = &types.SpotOptionsRequest{
			AllocationStrategy:     types.SpotAllocationStrategyCapacityOptimizedPrioritized,
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
	out, err := p.api.CreateFleet(ctx, in)
	if err != nil {
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
		return nil, nil, werr
	}
	// Per-override errors, with a nil Go error.
	var ferrs []*cloud.Error
	for _, fe := range out.Errors {
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
	var ids []string
	for _, fi := range out.Instances {
		ids = append(ids, fi.InstanceIds...)
	}
	if len(ids) == 0 {
		return nil, ferrs, nil
	}
	insts, err := p.describeIDs(ctx, ids)
	if err != nil {
		// The instances exist but cannot be seen: terminate rather than leak them.
		if terr := p.TerminateIDs(context.WithoutCancel(ctx), ids); terr != nil {
			p.log.Error("terminating instances after a failed launch", "ids", ids, "err", terr)
		}
		return nil, nil, err
	}
	if len(insts) != len(nodes) || !p.identitiesOK(insts, names) {
		// Never leave a partial all-or-nothing job, nor instances with an
		// ambiguous identity.
		if terr := p.TerminateIDs(context.WithoutCancel(ctx), ids); terr != nil {
			p.log.Error("terminating a partial fleet", "ids", ids, "err", terr)
		}
		if len(insts) != len(nodes) {
			ferrs = append(ferrs, &cloud.Error{Kind: cloud.KindInsufficientCapacity, Code: "InsufficientInstanceCapacity", Op: op,
				Message: fmt.Sprintf("the fleet launched %d of %d instances; terminated them (all-or-nothing)", len(insts), len(nodes)), Offerings: offs})
			return nil, ferrs, nil
		}
		return nil, nil, &cloud.Error{Kind: cloud.KindUnknown, Code: "AmbiguousLaunchIndex", Op: op,
			Message: "the fleet's launch indexes are not 0..n-1, so nodes cannot tell who they are; terminated the fleet"}
	}
	p.log.Info("launched", "nodes", names, "instances", ids, "capacity", capacity)
	return insts, ferrs, nil
}

func offeringOf(lto *types.LaunchTemplateAndOverridesResponse, byKey map[string]cloud.Offering) (cloud.Offering, bool) {
	if lto == nil || lto.Overrides == nil {
		return cloud.Offering{}, false
	}
	o, ok := byKey[string(lto.Overrides.InstanceType)+"/"+aws.ToString(lto.Overrides.SubnetId)]
	return o, ok
}
