package ec2emu_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/test/ec2emu"
)

// allOrNothing asks for n on-demand instances with MinTargetCapacity n.
func allOrNothing(t *testing.T, c *ec2.Client, n int32) *ec2.CreateFleetOutput {
	t.Helper()
	ctx := context.Background()
	if _, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("lt"),
		LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String("ami-1")}}); err != nil && code(err) != "InvalidLaunchTemplateName.AlreadyExistsException" {
		t.Fatal(err)
	}
	out, err := c.CreateFleet(ctx, &ec2.CreateFleetInput{Type: types.FleetTypeInstant,
		LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("lt")},
			Overrides:                   []types.FleetLaunchTemplateOverridesRequest{{InstanceType: "g5.xlarge", SubnetId: aws.String("subnet-a")}}}},
		OnDemandOptions:             &types.OnDemandOptionsRequest{MinTargetCapacity: aws.Int32(n), SingleAvailabilityZone: aws.Bool(true), SingleInstanceType: aws.Bool(true)},
		TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(n), DefaultTargetCapacityType: types.DefaultTargetCapacityTypeOnDemand},
		TagSpecifications:           []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String("burst:cluster"), Value: aws.String("c")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func fleetIDs(out *ec2.CreateFleetOutput) []string {
	var ids []string
	for _, fi := range out.Instances {
		ids = append(ids, fi.InstanceIds...)
	}
	return ids
}

func TestShortFleets(t *testing.T) {
	s, c := start(t, ec2emu.Options{BootDelay: -1})
	if err := s.ShortFleets(1, 0); err == nil {
		t.Error("missing 0 accepted")
	}
	if err := s.ShortFleets(1, 1); err != nil {
		t.Fatal(err)
	}
	out := allOrNothing(t, c, 3)
	if ids := fleetIDs(out); len(ids) != 2 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "InsufficientInstanceCapacity" {
		t.Fatalf("short fleet: %d instances %v, errors %+v; want 2 and an InsufficientInstanceCapacity", len(ids), ids, out.Errors)
	}
	if s.ShortFleeted() != 1 {
		t.Errorf("ShortFleeted = %d", s.ShortFleeted())
	}
	// used up: the next fleet is whole again
	if ids := fleetIDs(allOrNothing(t, c, 2)); len(ids) != 2 {
		t.Fatalf("after the short fleet: %v", ids)
	}
	// a fleet of one is never cut to nothing
	s.ShortFleets(1, 5)
	if ids := fleetIDs(allOrNothing(t, c, 1)); len(ids) != 1 {
		t.Fatalf("fleet of one: %v", ids)
	}
	if ids := fleetIDs(allOrNothing(t, c, 4)); len(ids) != 1 {
		t.Fatalf("fleet of 4 short by 5: %v, want 1", ids)
	}
}

func TestDescribeLag(t *testing.T) {
	s, c := start(t, ec2emu.Options{BootDelay: -1, TimeScale: 10})
	if err := s.SetDescribeLag(20*time.Second, 40*time.Second); err != nil { // emulated: 2 s and 4 s
		t.Fatal(err)
	}
	id := launch1(t, c, false)
	ctx := context.Background()
	if _, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}}); code(err) != "InvalidInstanceID.NotFound" {
		t.Fatalf("a new instance asked for by id: %v, want InvalidInstanceID.NotFound", err)
	}
	byTag := func() int {
		d, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String("tag:burst:node"), Values: []string{"gpu-1"}}}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range d.Reservations {
			n += len(r.Instances)
		}
		return n
	}
	if n := byTag(); n != 0 {
		t.Fatalf("a new instance listed by tag: %d", n)
	}
	eventually(t, "the instance listed", func() bool {
		_, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		return err == nil
	})
	if len(describe(t, c, id).Tags) == 0 && byTag() != 0 {
		t.Fatal("listed without tags, yet a tag filter matched")
	}
	eventually(t, "its tags", func() bool { return len(describe(t, c, id).Tags) > 0 && byTag() == 1 })
	// the emulator's own view (tests, hooks) is never behind
	if in, ok := s.Instance(id); !ok || in.Tags["burst:node"] != "gpu-1" {
		t.Errorf("Instance(%s) = %+v", id, in)
	}
}

func TestHoldCallsAndDelay(t *testing.T) {
	s, c := start(t, ec2emu.Options{BootDelay: -1})
	h := s.HoldCalls("RunInstances")
	done := make(chan string, 1)
	go func() { done <- launch1(t, c, false) }()
	select {
	case <-h.Arrived():
	case <-time.After(20 * time.Second):
		t.Fatal("the held call never arrived")
	}
	if len(s.Live()) != 1 {
		t.Fatalf("a held call has not taken effect: %d live", len(s.Live()))
	}
	select {
	case <-done:
		t.Fatal("a held call answered before its release")
	default:
	}
	h.Release()
	if id := <-done; id != s.Live()[0].ID {
		t.Errorf("answered %s, launched %s", id, s.Live()[0].ID)
	}
	// a latency-only fault delays and then succeeds
	s.InjectFault(ec2emu.Fault{Action: "DescribeInstances", Delay: 300 * time.Millisecond, Count: 1})
	t0 := time.Now()
	if _, err := c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{}); err != nil {
		t.Fatal(err)
	}
	if time.Since(t0) < 300*time.Millisecond {
		t.Errorf("delayed call answered after %v", time.Since(t0))
	}
	resp, err := http.Post(s.URL()+"/_emu/fault", "application/json", strings.NewReader(`{"Action":"DescribeInstances"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("a fault with neither Code nor Delay: status %d, want 400", resp.StatusCode)
	}
	resp, err = http.Post(s.URL()+"/_emu/fault", "application/json", strings.NewReader(`{"Action":"DescribeInstances","Delay":"10ms","Count":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 {
		t.Errorf("a Delay fault: status %d, want 204", resp.StatusCode)
	}
}

func TestCrash(t *testing.T) {
	s, c := start(t, ec2emu.Options{BootDelay: time.Hour})
	id := launch1(t, c, false)
	if err := s.Crash(id); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, "shutting-down|terminated")
	in, _ := s.Instance(id)
	if in.StateReasonCode != "Server.InternalError" {
		t.Errorf("StateReasonCode %q", in.StateReasonCode)
	}
	if err := s.Crash(id); err == nil {
		t.Error("crashed a dead instance")
	}
}
