package iampolicy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/awssdk"
	cloudec2 "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/ec2events"
	"github.com/burst-hpc/burst/internal/interruption"
	"github.com/burst-hpc/burst/internal/notices"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
	"github.com/burst-hpc/burst/test/ec2emu"
)

// readInterruptionQueue runs burst-sizer's interruption-queue reader (as
// burst-sizer serve builds it: the real SQS client) on the emulator until
// it has received and deleted an event EC2 sent and a message it drops, so
// that the emulator records every SQS action it calls. It returns the
// queue's ARN, as burst.yaml's queue URL gives it.
func readInterruptionQueue(t *testing.T, srv *ec2emu.Server, p *cloudec2.Provider) string {
	t.Helper()
	const name = "burst-prod-interruptions"
	if _, err := srv.AddEventRule(ec2emu.EventRule{Queue: name}); err != nil {
		t.Fatal(err)
	}
	// a state change after the rule exists, so the queue has an event
	// whatever the steps' instances did before it (on a loaded machine
	// and the emulator's clock at 1000x, all of them may have settled);
	// TerminateInstances is among the recorded actions already
	if _, err := p.Terminate(context.Background(), []string{"gpu-2"}); err != nil {
		t.Fatal(err)
	}
	qurl := "https://sqs.us-east-1.amazonaws.com/" + ec2emu.DefaultAccount + "/" + name
	q, err := config.ParseQueueURL(qurl)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sqsc, err := notices.NewSQSClient(ctx, awssdk.Options{Region: "us-east-1", Endpoint: srv.URL(), StaticCredentials: true})
	if err != nil {
		t.Fatal(err)
	}
	sl := slurmfake.New(nil, nil)
	ops := interruption.SlurmClient{C: sl}
	h, err := interruption.New(ops, interruption.Options{CheckpointRoot: t.TempDir(), By: "sizer"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := notices.New(sqsc, p, memStore{}, h, ops, notices.Options{QueueURL: qurl, Expect: ec2events.Expect{Account: q.Account, Region: "us-east-1"}, Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	// gpu-2's state-change events are in the queue
	giveUp := time.Now().Add(time.Minute) // hang guard only
	for srv.CallCount("DeleteMessage") == 0 {
		if time.Now().After(giveUp) {
			t.Fatal("the reader deleted no message in a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	return q.ARN("")
}

type memStore struct{ notices.Store }

func TestQueueURLIsTheARNsSource(t *testing.T) {
	q, err := config.ParseQueueURL("https://sqs.us-east-1.amazonaws.com/123456789012/burst-prod-interruptions")
	if err != nil || q.ARN("") != "arn:aws:sqs:us-east-1:123456789012:burst-prod-interruptions" || !strings.HasPrefix(q.ARN("aws-us-gov"), "arn:aws-us-gov:sqs:") {
		t.Fatalf("%+v %v", q, err)
	}
}
