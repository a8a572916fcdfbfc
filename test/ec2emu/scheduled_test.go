package ec2emu_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/internal/ec2events"
	"github.com/burst-hpc/burst/test/ec2emu"
)

// TestScheduledRetirement: a scheduled retirement is listed by
// DescribeInstanceStatus with its window, reaches the event rule's queue as
// AWS Health's event (which burst's parser accepts), and ends the instance
// at NotBefore with EC2's Server.ScheduledStop.
func TestScheduledRetirement(t *testing.T) {
	s, c := start(t, ec2emu.Options{TimeScale: 1000})
	if _, err := s.AddEventRule(ec2emu.EventRule{Queue: "q"}); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, c, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	eventually(t, "running", func() bool { in, _ := s.Instance(id); return in.State == "running" })
	notBefore := s.Now().Add(10 * time.Minute).Truncate(time.Second)
	if _, err := s.ScheduleEvent(id, "instance-retirement", notBefore); err != nil {
		t.Fatal(err)
	}
	st, err := c.DescribeInstanceStatus(context.Background(), &ec2.DescribeInstanceStatusInput{InstanceIds: []string{id}})
	if err != nil || len(st.InstanceStatuses) != 1 || len(st.InstanceStatuses[0].Events) != 1 {
		t.Fatalf("DescribeInstanceStatus: %v %+v", err, st)
	}
	if e := st.InstanceStatuses[0].Events[0]; e.Code != "instance-retirement" || !aws.ToTime(e.NotBefore).Equal(notBefore) || !aws.ToTime(e.NotAfter).After(notBefore) {
		t.Errorf("event %+v, want instance-retirement from %v", e, notBefore)
	}
	var body string
	for _, e := range s.Events() {
		if e.Event.DetailType == ec2emu.DetailHealth && e.Status == "delivered" {
			body = e.Body
		}
	}
	ev, err := ec2events.Parse([]byte(body), ec2events.Expect{Account: ec2emu.DefaultAccount, Region: "us-east-1"})
	if err != nil || ev.Kind != ec2events.Scheduled || ev.Code != "instance-retirement" || ev.InstanceID != id || !ev.NotBefore.Equal(notBefore) {
		t.Fatalf("the delivered AWS Health event %s parsed as %+v, %v", body, ev, err)
	}
	eventually(t, "retired at NotBefore", func() bool { in, _ := s.Instance(id); return in.State == "terminated" })
	if in, _ := s.Instance(id); in.StateReasonCode != "Server.ScheduledStop" {
		t.Errorf("state reason %q, want Server.ScheduledStop", in.StateReasonCode)
	}
}

// TestScheduledEventsFilteredAndClosed: DescribeInstanceStatus's event.code
// filter returns only instances with such an event; a reboot that has
// happened stays listed with its description beginning [Completed] and
// the instance running; a canceled retirement is listed [Canceled] and
// the instance outlives its NotBefore; an unknown filter is refused.
func TestScheduledEventsFilteredAndClosed(t *testing.T) {
	s, c := start(t, ec2emu.Options{TimeScale: 1000})
	ctx := context.Background()
	out, err := run(t, c, 3, false)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, in := range out.Instances {
		ids = append(ids, aws.ToString(in.InstanceId))
	}
	eventually(t, "running", func() bool {
		for _, id := range ids {
			if in, _ := s.Instance(id); in.State != "running" {
				return false
			}
		}
		return true
	})
	nb := s.Now().Add(90 * time.Minute) // 5.4 s at this time scale: the first look comes before it
	if _, err := s.ScheduleEvent(ids[0], "system-reboot", nb); err != nil {
		t.Fatal(err)
	}
	ret, err := s.ScheduleEvent(ids[1], "instance-retirement", nb)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CancelScheduledEvent(ids[1], ret); err != nil {
		t.Fatal(err)
	}
	codes := []string{"instance-reboot", "instance-retirement", "instance-stop", "system-maintenance", "system-reboot"}
	describe := func() map[string]string {
		st, err := c.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{Filters: []types.Filter{{Name: aws.String("event.code"), Values: codes}}})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, is := range st.InstanceStatuses {
			for _, e := range is.Events {
				got[aws.ToString(is.InstanceId)] = string(e.Code) + " " + aws.ToString(e.Description)
			}
		}
		return got
	}
	if got := describe(); len(got) != 2 || !strings.HasPrefix(got[ids[1]], "instance-retirement [Canceled] ") || strings.HasPrefix(got[ids[0]], "system-reboot [") {
		t.Errorf("events %q; want ids[0]'s reboot to come and ids[1]'s canceled retirement, nothing for ids[2]", got)
	}
	eventually(t, "the reboot completed", func() bool { return strings.HasPrefix(describe()[ids[0]], "system-reboot [Completed] ") })
	for _, id := range ids[:2] {
		if in, _ := s.Instance(id); in.State != "running" {
			t.Errorf("%s is %s after a completed reboot or a canceled retirement, want running", id, in.State)
		}
	}
	if _, err := c.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{Filters: []types.Filter{{Name: aws.String("tag:x"), Values: []string{"y"}}}}); code(err) != "InvalidParameterValue" {
		t.Errorf("an unknown filter: %v, want InvalidParameterValue", err)
	}
}
