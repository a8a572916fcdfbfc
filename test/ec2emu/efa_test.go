package ec2emu_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/test/ec2emu"
)

// efaNICs is n interfaces of type typ laid out as the EC2 User Guide asks:
// card i, device 0 on card 0 and 1 elsewhere.
func efaNICs(n int, typ string) []types.InstanceNetworkInterfaceSpecification {
	out := make([]types.InstanceNetworkInterfaceSpecification, n)
	for i := range out {
		dev := int32(1)
		if i == 0 {
			dev = 0
		}
		out[i] = types.InstanceNetworkInterfaceSpecification{NetworkCardIndex: aws.Int32(int32(i)), DeviceIndex: aws.Int32(dev),
			InterfaceType: aws.String(typ), SubnetId: aws.String("subnet-a"), Groups: []string{"sg-1"}}
	}
	return out
}

func withNICs(typ types.InstanceType, nics []types.InstanceNetworkInterfaceSpecification) func(*ec2.RunInstancesInput) {
	return func(in *ec2.RunInstancesInput) { in.InstanceType, in.NetworkInterfaces, in.SubnetId = typ, nics, nil }
}

// TestNetworkInfo: DescribeInstanceTypes serves a p5.48xlarge's 32 network
// cards and EFA limit (AWS's figures, internal/catalog's table), and no EFA
// for a g6.xlarge.
func TestNetworkInfo(t *testing.T) {
	_, c := start(t, ec2emu.Options{})
	out, err := c.DescribeInstanceTypes(context.Background(), &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"p5.48xlarge", "g6.xlarge"}})
	if err != nil || len(out.InstanceTypes) != 2 {
		t.Fatalf("DescribeInstanceTypes: %v %+v", err, out)
	}
	for _, it := range out.InstanceTypes {
		ni := it.NetworkInfo
		if ni == nil {
			t.Fatalf("%s: no NetworkInfo", it.InstanceType)
		}
		switch it.InstanceType {
		case "p5.48xlarge":
			if !aws.ToBool(ni.EfaSupported) || aws.ToInt32(ni.MaximumNetworkCards) != 32 || ni.EfaInfo == nil ||
				aws.ToInt32(ni.EfaInfo.MaximumEfaInterfaces) != 32 || len(ni.NetworkCards) != 32 || aws.ToFloat64(ni.NetworkCards[31].BaselineBandwidthInGbps) != 100 {
				t.Errorf("p5.48xlarge network info %+v, want EFA on 32 cards of 100 Gbps", ni)
			}
		case "g6.xlarge":
			if aws.ToBool(ni.EfaSupported) || ni.EfaInfo != nil || aws.ToInt32(ni.MaximumNetworkCards) != 1 {
				t.Errorf("g6.xlarge network info %+v, want one card and no EFA", ni)
			}
		}
	}
}

// TestEFARules: EC2's rules for EFA interfaces, each refused as EC2 does.
func TestEFARules(t *testing.T) {
	s, c := start(t, ec2emu.Options{})
	if _, err := run(t, c, 1, false, withNICs("p5.48xlarge", efaNICs(32, "efa"))); err != nil {
		t.Fatalf("32 EFA interfaces on a p5.48xlarge: %v", err)
	}
	live := s.Live()
	if len(live) != 1 || len(live[0].NetworkInterfaces) != 32 || live[0].NetworkInterfaces[31].String() != "card 31 device 1 efa" {
		t.Fatalf("recorded interfaces %v", live)
	}
	missingPrimary := efaNICs(2, "efa")[1:]
	efaOnlyPrimary := efaNICs(1, "efa-only")
	twice := append(efaNICs(2, "efa"), efaNICs(2, "efa")[1])
	withSG := func(in *ec2.RunInstancesInput) {
		withNICs("p5.48xlarge", efaNICs(1, "efa"))(in)
		in.SecurityGroupIds = []string{"sg-1"}
	}
	for name, mut := range map[string]func(*ec2.RunInstancesInput){
		"EFA on a type without it":     withNICs("g6.xlarge", efaNICs(1, "efa")),
		"more EFA than the type takes": withNICs("p4d.24xlarge", efaNICs(5, "efa")),
		"no primary interface":         withNICs("p5.48xlarge", missingPrimary),
		"EFA-only primary interface":   withNICs("p5.48xlarge", efaOnlyPrimary),
		"one card and device twice":    withNICs("p5.48xlarge", twice),
		"instance-level groups too":    withSG,
	} {
		if _, err := run(t, c, 1, false, mut); code(err) != "InvalidParameterCombination" {
			t.Errorf("%s: err %v, want InvalidParameterCombination", name, err)
		}
	}
	if _, err := run(t, c, 1, false, func(in *ec2.RunInstancesInput) { in.Placement = &types.Placement{GroupName: aws.String("nope")} }); code(err) != "InvalidPlacementGroup.Unknown" {
		t.Errorf("an unknown placement group: err %v, want InvalidPlacementGroup.Unknown", err)
	}
	if len(s.Live()) != 1 {
		t.Errorf("%d instances live, want only the first", len(s.Live()))
	}
}

