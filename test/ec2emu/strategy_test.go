package ec2emu_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/test/ec2emu"
)

// spotFleet asks for n spot instances over overrides (type, subnet),
// ranked by priority in the order given.
func spotFleet(c *ec2.Client, lt, strategy string, n int32, ovs ...[2]string) (*ec2.CreateFleetOutput, error) {
	var o []types.FleetLaunchTemplateOverridesRequest
	for i, ov := range ovs {
		o = append(o, types.FleetLaunchTemplateOverridesRequest{InstanceType: types.InstanceType(ov[0]), SubnetId: aws.String(ov[1]), Priority: aws.Float64(float64(i))})
	}
	return c.CreateFleet(context.Background(), &ec2.CreateFleetInput{
		Type: types.FleetTypeInstant,
		LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(lt), Version: aws.String("$Default")},
			Overrides:                   o,
		}},
		TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(n), DefaultTargetCapacityType: types.DefaultTargetCapacityTypeSpot},
		SpotOptions: &types.SpotOptionsRequest{AllocationStrategy: types.SpotAllocationStrategy(strategy), MinTargetCapacity: aws.Int32(n),
			SingleAvailabilityZone: aws.Bool(true), SingleInstanceType: aws.Bool(true)},
	})
}

// fleetSubnet returns the subnet of a fleet's one pool.
func fleetSubnet(t *testing.T) func(*ec2.CreateFleetOutput, error) string {
	return func(out *ec2.CreateFleetOutput, err error) string {
		t.Helper()
		if err != nil {
			t.Fatalf("CreateFleet: %v", err)
		}
		if len(out.Instances) != 1 || out.Instances[0].LaunchTemplateAndOverrides == nil {
			t.Fatalf("CreateFleet launched %+v (errors %+v), want one pool", out.Instances, out.Errors)
		}
		return aws.ToString(out.Instances[0].LaunchTemplateAndOverrides.Overrides.SubnetId)
	}
}

// price-capacity-optimized takes, of the pools that can hold the whole
// request, the cheapest; priorities play no part. The emulator's spot price
// rises from zone a to c (3% a zone).
func TestPriceCapacityOptimized(t *testing.T) {
	s, c := start(t, ec2emu.Options{})
	lt := "lt-pco"
	s.AddLaunchTemplate(ec2emu.LaunchTemplateSpec{Name: lt, ImageID: "ami-1"})
	// ranked c, b, a: price-capacity-optimized still takes a (cheapest, room for 2)
	z := fleetSubnet(t)(spotFleet(c, lt, "price-capacity-optimized", 2, [2]string{"g5.xlarge", "subnet-c"}, [2]string{"g5.xlarge", "subnet-b"}, [2]string{"g5.xlarge", "subnet-a"}))
	if z != "subnet-a" {
		t.Errorf("price-capacity-optimized launched in %s, want subnet-a (cheapest with room)", z)
	}
	// the cheapest pool has room for 1 of 2: the next cheapest that holds both
	s.SetCapacity("g5.xlarge", "us-east-1a", "spot", 1)
	z = fleetSubnet(t)(spotFleet(c, lt, "price-capacity-optimized", 2, [2]string{"g5.xlarge", "subnet-c"}, [2]string{"g5.xlarge", "subnet-a"}, [2]string{"g5.xlarge", "subnet-b"}))
	if z != "subnet-b" {
		t.Errorf("price-capacity-optimized launched in %s, want subnet-b (cheapest that holds both)", z)
	}
	// capacity-optimized-prioritized keeps to the priorities
	z = fleetSubnet(t)(spotFleet(c, lt, "capacity-optimized-prioritized", 1, [2]string{"g5.xlarge", "subnet-c"}, [2]string{"g5.xlarge", "subnet-a"}))
	if z != "subnet-c" {
		t.Errorf("capacity-optimized-prioritized launched in %s, want subnet-c (priority 0)", z)
	}
	// an unknown strategy is refused, as EC2 does
	if _, err := spotFleet(c, lt, "cheapest-please", 1, [2]string{"g5.xlarge", "subnet-a"}); code(err) != "InvalidParameterValue" {
		t.Errorf("unknown strategy: err %v, want InvalidParameterValue", err)
	}
}
