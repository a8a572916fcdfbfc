package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/test/stack"
)

// TestScheduledRetirement: EC2 schedules the retirement of the instance a
// checkpointing job runs on, ten minutes out (the emulator's
// DescribeInstanceStatus lists it and AWS Health's EventBridge event
// reaches the interruption queue). burst-sizer drains the node with a
// reason naming the event, signals the job (which checkpoints), requeues
// it and hands the node back: Slurm's SuspendProgram terminates the
// instance long before NotBefore, and the job finishes from its checkpoint
// on a fresh instance. The ledger check follows (start's cleanup).
func TestScheduledRetirement(t *testing.T) {
	versionBlind(t)
	s := start(t, stack.Options{})
	retiredAndReplaced(t, s, `burst_sizer_ec2_events_total{kind="scheduled",outcome="handled"}`)
}

// TestScheduledRetirementPolled: the same retirement with no EventBridge
// rule and no queue at all: burst-sizer finds it by polling
// DescribeInstanceStatus (interruptions.scheduled_poll) and drains,
// checkpoints, requeues and replaces as for AWS Health's event, once
// (a later poll may see the event again while the instance lives).
func TestScheduledRetirementPolled(t *testing.T) {
	versionBlind(t)
	s := start(t, stack.Options{NoEvents: true, Configure: func(c *config.Config) { c.Interruptions.ScheduledPoll = config.D(2 * time.Second) }})
	if s.Cfg.Interruptions.QueueURL != "" {
		t.Fatalf("the stack has an interruption queue (%s); this test is about none", s.Cfg.Interruptions.QueueURL)
	}
	retiredAndReplaced(t, s, `burst_sizer_scheduled_events_polled_total{outcome="handled"}`)
}

// retiredAndReplaced schedules the retirement of a checkpointing job's
// instance and checks burst's answer: the node drained naming the event,
// the job requeued once from its checkpoint, the instance terminated by
// burst before EC2 retires it, the job finished on a new instance, and the
// sizer's counter handled (one event acted on).
func retiredAndReplaced(t *testing.T, s *stack.Stack, handled string) {
	t.Helper()
	const every = 5
	tr := trainingRunning(t, s, 30, every)
	id, logPath, node, first := tr.id, tr.log, tr.node, tr.instance
	notBefore := s.Emu.Now().Add(10 * time.Minute)
	if _, err := s.Emu.ScheduleEvent(first.ID, "instance-retirement", notBefore); err != nil {
		t.Fatal(err)
	}
	if ev := s.Emu.Scheduled(first.ID); len(ev) != 1 || ev[0].Code != "instance-retirement" {
		t.Fatalf("scheduled events of %s: %+v", first.ID, ev)
	}
	var reason string
	eventually(t, 60*time.Second, "the node drained naming the event", func() bool {
		out, _ := s.Cluster.Run(context.Background(), "scontrol", "show", "node", node)
		if i := strings.Index(out, "Reason="); i >= 0 {
			reason = strings.SplitN(out[i:], "\n", 2)[0]
		}
		return strings.Contains(reason, "ec2 scheduled instance-retirement "+first.ID)
	})
	eventually(t, 90*time.Second, "the job requeued by burst-sizer", func() bool { return jobNow(t, s, id).RestartCount == 1 })
	eventually(t, 60*time.Second, "the retiring instance replaced", func() bool {
		in, _ := s.Emu.Instance(first.ID)
		return in.State == "terminated" || in.State == "shutting-down"
	})
	if in, _ := s.Emu.Instance(first.ID); in.StateReasonCode != "Client.UserInitiatedShutdown" {
		t.Errorf("instance %s ended %s; want burst's termination before the retirement", first.ID, in.StateReasonCode)
	}
	waitJob(t, s, id, 3*time.Minute, "COMPLETED")
	text := readFile(logPath)
	if !strings.Contains(text, "on signal; wrote") || !strings.Contains(text, "resumed from checkpoint") || !strings.Contains(text, "done: 30 steps") {
		t.Errorf("the job did not checkpoint on the signal, resume and finish:\n%s", text)
	}
	if second := nodeInstanceOfJob(s, id, first.ID); second == "" {
		t.Errorf("job %s finished without a new instance", id)
	}
	if rc := jobNow(t, s, id).RestartCount; rc != 1 {
		t.Errorf("job %s requeued %d times, want once", id, rc)
	}
	if v := metric(t, s, handled); v != 1 {
		t.Errorf("%s = %v, want 1", handled, v)
	}
	t.Logf("node reason: %s", reason)
}

// nodeInstanceOfJob is an instance launched for job id other than not.
func nodeInstanceOfJob(s *stack.Stack, id, not string) string {
	for _, in := range s.Emu.Instances() {
		if in.Tags[ec2p.TagJobID] == id && in.ID != not {
			return in.ID
		}
	}
	return ""
}
