package ec2

import (
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/test/ec2emu"
)

func reservedOff(typ, zone, cr string) cloud.Offering {
	return cloud.Offering{InstanceType: typ, Zone: zone, Capacity: capacity.Reserved, Reservation: cr}
}

// A reserved offering first: the nodes run in the reservation (one
// RunInstances that targets it); when it is full the next phase, spot,
// takes them.
func TestLaunchIntoReservationThenFallBack(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{})
	cr := e.srv.AddCapacityReservation(ec2emu.CapacityReservationSpec{InstanceType: "g5.xlarge", Zone: "us-east-1a", Count: 2, Match: "targeted"})
	offs := []cloud.Offering{reservedOff("g5.xlarge", "us-east-1a", cr), spot("g5.xlarge", "us-east-1b")}
	res, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(7, "gpu-1", "gpu-2"), Offerings: offs, AllOrNothing: true, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Instances) != 2 {
		t.Fatalf("launched %d instances, want 2", len(res.Instances))
	}
	got := map[string]bool{}
	for _, in := range res.Instances {
		got[in.Node] = true
		if in.Capacity != capacity.Reserved || in.Reservation != cr || in.Zone != "us-east-1a" || in.Tags[TagCapacity] != "reserved" {
			t.Errorf("instance %+v, want reserved in %s (us-east-1a, tagged reserved)", in, cr)
		}
	}
	if !got["gpu-1"] || !got["gpu-2"] {
		t.Errorf("nodes %v, want gpu-1 and gpu-2", got)
	}
	runs := callsOf(e.srv, "RunInstances")
	if len(runs) != 1 || e.srv.CallCount("CreateFleet") != 0 {
		t.Fatalf("%d RunInstances and %d CreateFleet calls, want one RunInstances", len(runs), e.srv.CallCount("CreateFleet"))
	}
	p := runs[0].Params
	for k, want := range map[string]string{"CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId": cr,
		"MinCount": "2", "MaxCount": "2", "InstanceType": "g5.xlarge", "SubnetId": testSubnets["us-east-1a"]} {
		if p.Get(k) != want {
			t.Errorf("RunInstances %s = %q, want %q", k, p.Get(k), want)
		}
	}
	// Described later, the instances say they run in the reservation.
	list, err := e.prov.List(ctx(t))
	if err != nil || len(list) != 2 || list[0].Capacity != capacity.Reserved || list[0].Reservation != cr {
		t.Errorf("List = %+v, %v; want the two reserved instances", list, err)
	}
	rs, err := e.prov.Reservations(ctx(t), []string{cr})
	if err != nil || len(rs) != 1 || rs[0].Available != 0 || rs[0].Total != 2 || rs[0].Match != "targeted" || rs[0].State != "active" {
		t.Errorf("Reservations = %+v, %v; want %s active targeted with 0 of 2 available", rs, err, cr)
	}
	// an id EC2 does not know (a typo in burst.yaml) fails EC2's whole
	// call; the provider asks for each and leaves the unknown one out
	if rs, err := e.prov.Reservations(ctx(t), []string{"cr-0000000000000dead", cr}); err != nil || len(rs) != 1 || rs[0].ID != cr {
		t.Errorf("Reservations with an unknown id = %+v, %v; want %s alone", rs, err, cr)
	}

	// Full: spot takes the next job.
	e.srv.ResetCalls()
	res, err = e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(8, "gpu-3"), Offerings: offs, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if in := res.Instances[0]; in.Capacity != capacity.Spot || in.Reservation != "" || in.Zone != "us-east-1b" {
		t.Errorf("with the reservation full: %+v, want spot in us-east-1b", in)
	}
	if e.srv.CallCount("RunInstances") != 1 || e.srv.CallCount("CreateFleet") != 1 {
		t.Errorf("%d RunInstances, %d CreateFleet; want the reservation tried, then one spot fleet", e.srv.CallCount("RunInstances"), e.srv.CallCount("CreateFleet"))
	}
	// reservation only, full: the launch fails for lack of capacity, naming the reservation
	_, err = e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(9, "gpu-4"), Offerings: offs[:1], Attempt: 1})
	if cloud.KindOf(err) != cloud.KindInsufficientCapacity {
		t.Errorf("reservation only, full: err %v, want insufficient capacity", err)
	}
}

func TestReservedOfferingChecked(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{})
	bad := cloud.Offering{InstanceType: "g5.xlarge", Zone: "us-east-1a", Capacity: capacity.Reserved}
	if _, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(1, "gpu-1"), Offerings: []cloud.Offering{bad}}); cloud.KindOf(err) != cloud.KindInvalid {
		t.Errorf("a reserved offering without a reservation: err %v, want invalid", err)
	}
}

// A Capacity Block's offering launches with the capacity-block market type
// (the emulator refuses the launch without it) and tags the instances with
// the block's end; a block not yet active is full, and the next phase
// takes the nodes.
func TestLaunchIntoCapacityBlock(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{})
	now := e.srv.Now()
	end := now.Add(6 * time.Hour).Truncate(time.Second)
	cb, err := e.srv.AddCapacityBlock(ec2emu.CapacityBlockSpec{InstanceType: "g5.xlarge", Zone: "us-east-1a", Count: 1, Start: now.Add(-time.Minute), End: end, UpfrontUSD: 10})
	if err != nil {
		t.Fatal(err)
	}
	later, err := e.srv.AddCapacityBlock(ec2emu.CapacityBlockSpec{InstanceType: "g5.xlarge", Zone: "us-east-1a", Count: 1, Start: now.Add(time.Hour), End: end, UpfrontUSD: 10})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := e.prov.Reservations(ctx(t), []string{cb, later})
	if err != nil || len(rs) != 2 {
		t.Fatalf("describing the blocks: %+v %v", rs, err)
	}
	for _, r := range rs {
		want := map[string]string{cb: "active", later: "scheduled"}[r.ID]
		if r.Type != capacity.BlockType || r.State != want || !r.End.Equal(end) {
			t.Errorf("block %s described as %s %s ending %v, want capacity-block %s ending %v", r.ID, r.Type, r.State, r.End, want, end)
		}
	}
	block := func(id string) cloud.Offering {
		o := reservedOff("g5.xlarge", "us-east-1a", id)
		o.BlockEnd = end
		return o
	}
	res, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(7, "gpu-1"), Offerings: []cloud.Offering{block(cb)}, Attempt: 1})
	if err != nil || len(res.Instances) != 1 {
		t.Fatalf("launching into the active block: %+v %v", res, err)
	}
	in := res.Instances[0]
	if in.Reservation != cb || in.Capacity != capacity.Reserved || in.Tags[TagBlockEnd] != end.UTC().Format(time.RFC3339) {
		t.Errorf("instance %+v, want reserved in %s tagged %s=%s", in, cb, TagBlockEnd, end.UTC().Format(time.RFC3339))
	}
	res, err = e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(8, "gpu-2"), Offerings: []cloud.Offering{block(later), spot("g5.xlarge", "us-east-1b")}, Attempt: 1})
	if err != nil || len(res.Instances) != 1 || res.Instances[0].Capacity != capacity.Spot {
		t.Fatalf("a scheduled block falls back to spot: %+v %v", res, err)
	}
}