// TestPlacementGroups: CreatePlacementGroup, its duplicate, DescribePlacementGroups.
func TestPlacementGroups(t *testing.T) {
	s, c := start(t, ec2emu.Options{})
	ctx := context.Background()
	in := &ec2.CreatePlacementGroupInput{GroupName: aws.String("pg-1"), Strategy: types.PlacementStrategyCluster,
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypePlacementGroup, Tags: []types.Tag{{Key: aws.String("burst:cluster"), Value: aws.String("c")}}}}}
	if _, err := c.CreatePlacementGroup(ctx, in); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreatePlacementGroup(ctx, in); code(err) != "InvalidPlacementGroup.Duplicate" {
		t.Errorf("a second pg-1: err %v, want InvalidPlacementGroup.Duplicate", err)
	}
	out, err := c.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{GroupNames: []string{"pg-1"}})
	if err != nil || len(out.PlacementGroups) != 1 || out.PlacementGroups[0].Strategy != types.PlacementStrategyCluster || out.PlacementGroups[0].State != types.PlacementGroupStateAvailable {
		t.Fatalf("DescribePlacementGroups: %v %+v", err, out)
	}
	if _, err := c.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{GroupNames: []string{"pg-2"}}); code(err) != "InvalidPlacementGroup.Unknown" {
		t.Errorf("an unknown group: err %v, want InvalidPlacementGroup.Unknown", err)
	}
	if _, tags, ok := s.PlacementGroup("pg-1"); !ok || tags["burst:cluster"] != "c" {
		t.Errorf("pg-1 tags %v", tags)
	}
}

// TestEFARulesInFleet: a fleet whose launch template asks for EFA
// interfaces the override's type cannot take gets that override's error
// (InvalidParameterCombination) and launches nothing there; a type that
// takes them launches with the template's interfaces on the override's
// subnet.
func TestEFARulesInFleet(t *testing.T) {
	s, c := start(t, ec2emu.Options{})
	ctx := context.Background()
	nics := make([]types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, 4)
	for i := range nics {
		dev := int32(1)
		if i == 0 {
			dev = 0
		}
		nics[i] = types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{NetworkCardIndex: aws.Int32(int32(i)), DeviceIndex: aws.Int32(dev), InterfaceType: aws.String("efa")}
	}
	if _, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("efa4"),
		LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String("ami-1"), NetworkInterfaces: nics}}); err != nil {
		t.Fatal(err)
	}
	fleet := func(typ types.InstanceType) *ec2.CreateFleetOutput {
		out, err := c.CreateFleet(ctx, &ec2.CreateFleetInput{Type: types.FleetTypeInstant,
			LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{{
				LaunchTemplateSpecification: &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("efa4"), Version: aws.String("$Default")},
				Overrides:                   []types.FleetLaunchTemplateOverridesRequest{{InstanceType: typ, SubnetId: aws.String("subnet-b")}}}},
			TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: types.DefaultTargetCapacityTypeOnDemand}})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := fleet("g6.xlarge"); len(out.Instances) != 0 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "InvalidParameterCombination" {
		t.Errorf("4 EFA interfaces on a g6.xlarge: instances %+v errors %+v; want InvalidParameterCombination", out.Instances, out.Errors)
	}
	if out := fleet("p4d.24xlarge"); len(out.Instances) != 1 {
		t.Fatalf("4 EFA interfaces on a p4d.24xlarge: errors %+v", out.Errors)
	}
	live := s.Live()
	if len(live) != 1 || len(live[0].NetworkInterfaces) != 4 || live[0].NetworkInterfaces[3].SubnetID != "subnet-b" {
		t.Errorf("launched %+v; want one p4d.24xlarge with 4 interfaces on subnet-b", live)
	}
}

// TestEFATemplateBesideSubnet: RunInstances from a launch template with
// network interfaces takes the subnet on the interfaces; an instance-level
// SubnetId beside them is refused, as EC2 does, and the same launch with
// the interfaces (and their subnet) in the request goes ahead.
func TestEFATemplateBesideSubnet(t *testing.T) {
	s, c := start(t, ec2emu.Options{})
	ctx := context.Background()
	nics := make([]types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, 4)
	for i := range nics {
		nics[i] = types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{NetworkCardIndex: aws.Int32(int32(i)), DeviceIndex: aws.Int32(min(int32(i), 1)), InterfaceType: aws.String("efa")}
	}
	if _, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("efa4"),
		LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String("ami-1"), NetworkInterfaces: nics}}); err != nil {
		t.Fatal(err)
	}
	in := &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: "p4d.24xlarge", SubnetId: aws.String("subnet-b"),
		LaunchTemplate: &types.LaunchTemplateSpecification{LaunchTemplateName: aws.String("efa4")}}
	if _, err := c.RunInstances(ctx, in); code(err) != "InvalidParameterCombination" {
		t.Errorf("a template with interfaces and an instance-level subnet: err %v, want InvalidParameterCombination", err)
	}
	in.SubnetId = nil
	for _, n := range nics {
		in.NetworkInterfaces = append(in.NetworkInterfaces, types.InstanceNetworkInterfaceSpecification{NetworkCardIndex: n.NetworkCardIndex,
			DeviceIndex: n.DeviceIndex, InterfaceType: n.InterfaceType, SubnetId: aws.String("subnet-b")})
	}
	if _, err := c.RunInstances(ctx, in); err != nil {
		t.Fatalf("the interfaces with their subnet in the request: %v", err)
	}
	if live := s.Live(); len(live) != 1 || live[0].SubnetID != "subnet-b" || len(live[0].NetworkInterfaces) != 4 {
		t.Errorf("launched %+v; want one instance on subnet-b with 4 interfaces", live)
	}
}
