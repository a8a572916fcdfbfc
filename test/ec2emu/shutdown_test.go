package ec2emu_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/test/ec2emu"
)

func TestTerminationReasonsAsEC2ReportsThem(t *testing.T) {
	s, c := start(t, ec2emu.Options{TimeScale: 100, BootDelay: -1, ShutdownDelay: time.Second})
	ctx := context.Background()
	user := launch1(t, c, false)
	waitState(t, c, user, "running")
	before := s.Now().UTC().Truncate(time.Second)
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{user}}); err != nil {
		t.Fatal(err)
	}
	in := describe(t, c, user)
	if in.State.Name != types.InstanceStateNameShuttingDown || aws.ToString(in.StateReason.Code) != "Client.UserInitiatedShutdown" ||
		aws.ToString(in.StateReason.Message) != "Client.UserInitiatedShutdown: User initiated shutdown" {
		t.Errorf("terminating: %s %+v", in.State.Name, in.StateReason)
	}
	if who, at := transitionTime(t, aws.ToString(in.StateTransitionReason)); who != "User" || at.Before(before) || at.After(s.Now().UTC()) {
		t.Errorf("StateTransitionReason %q, terminated at %v", aws.ToString(in.StateTransitionReason), before)
	}
	waitState(t, c, user, "terminated")
	if got := aws.ToString(describe(t, c, user).StateTransitionReason); got != aws.ToString(in.StateTransitionReason) {
		t.Errorf("terminated: %q, want the time it began (%q)", got, aws.ToString(in.StateTransitionReason))
	}
}

func TestInstanceInitiatedShutdownFollowsTheBehaviour(t *testing.T) {
	s, c := start(t, ec2emu.Options{TimeScale: 100, BootDelay: -1, ShutdownDelay: time.Second, StopDelay: time.Second})
	ctx := context.Background()
	term := launch1(t, c, false, func(in *ec2.RunInstancesInput) {
		in.InstanceInitiatedShutdownBehavior = types.ShutdownBehaviorTerminate
	})
	stop := launch1(t, c, false)
	spot := launch1(t, c, true, func(in *ec2.RunInstancesInput) { in.InstanceInitiatedShutdownBehavior = types.ShutdownBehaviorStop })
	for _, id := range []string{term, stop, spot} {
		waitState(t, c, id, "running")
	}
	if err := s.Shutdown(term); err != nil {
		t.Fatal(err)
	}
	// The control endpoint is how a node's poweroff reaches the emulator.
	resp, err := http.Post(s.URL()+"/_emu/shutdown?id="+stop, "", nil)
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("POST /_emu/shutdown: %v %v", resp, err)
	}
	resp.Body.Close()
	if err := s.Shutdown(spot); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, term, "terminated")
	waitState(t, c, stop, "stopped")
	waitState(t, c, spot, "terminated")
	for _, id := range []string{term, stop, spot} {
		in := describe(t, c, id)
		if aws.ToString(in.StateReason.Code) != "Client.InstanceInitiatedShutdown" || aws.ToString(in.StateReason.Message) != "Client.InstanceInitiatedShutdown: Instance initiated shutdown" {
			t.Errorf("%s: %+v", id, in.StateReason)
		}
		transitionTime(t, aws.ToString(in.StateTransitionReason))
		if b := s.BillFor(id); len(b) != 1 || b[0].EndReason != "Client.InstanceInitiatedShutdown" || b[0].Open {
			t.Errorf("%s: bill %+v", id, b)
		}
	}
	if err := s.Shutdown(stop); err == nil {
		t.Error("a stopped instance powered off again")
	}
	a, err := c.DescribeInstanceAttribute(ctx, &ec2.DescribeInstanceAttributeInput{InstanceId: aws.String(term), Attribute: types.InstanceAttributeNameInstanceInitiatedShutdownBehavior})
	if err != nil || aws.ToString(a.InstanceInitiatedShutdownBehavior.Value) != "terminate" {
		t.Errorf("DescribeInstanceAttribute: %+v %v", a, err)
	}
}

func TestTerminatedInstancesVanishAfterRetention(t *testing.T) {
	s, c := start(t, ec2emu.Options{TimeScale: 1000, BootDelay: -1, ShutdownDelay: -1, TerminatedRetention: 10 * time.Minute})
	ctx := context.Background()
	id := launch1(t, c, false)
	keep := launch1(t, c, false)
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, "terminated")
	gone := s.Now()
	eventually(t, "ten emulated minutes", func() bool { return s.Now().Sub(gone) > 11*time.Minute })
	if _, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}}); code(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("describing an instance terminated long ago: %v", err)
	}
	d, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	if err != nil || len(d.Reservations) != 1 || aws.ToString(d.Reservations[0].Instances[0].InstanceId) != keep {
		t.Errorf("listing: %+v %v", d.Reservations, err)
	}
	if _, ok := s.Instance(id); !ok {
		t.Error("the Go API forgot the instance")
	}
}
