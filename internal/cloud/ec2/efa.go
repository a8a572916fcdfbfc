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

// # EFA and cluster placement
//
// A multi-node launch on an EFA-capable type (DescribeInstanceTypes'
// NetworkInfo, netinfo.go) gets one EFA interface per network card, laid
// out as the EC2 User Guide asks for accelerated instances ("Maximize
// network bandwidth on accelerated instances with EFA"): network card 0
// device index 0, every other card device index 1, interface type efa;
// 32 of them on a p5.48xlarge. EC2 Fleet overrides carry no network
// interfaces, so they live in a launch template of their own
// (burst-<cluster>-<hash>-efa<n>, the security groups on each interface),
// the fleet's override giving the subnet. The nodes go into a cluster
// placement group: the class's placement_group, or burst-<cluster>-<zone>,
// created (strategy cluster) when it does not exist. The security groups
// must let the nodes reach each other on all traffic (a self-referencing
// rule; burst-slurm-conf cloudformation makes one).
//
// With an admin's launch template (Options.LaunchTemplateName) its network
// interfaces stand: burst attaches no EFA of its own (the sizer then counts
// TCP between the nodes).

// efaInterfaces is the launch template's network interfaces for n EFA
// interfaces, one per network card.
func efaInterfaces(n int, groups []string) []types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest {
	out := make([]types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, n)
	for i := range out {
		dev := int32(1)
		if i == 0 {
			dev = 0
		}
		out[i] = types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
			NetworkCardIndex: aws.Int32(int32(i)), DeviceIndex: aws.Int32(dev), InterfaceType: aws.String("efa"),
			Groups: groups, DeleteOnTermination: aws.Bool(true),
		}
	}
	return out
}

// efaRunInterfaces are RunInstances' network interfaces for n EFA
// interfaces in subnet, laid out as efaInterfaces.
func efaRunInterfaces(n int, subnet string, groups []string) []types.InstanceNetworkInterfaceSpecification {
	out := make([]types.InstanceNetworkInterfaceSpecification, n)
	for i, t := range efaInterfaces(n, groups) {
		out[i] = types.InstanceNetworkInterfaceSpecification{NetworkCardIndex: t.NetworkCardIndex, DeviceIndex: t.DeviceIndex, InterfaceType: t.InterfaceType,
			Groups: t.Groups, DeleteOnTermination: t.DeleteOnTermination, SubnetId: aws.String(subnet)}
	}
	return out
}

// efaTemplate returns the launch template with n EFA interfaces.
func (p *Provider) efaTemplate(ctx context.Context, n int) (string, error) {
	p.ltMu.Lock()
	defer p.ltMu.Unlock()
	if name, ok := p.efa[n]; ok {
		return name, nil
	}
	name, err := p.ensureTemplate(ctx, n)
	if err != nil {
		return "", err
	}
	if p.efa == nil {
		p.efa = map[int]string{}
	}
	p.efa[n] = name
	return name, nil
}

// placementGroup is the cluster placement group of a multi-node launch in
// zone: the request's, or burst's own for the zone when the launch attaches
// EFA; "" for none. It exists when returned.
func (p *Provider) placementGroup(ctx context.Context, req cloud.LaunchRequest, zone string, efa bool) (string, error) {
	name := req.PlacementGroup
	if name == "" && efa {
		name = "burst-" + p.opts.Cluster + "-" + zone
	}
	if name == "" {
		return "", nil
	}
	p.ltMu.Lock()
	defer p.ltMu.Unlock()
	if p.pgs[name] {
		return name, nil
	}
	// CreatePlacementGroup answers InvalidPlacementGroup.Duplicate for a
	// group that exists (the admin's, or burst's from an earlier launch):
	// one call ensures it, without a describe
	_, err := p.api.CreatePlacementGroup(ctx, &ec2.CreatePlacementGroupInput{GroupName: aws.String(name), Strategy: types.PlacementStrategyCluster,
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypePlacementGroup,
			Tags: []types.Tag{{Key: aws.String(TagCluster), Value: aws.String(p.opts.Cluster)}}}}})
	switch e, _ := cloud.AsError(wrapErr(err, "", nil)); {
	case err == nil:
		p.log.Info("created cluster placement group", "name", name)
	case e == nil || e.Code != "InvalidPlacementGroup.Duplicate":
		return "", wrapErr(err, "ensuring cluster placement group "+name, nil)
	}
	if p.pgs == nil {
		p.pgs = map[string]bool{}
	}
	p.pgs[name] = true
	return name, nil
}

// launchConfigs are a fleet's launch template configs for nodes over offs:
// one config with the common template, and for a multi-node launch one
// per EFA interface count with its EFA template, each override in its
// zone's placement group. byKey maps "type/subnet" back to the offering.
func (p *Provider) launchConfigs(ctx context.Context, lt string, req cloud.LaunchRequest, nodes []cloud.NodeSpec, offs []cloud.Offering) ([]types.FleetLaunchTemplateConfigRequest, map[string]cloud.Offering, error) {
	multi := len(nodes) > 1
	net := map[string]NetInfo{}
	if multi && p.opts.LaunchTemplateName == "" {
		names := make([]string, 0, len(offs))
		for _, o := range offs {
			names = append(names, o.InstanceType)
		}
		var err error
		if net, err = p.Network(ctx, names); err != nil {
			return nil, nil, err
		}
	}
	var configs []types.FleetLaunchTemplateConfigRequest
	cfgOf := map[string]int{}
	byKey := map[string]cloud.Offering{}
	for i, o := range offs {
		ov := types.FleetLaunchTemplateOverridesRequest{
			InstanceType: types.InstanceType(o.InstanceType),
			SubnetId:     aws.String(o.SubnetID),
			Priority:     aws.Float64(float64(i)),
		}
		name, efa := lt, net[o.InstanceType].EFAInterfaces()
		if efa > 0 {
			var err error
			if name, err = p.efaTemplate(ctx, efa); err != nil {
				return nil, nil, err
			}
		}
		if multi {
			g, err := p.placementGroup(ctx, req, o.Zone, efa > 0)
			if err != nil {
				return nil, nil, err
			}
			if g != "" {
				ov.Placement = &types.Placement{GroupName: aws.String(g)}
			}
		}
		k, ok := cfgOf[name]
		if !ok {
			spec := &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(name), Version: aws.String(p.opts.LaunchTemplateVersion)}
			if name != lt {
				spec.Version = aws.String("$Default") // burst's own template has one version
			}
			if req.UserData != "" {
				spec.LaunchTemplateSpecificationUserData = aws.String(base64.StdEncoding.EncodeToString([]byte(req.UserData)))
			}
			k = len(configs)
			cfgOf[name] = k
			configs = append(configs, types.FleetLaunchTemplateConfigRequest{LaunchTemplateSpecification: spec})
		}
		configs[k].Overrides = append(configs[k].Overrides, ov)
		byKey[o.InstanceType+"/"+o.SubnetID] = o
	}
	if multi && len(net) > 0 {
		var efa []string
		for _, o := range offs {
			if n := net[o.InstanceType].EFAInterfaces(); n > 0 {
				efa = append(efa, fmt.Sprintf("%s:%d", o.InstanceType, n))
			}
		}
		if len(efa) > 0 {
			p.log.Info("multi-node launch with EFA interfaces", "types", strings.Join(efa, ","))
		}
	}
	return configs, byKey, nil
}
