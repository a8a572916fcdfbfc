package ec2

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/test/ec2emu"
)

// wantEFA is the layout the EC2 User Guide asks of an accelerated
// instance's EFA interfaces, written out for n network cards: card 0 device
// 0, every other card device 1, all of type efa.
func wantEFA(n int) string {
	var b strings.Builder
	for i := range n {
		dev := 1
		if i == 0 {
			dev = 0
		}
		fmt.Fprintf(&b, "card %d device %d efa;", i, dev)
	}
	return b.String()
}

func layout(in ec2emu.Instance) string {
	var b strings.Builder
	for _, ni := range in.NetworkInterfaces {
		b.WriteString(ni.String() + ";")
	}
	return b.String()
}

// TestEFAMultiNode: two p5.48xlarge nodes of one job get 32 EFA interfaces
// each (the emulator's DescribeInstanceTypes says 32 network cards) in
// burst's cluster placement group for the zone, which burst creates with
// the cluster tag; the security groups move onto the interfaces.
func TestEFAMultiNode(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{ImageID: "ami-0abc", SecurityGroupIDs: []string{"sg-efa"}})
	od := cloud.Offering{InstanceType: "p5.48xlarge", Zone: "us-east-1a", Capacity: "on-demand"}
	res, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(9, "p5-1", "p5-2"), AllOrNothing: true, Offerings: []cloud.Offering{od}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Instances) != 2 {
		t.Fatalf("launched %d instances, want 2", len(res.Instances))
	}
	for _, in := range e.srv.Live() {
		if got := layout(in); got != wantEFA(32) {
			t.Errorf("%s interfaces %q, want %q", in.ID, got, wantEFA(32))
		}
		for _, ni := range in.NetworkInterfaces {
			if ni.SubnetID != "subnet-a" || len(ni.Groups) != 1 || ni.Groups[0] != "sg-efa" {
				t.Errorf("%s interface %v: subnet %s groups %v, want subnet-a and sg-efa", in.ID, ni, ni.SubnetID, ni.Groups)
				break
			}
		}
		if in.PlacementGroup != "burst-test-us-east-1a" {
			t.Errorf("%s placement group %q, want burst-test-us-east-1a", in.ID, in.PlacementGroup)
		}
	}
	strategy, tags, ok := e.srv.PlacementGroup("burst-test-us-east-1a")
	if !ok || strategy != "cluster" || tags[TagCluster] != "test" {
		t.Errorf("placement group: ok %v strategy %q tags %v, want a cluster group with the cluster tag", ok, strategy, tags)
	}
	// a second job reuses the group and the EFA template, and the network
	// info comes from the provider's cache
	if _, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(10, "p5-3", "p5-4"), AllOrNothing: true, Offerings: []cloud.Offering{od}}); err != nil {
		t.Fatal(err)
	}
	for action, want := range map[string]int{"DescribeInstanceTypes": 1, "CreatePlacementGroup": 1, "CreateLaunchTemplate": 2 /* the common template and the EFA one */} {
		if n := len(callsOf(e.srv, action)); n != want {
			t.Errorf("%d %s calls, want %d", n, action, want)
		}
	}
}

// TestEFAOnlyWhenItApplies: a single node, a type without EFA and an
// admin's launch template all launch with the default interface and no
// placement group of burst's.
func TestEFAOnlyWhenItApplies(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{ImageID: "ami-0abc"})
	p5 := cloud.Offering{InstanceType: "p5.48xlarge", Zone: "us-east-1a", Capacity: "on-demand"}
	g6 := cloud.Offering{InstanceType: "g6.xlarge", Zone: "us-east-1a", Capacity: "on-demand"}
	if _, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(1, "p5-1"), Offerings: []cloud.Offering{p5}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(2, "g6-1", "g6-2"), AllOrNothing: true, Offerings: []cloud.Offering{g6}}); err != nil {
		t.Fatal(err)
	}
	admin := newEnv(t, ec2emu.Options{}, Options{})
	if _, err := admin.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(3, "p5-2", "p5-3"), AllOrNothing: true, Offerings: []cloud.Offering{p5}}); err != nil {
		t.Fatal(err)
	}
	for _, srv := range []*ec2emu.Server{e.srv, admin.srv} {
		for _, in := range srv.Live() {
			if len(in.NetworkInterfaces) != 0 || in.PlacementGroup != "" {
				t.Errorf("%s (%s): interfaces %q, placement group %q; want neither", in.ID, in.InstanceType, layout(in), in.PlacementGroup)
			}
		}
	}
	if n := len(callsOf(admin.srv, "DescribeInstanceTypes")); n != 0 {
		t.Errorf("with an admin's launch template burst described instance types %d times, want 0", n)
	}
}

