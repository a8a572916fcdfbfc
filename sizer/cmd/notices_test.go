package cmd

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/ec2events"
	"github.com/burst-hpc/burst/internal/interruption"
	"github.com/burst-hpc/burst/internal/notices"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
)

// oneBatch is an SQS queue that hands out its messages once, then nothing.
type oneBatch struct {
	msgs    []sqstypes.Message
	deleted chan string
}

func (q *oneBatch) ReceiveMessage(ctx context.Context, _ *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	m := q.msgs
	q.msgs = nil
	if len(m) == 0 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &sqs.ReceiveMessageOutput{Messages: m}, nil
}

func (q *oneBatch) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	q.deleted <- aws.ToString(in.ReceiptHandle)
	return &sqs.DeleteMessageOutput{}, nil
}

type noAnnouncements struct{}

func (noAnnouncements) Interruptions(context.Context, time.Time) ([]sizerapi.Interruption, error) {
	return nil, nil
}
func (noAnnouncements) AddInterruption(context.Context, sizerapi.Interruption) error { return nil }

type noInstances struct{}

func (noInstances) List(context.Context) ([]cloud.Instance, error) { return nil, nil }

// readInterruptionQueue registers the interruption-queue reader's metrics
// on reg, as burst-sizer serve does, and has it read a message that is not
// an event and a spot warning for an instance that is not the cluster's.
func readInterruptionQueue(t *testing.T, reg prometheus.Registerer, fs *slurmfake.Slurm) {
	t.Helper()
	spot := `{"version":"0","id":"e1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012",` +
		`"time":"2026-12-01T11:32:00Z","region":"us-east-1","resources":["arn:aws:ec2:us-east-1a:instance/i-00b0000000000000a"],` +
		`"detail":{"instance-id":"i-00b0000000000000a","instance-action":"terminate"}}`
	q := &oneBatch{deleted: make(chan string, 2), msgs: []sqstypes.Message{{Body: aws.String("hello"), ReceiptHandle: aws.String("r1")},
		{Body: aws.String(spot), ReceiptHandle: aws.String("r2")}}}
	ops := interruption.SlurmClient{C: fs}
	h, err := interruption.New(ops, interruption.Options{CheckpointRoot: t.TempDir(), By: "sizer"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := notices.New(q, noInstances{}, noAnnouncements{}, h, ops, notices.Options{QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/q",
		Expect: ec2events.Expect{Account: "123456789012", Region: "us-east-1"}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	for range 2 {
		<-q.deleted
	}
	cancel()
	<-done
}
