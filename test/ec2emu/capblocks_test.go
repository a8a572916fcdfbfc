package ec2emu_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/test/ec2emu"
)

func blockMarket(in *ec2.RunInstancesInput) {
	in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeCapacityBlock}
}

func describeCR(t *testing.T, c *ec2.Client, id string) types.CapacityReservation {
	t.Helper()
	d, err := c.DescribeCapacityReservations(context.Background(), &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{id}})
	if err != nil || len(d.CapacityReservations) != 1 {
		t.Fatalf("DescribeCapacityReservations %s: %+v %v", id, d, err)
	}
	return d.CapacityReservations[0]
}

// A Capacity Block: scheduled (no room) before its window, launchable only
// with the capacity-block market type while active, its instances reclaimed
// 30 minutes before its end, its price billed once.
func TestCapacityBlockWindow(t *testing.T) {
	// 1 s of wall time is 5 emulated minutes
	s, c := start(t, ec2emu.Options{TimeScale: 300, BootDelay: 10 * time.Second, ShutdownDelay: 10 * time.Second})
	now := s.Now()
	start, end := now.Add(20*time.Minute), now.Add(80*time.Minute)
	id, err := s.AddCapacityBlock(ec2emu.CapacityBlockSpec{InstanceType: "g5.xlarge", Zone: "us-east-1a", Count: 2, Start: start, End: end, UpfrontUSD: 123.45})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddCapacityBlock(ec2emu.CapacityBlockSpec{InstanceType: "g5.xlarge", Zone: "us-east-1a", Count: 1, Start: end, End: start}); err == nil {
		t.Error("a block that ends before it starts was accepted")
	}
	r := describeCR(t, c, id)
	if r.ReservationType != types.CapacityReservationTypeCapacityBlock || r.State != types.CapacityReservationStateScheduled || aws.ToInt32(r.AvailableInstanceCount) != 0 ||
		!aws.ToTime(r.StartDate).Equal(start.Truncate(time.Second)) || !aws.ToTime(r.EndDate).Equal(end.Truncate(time.Second)) {
		t.Errorf("before its window: %s %s available %d start %v end %v; want capacity-block scheduled 0 %v %v", r.ReservationType, r.State,
			aws.ToInt32(r.AvailableInstanceCount), aws.ToTime(r.StartDate), aws.ToTime(r.EndDate), start, end)
	}
	if _, err := run(t, c, 1, false, target(id), blockMarket); code(err) != "ReservationCapacityExceeded" {
		t.Errorf("a launch before the window: %v, want ReservationCapacityExceeded", err)
	}
	if _, err := run(t, c, 1, false, target(id)); code(err) != "InvalidParameterCombination" {
		t.Errorf("a launch into the block without the capacity-block market type: %v, want InvalidParameterCombination", err)
	}
	if _, err := run(t, c, 1, false, blockMarket); code(err) != "InvalidParameterCombination" {
		t.Errorf("the capacity-block market type with no block targeted: %v, want InvalidParameterCombination", err)
	}
	eventually(t, "the block becomes active", func() bool { return describeCR(t, c, id).State == types.CapacityReservationStateActive })
	out, err := run(t, c, 2, false, target(id), blockMarket)
	if err != nil {
		t.Fatalf("launching 2 into the active block: %v", err)
	}
	var ids []string
	for _, in := range out.Instances {
		ids = append(ids, aws.ToString(in.InstanceId))
		if aws.ToString(in.CapacityReservationId) != id || in.InstanceLifecycle != types.InstanceLifecycleTypeCapacityBlock {
			t.Errorf("instance %s: reservation %q lifecycle %q, want %s capacity-block", aws.ToString(in.InstanceId), aws.ToString(in.CapacityReservationId), in.InstanceLifecycle, id)
		}
	}
	eventually(t, "the block's instances are terminated before its end", func() bool {
		for _, id := range ids {
			if in := describe(t, c, id); in.State.Name != types.InstanceStateNameTerminated {
				return false
			}
		}
		return true
	})
	reclaim := end.Add(-ec2emu.BlockReclaimLead).Truncate(time.Second)
	for _, b := range s.Bill() {
		if b.End.Before(reclaim) || !b.End.Before(end) || b.EndReason != "Server.ScheduledStop" || b.USD != 0 {
			t.Errorf("instance %s ended %v (%s) billed $%.4f; want at %v (30 min before the end), Server.ScheduledStop, $0 (the block is prepaid)",
				b.InstanceID, b.End, b.EndReason, b.USD, reclaim)
		}
	}
	if n := s.Now(); n.Before(end) {
		if _, err := run(t, c, 1, false, target(id), blockMarket); code(err) != "ReservationCapacityExceeded" {
			t.Errorf("a launch in the block's last 30 minutes: %v, want ReservationCapacityExceeded", err)
		}
	}
	eventually(t, "the block expires", func() bool { return describeCR(t, c, id).State == types.CapacityReservationStateExpired })
	var lines []ec2emu.ReservationBillLine
	for _, l := range s.ReservationBill() {
		if l.ReservationID == id {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !lines[0].Prepaid || lines[0].USD != 123.45 || lines[0].Seconds != int64(end.Truncate(time.Second).Sub(start.Truncate(time.Second))/time.Second) {
		t.Errorf("the block's bill: %+v, want one prepaid line of $123.45 over its 60-minute window", lines)
	}
}
