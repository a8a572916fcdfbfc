package ec2emu_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/test/ec2emu"
)

// stopStart stops a running instance, waits for stopped, starts it and
// waits for running.
func stopStart(t *testing.T, c *ec2.Client, id string) {
	t.Helper()
	ctx := context.Background()
	out, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}})
	if err != nil || out.StoppingInstances[0].CurrentState.Name != types.InstanceStateNameStopping || out.StoppingInstances[0].PreviousState.Name != types.InstanceStateNameRunning {
		t.Fatalf("StopInstances: %+v %v", out, err)
	}
	waitState(t, c, id, "stopped")
	st, err := c.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{id}})
	if err != nil || st.StartingInstances[0].CurrentState.Name != types.InstanceStateNamePending || st.StartingInstances[0].PreviousState.Name != types.InstanceStateNameStopped {
		t.Fatalf("StartInstances: %+v %v", st, err)
	}
	waitState(t, c, id, "running")
}

var transition = regexp.MustCompile(`^(User|Service) initiated \((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) GMT\)$`)

// transitionTime parses EC2's StateTransitionReason.
func transitionTime(t *testing.T, reason string) (string, time.Time) {
	t.Helper()
	m := transition.FindStringSubmatch(reason)
	if m == nil {
		t.Fatalf("StateTransitionReason %q is not EC2's \"User|Service initiated (YYYY-MM-DD HH:MM:SS GMT)\"", reason)
	}
	at, err := time.Parse("2006-01-02 15:04:05", m[2])
	if err != nil {
		t.Fatal(err)
	}
	return m[1], at
}

func TestStopStartLifecycleCapacityAndHooks(t *testing.T) {
	var mu sync.Mutex
	hooks := map[string][]string{}
	s, c := start(t, ec2emu.Options{TimeScale: 100, BootDelay: 2 * time.Second, StopDelay: 2 * time.Second, StartDelay: time.Second,
		OnStart: func(in ec2emu.Instance) {
			mu.Lock()
			defer mu.Unlock()
			hooks[in.ID] = append(hooks[in.ID], fmt.Sprintf("start %s %d", in.State, in.Starts))
		},
		OnStop: func(in ec2emu.Instance) {
			mu.Lock()
			defer mu.Unlock()
			hooks[in.ID] = append(hooks[in.ID], "stop "+in.State)
		},
	})
	ctx := context.Background()
	s.SetCapacity("g5.xlarge", "us-east-1a", "on-demand", 1)
	id := launch1(t, c, false)
	if _, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}}); code(err) != "IncorrectInstanceState" {
		t.Errorf("stopping a pending instance: %v", err)
	}
	waitState(t, c, id, "running")
	launched := aws.ToTime(describe(t, c, id).LaunchTime)

	before := s.Now()
	if _, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, "stopped")
	in := describe(t, c, id)
	if in.StateReason == nil || aws.ToString(in.StateReason.Code) != "Client.UserInitiatedShutdown" || aws.ToString(in.PrivateIpAddress) == "" {
		t.Errorf("stopped instance: reason %+v ip %q", in.StateReason, aws.ToString(in.PrivateIpAddress))
	}
	if who, at := transitionTime(t, aws.ToString(in.StateTransitionReason)); who != "User" || at.Before(before.UTC().Truncate(time.Second)) || at.After(s.Now().UTC()) {
		t.Errorf("transition %q, stop requested at %v", aws.ToString(in.StateTransitionReason), before.UTC())
	}
	d, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"stopped"}}}})
	if err != nil || len(d.Reservations) != 1 || aws.ToString(d.Reservations[0].Instances[0].InstanceId) != id {
		t.Errorf("filter instance-state-name=stopped: %+v %v", d.Reservations, err)
	}
	// Stopped, it holds no capacity: another instance takes the slot, and
	// the start finds the pool dry.
	if got := s.Capacity("g5.xlarge", "us-east-1a", "on-demand"); got != 1 {
		t.Errorf("capacity while stopped = %d, want 1", got)
	}
	other := launch1(t, c, false)
	waitState(t, c, other, "running")
	if _, err := c.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{id}}); code(err) != "InsufficientInstanceCapacity" {
		t.Errorf("start with a dry pool: %v", err)
	}
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{other}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, other, "terminated")
	st, err := c.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{id}})
	if err != nil || st.StartingInstances[0].CurrentState.Name != types.InstanceStateNamePending {
		t.Fatalf("start: %+v %v", st, err)
	}
	if got := s.Capacity("g5.xlarge", "us-east-1a", "on-demand"); got != 0 {
		t.Errorf("capacity after start = %d, want 0", got)
	}
	waitState(t, c, id, "running")
	in = describe(t, c, id)
	if in.StateReason != nil || aws.ToString(in.StateTransitionReason) != "" || !aws.ToTime(in.LaunchTime).After(launched) {
		t.Errorf("restarted: reason %+v %q launch %v (first %v)", in.StateReason, aws.ToString(in.StateTransitionReason), in.LaunchTime, launched)
	}
	// Starting a running instance is a no-op; a terminated one cannot start.
	st, err = c.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{id}})
	if err != nil || st.StartingInstances[0].CurrentState.Name != types.InstanceStateNameRunning || st.StartingInstances[0].PreviousState.Name != types.InstanceStateNameRunning {
		t.Errorf("start running: %+v %v", st, err)
	}
	if _, err := c.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{other}}); code(err) != "IncorrectInstanceState" {
		t.Errorf("start terminated: %v", err)
	}
	_ = s.Close() // waits for the hooks
	mu.Lock()
	defer mu.Unlock()
	if got, want := strings.Join(hooks[id], "; "), "start running 1; stop stopping; start running 2"; got != want {
		t.Errorf("hooks of the stopped and started instance: %s, want %s", got, want)
	}
	if got, want := strings.Join(hooks[other], "; "), "start running 1; stop shutting-down"; got != want {
		t.Errorf("hooks of the other instance: %s, want %s", got, want)
	}
}

func TestStopRulesOfEC2(t *testing.T) {
	_, c := start(t, ec2emu.Options{BootDelay: -1})
	ctx := context.Background()
	spot := launch1(t, c, true)
	waitState(t, c, spot, "running")
	if _, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{spot}}); code(err) != "UnsupportedOperation" {
		t.Errorf("stopping a one-time spot instance: %v", err)
	}
	if _, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{"i-0000000000000dead"}}); code(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("stopping an unknown instance: %v", err)
	}
	od := launch1(t, c, false)
	waitState(t, c, od, "running")
	if _, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{od}, Hibernate: aws.Bool(true)}); code(err) != "UnsupportedHibernationConfiguration" {
		t.Errorf("hibernate: %v", err)
	}
	a, err := c.DescribeInstanceAttribute(ctx, &ec2.DescribeInstanceAttributeInput{InstanceId: aws.String(od), Attribute: types.InstanceAttributeNameInstanceInitiatedShutdownBehavior})
	if err != nil || aws.ToString(a.InstanceInitiatedShutdownBehavior.Value) != "stop" {
		t.Errorf("default shutdown behaviour: %+v %v", a, err)
	}
}
