package ec2emu_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/test/ec2emu"
)

func target(id string) func(*ec2.RunInstancesInput) {
	return func(in *ec2.RunInstancesInput) {
		in.CapacityReservationSpecification = &types.CapacityReservationSpecification{
			CapacityReservationTarget: &types.CapacityReservationTarget{CapacityReservationId: aws.String(id)}}
	}
}

func TestCapacityReservationTargeted(t *testing.T) {
	s, c := start(t, ec2emu.Options{})
	cr := s.AddCapacityReservation(ec2emu.CapacityReservationSpec{InstanceType: "g5.xlarge", Zone: "us-east-1a", Count: 2, Match: "targeted"})
	// the zone's general pool is dry: the reservation's capacity is set aside
	s.SetCapacity("g5.xlarge", "us-east-1a", "on-demand", 0)
	out, err := run(t, c, 2, false, target(cr))
	if err != nil {
		t.Fatalf("launching 2 into a reservation of 2: %v", err)
	}
	for _, in := range out.Instances {
		if aws.ToString(in.CapacityReservationId) != cr {
			t.Errorf("instance %s runs in reservation %q, want %s", aws.ToString(in.InstanceId), aws.ToString(in.CapacityReservationId), cr)
		}
	}
	d, err := c.DescribeCapacityReservations(context.Background(), &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{cr}})
	if err != nil || len(d.CapacityReservations) != 1 {
		t.Fatalf("DescribeCapacityReservations: %+v %v", d, err)
	}
	if r := d.CapacityReservations[0]; aws.ToInt32(r.AvailableInstanceCount) != 0 || aws.ToInt32(r.TotalInstanceCount) != 2 || r.State != types.CapacityReservationStateActive ||
		r.InstanceMatchCriteria != types.InstanceMatchCriteriaTargeted || aws.ToString(r.InstanceType) != "g5.xlarge" || aws.ToString(r.AvailabilityZone) != "us-east-1a" {
		t.Errorf("described %+v, want g5.xlarge us-east-1a targeted active 2 of 2 used", r)
	}
	// full: refused, nothing launched anywhere else
	if _, err := run(t, c, 1, false, target(cr)); code(err) != "ReservationCapacityExceeded" {
		t.Errorf("a full reservation: err %v, want ReservationCapacityExceeded", err)
	}
	// a targeted reservation is not used by an untargeted launch
	s.SetCapacity("g5.xlarge", "us-east-1a", "on-demand", 5)
	if _, err := c.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{aws.ToString(out.Instances[0].InstanceId)}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the terminated instance frees its slot", func() bool { return s.CapacityReservations()[0].Available == 1 })
	plain, err := run(t, c, 1, false)
	if err != nil || aws.ToString(plain.Instances[0].CapacityReservationId) != "" {
		t.Errorf("an untargeted launch: %v, reservation %q; want none (the reservation is targeted)", err, aws.ToString(plain.Instances[0].CapacityReservationId))
	}
	// a wrong type, an unknown id and a spot launch are refused
	if _, err := run(t, c, 1, false, target(cr), func(in *ec2.RunInstancesInput) { in.InstanceType = types.InstanceTypeG6Xlarge }); code(err) != "InvalidParameterCombination" {
		t.Errorf("wrong type: %v", err)
	}
	if _, err := run(t, c, 1, false, target("cr-0000000000000dead")); code(err) != "InvalidCapacityReservationId.NotFound" {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := run(t, c, 1, true, target(cr)); code(err) != "InvalidParameterCombination" {
		t.Errorf("spot into a reservation: %v", err)
	}
}

func TestCapacityReservationOpenAndBilled(t *testing.T) {
	s, c := start(t, ec2emu.Options{TimeScale: 100})
	cr := s.AddCapacityReservation(ec2emu.CapacityReservationSpec{InstanceType: "g5.xlarge", Zone: "us-east-1a", Count: 3})
	out, err := run(t, c, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	// preference none: a plain on-demand instance, billed itself
	none, err := run(t, c, 1, false, func(in *ec2.RunInstancesInput) {
		in.CapacityReservationSpecification = &types.CapacityReservationSpecification{CapacityReservationPreference: types.CapacityReservationPreferenceNone}
	})
	if err != nil || aws.ToString(none.Instances[0].CapacityReservationId) != "" {
		t.Fatalf("preference none: %v, in reservation %q", err, aws.ToString(none.Instances[0].CapacityReservationId))
	}
	noneID := aws.ToString(none.Instances[0].InstanceId)
	if got := aws.ToString(out.Instances[0].CapacityReservationId); got != cr {
		t.Fatalf("an on-demand launch matching an open reservation runs in %q, want %s", got, cr)
	}
	eventually(t, "the instance runs", func() bool { return describe(t, c, id).State.Name == types.InstanceStateNameRunning })
	time.Sleep(300 * time.Millisecond) // 30 s emulated
	s.CancelCapacityReservation(cr)
	var inst, plain ec2emu.BillLine
	for _, b := range s.Bill() {
		switch b.InstanceID {
		case id:
			inst = b
		case noneID:
			plain = b
		}
	}
	if inst.Reservation != cr || inst.USDPerHour != 0 || inst.USD != 0 {
		t.Errorf("the instance's bill line = %+v, want reservation %s at $0 (the reservation pays)", inst, cr)
	}
	rb := s.ReservationBill()
	if len(rb) != 1 {
		t.Fatalf("reservation bill = %+v, want one line", rb)
	}
	b := rb[0]
	if plain.USDPerHour <= 0 || math.Abs(b.USDPerHour-3*plain.USDPerHour) > 1e-9 || b.Open || b.Seconds < 30 {
		t.Errorf("reservation line %+v, want closed, >= 30 s, at 3 x the on-demand rate $%.4f/h, used or not", b, plain.USDPerHour)
	}
	if want := float64(b.Seconds) * b.USDPerHour / 3600; math.Abs(b.USD-want) > 1e-9 {
		t.Errorf("reservation USD = %v, want seconds x rate = %v", b.USD, want)
	}
}