// TestNamedPlacementGroupEnsured: a class's placement_group that does not
// exist yet is created (strategy cluster) before the launch uses it.
func TestNamedPlacementGroupEnsured(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{ImageID: "ami-0abc"})
	g5 := cloud.Offering{InstanceType: "g5.48xlarge", Zone: "us-east-1b", Capacity: "on-demand"}
	if _, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(4, "g5-1", "g5-2"), AllOrNothing: true, PlacementGroup: "h100-pg",
		Offerings: []cloud.Offering{g5}}); err != nil {
		t.Fatal(err)
	}
	if s, _, ok := e.srv.PlacementGroup("h100-pg"); !ok || s != "cluster" {
		t.Fatalf("placement group h100-pg: ok %v strategy %q", ok, s)
	}
	for _, in := range e.srv.Live() {
		if in.PlacementGroup != "h100-pg" || layout(in) != wantEFA(1) {
			t.Errorf("%s: group %q interfaces %q, want h100-pg and %q", in.ID, in.PlacementGroup, layout(in), wantEFA(1))
		}
	}
}

// TestEFAIntoReservation: a two-node p5.48xlarge job launched into an
// On-Demand Capacity Reservation gets the fleet path's 32 EFA interfaces
// per instance, each in the offering's subnet with the security groups
// (EC2 takes no instance-level subnet beside them: the emulator refuses
// it), in burst's placement group for the zone; into a Capacity Block it
// gets the interfaces and no placement group of burst's.
func TestEFAIntoReservation(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{ImageID: "ami-0abc", SecurityGroupIDs: []string{"sg-efa"}})
	cr := e.srv.AddCapacityReservation(ec2emu.CapacityReservationSpec{InstanceType: "p5.48xlarge", Zone: "us-east-1a", Count: 2, Match: "targeted"})
	res, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(9, "p5-1", "p5-2"), AllOrNothing: true, Attempt: 1,
		Offerings: []cloud.Offering{reservedOff("p5.48xlarge", "us-east-1a", cr)}})
	if err != nil || len(res.Instances) != 2 {
		t.Fatalf("launching into the reservation: %+v %v", res, err)
	}
	runs := callsOf(e.srv, "RunInstances")
	if len(runs) != 1 {
		t.Fatalf("%d RunInstances calls, want 1", len(runs))
	}
	if p := runs[0].Params; p.Get("SubnetId") != "" || p.Get("NetworkInterface.32.SubnetId") != "subnet-a" || p.Get("NetworkInterface.33.DeviceIndex") != "" {
		t.Errorf("RunInstances SubnetId %q, interface 32's subnet %q, a 33rd interface %q; want the subnet on each of 32 interfaces only",
			p.Get("SubnetId"), p.Get("NetworkInterface.32.SubnetId"), p.Get("NetworkInterface.33.DeviceIndex"))
	}
	for _, in := range e.srv.Live() {
		if in.CapacityReservation != cr || layout(in) != wantEFA(32) || in.PlacementGroup != "burst-test-us-east-1a" {
			t.Errorf("%s: reservation %q interfaces %q group %q; want %s, %q, burst-test-us-east-1a", in.ID, in.CapacityReservation, layout(in), in.PlacementGroup, cr, wantEFA(32))
		}
		for _, ni := range in.NetworkInterfaces {
			if ni.SubnetID != "subnet-a" || len(ni.Groups) != 1 || ni.Groups[0] != "sg-efa" {
				t.Errorf("%s interface %v: subnet %s groups %v, want subnet-a and sg-efa", in.ID, ni, ni.SubnetID, ni.Groups)
				break
			}
		}
	}

	now := e.srv.Now()
	cb, err := e.srv.AddCapacityBlock(ec2emu.CapacityBlockSpec{InstanceType: "p5.48xlarge", Zone: "us-east-1b", Count: 2, Start: now.Add(-time.Minute), End: now.Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	block := reservedOff("p5.48xlarge", "us-east-1b", cb)
	block.BlockEnd = now.Add(24 * time.Hour).Truncate(time.Second)
	res, err = e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(10, "p5-3", "p5-4"), AllOrNothing: true, Attempt: 1, Offerings: []cloud.Offering{block}})
	if err != nil || len(res.Instances) != 2 {
		t.Fatalf("launching into the block: %+v %v", res, err)
	}
	for _, in := range e.srv.Live() {
		if in.CapacityReservation != cb {
			continue
		}
		if layout(in) != wantEFA(32) || in.PlacementGroup != "" || in.NetworkInterfaces[0].SubnetID != "subnet-b" {
			t.Errorf("%s in the block: interfaces %q group %q subnet %s; want %q, none, subnet-b", in.ID, layout(in), in.PlacementGroup, in.NetworkInterfaces[0].SubnetID, wantEFA(32))
		}
	}
}
