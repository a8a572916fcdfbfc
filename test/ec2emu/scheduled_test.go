package ec2emu_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

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
