package ec2

import (
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/test/ec2emu"
)

// The default spot strategy is price-capacity-optimized, which ignores
// priorities: each spot fleet holds one instance type, in rank order, and
// EC2 (here the emulator) picks its zone by price and spare capacity.
func TestDefaultSpotStrategyPriceCapacityOptimized(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{})
	// ranked: g6 in b, g6 in a, then g5 in a; the emulator's spot price
	// rises from zone a to c, so price-capacity-optimized takes g6 in a
	offs := []cloud.Offering{spot("g6.xlarge", "us-east-1b"), spot("g6.xlarge", "us-east-1a"), spot("g5.xlarge", "us-east-1a")}
	res, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(1, "gpu-1"), Offerings: offs, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if in := res.Instances[0]; in.InstanceType != "g6.xlarge" || in.Zone != "us-east-1a" || in.Capacity != capacity.Spot {
		t.Errorf("launched %s in %s (%s), want g6.xlarge spot in us-east-1a (the cheaper zone of the top-ranked type)", in.InstanceType, in.Zone, in.Capacity)
	}
	fleets := callsOf(e.srv, "CreateFleet")
	if len(fleets) != 1 {
		t.Fatalf("%d CreateFleet calls, want 1", len(fleets))
	}
	p := fleets[0].Params
	if got := p.Get("SpotOptions.AllocationStrategy"); got != "price-capacity-optimized" {
		t.Errorf("SpotOptions.AllocationStrategy = %q, want price-capacity-optimized", got)
	}
	if p.Get("LaunchTemplateConfigs.1.Overrides.1.InstanceType") != "g6.xlarge" || p.Get("LaunchTemplateConfigs.1.Overrides.2.InstanceType") != "g6.xlarge" ||
		p.Has("LaunchTemplateConfigs.1.Overrides.3.InstanceType") {
		t.Errorf("first spot fleet overrides = %v, want the two g6.xlarge zones only", p)
	}

	// The top-ranked type dry in every zone: the next type's own fleet,
	// with its own idempotency token.
	e.srv.SetCapacity("g6.xlarge", "us-east-1a", "spot", 0)
	e.srv.SetCapacity("g6.xlarge", "us-east-1b", "spot", 0)
	e.srv.ResetCalls()
	res, err = e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(2, "gpu-2"), Offerings: offs, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if in := res.Instances[0]; in.InstanceType != "g5.xlarge" || in.Capacity != capacity.Spot {
		t.Errorf("launched %s (%s), want g5.xlarge spot", in.InstanceType, in.Capacity)
	}
	fleets = callsOf(e.srv, "CreateFleet")
	if len(fleets) != 2 {
		t.Fatalf("%d CreateFleet calls, want one per instance type", len(fleets))
	}
	if a, b := fleets[0].Params.Get("ClientToken"), fleets[1].Params.Get("ClientToken"); a == "" || a == b {
		t.Errorf("the two fleets' client tokens are %q and %q, want two different ones", a, b)
	}
	if got := fleets[1].Params.Get("LaunchTemplateConfigs.1.Overrides.1.InstanceType"); got != "g5.xlarge" {
		t.Errorf("second fleet's override = %s, want g5.xlarge", got)
	}
}

func TestSpotStrategyChecked(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{})
	_, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(1, "gpu-1"), Offerings: []cloud.Offering{spot("g5.xlarge", "us-east-1a")},
		SpotAllocationStrategy: "cheapest"})
	if err == nil || !strings.Contains(err.Error(), `spot allocation strategy "cheapest" is not one of price-capacity-optimized`) {
		t.Errorf("err = %v, want the bad strategy named with the valid ones", err)
	}
	if n := e.srv.CallCount("CreateFleet"); n != 0 {
		t.Errorf("%d CreateFleet calls for a bad request, want 0", n)
	}
}
