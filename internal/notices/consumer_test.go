package notices

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/burst-hpc/burst/internal/awssdk"
	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
	cloudec2 "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/ec2events"
	"github.com/burst-hpc/burst/internal/interruption"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
	"github.com/burst-hpc/burst/test/ec2emu"
)

// emulated is the consumer on the EC2 emulator's SQS endpoint, through the
// real SDK clients: the events EC2 emits reach it through an EventBridge
// rule.
type emulated struct {
	Emu      *ec2emu.Server
	Consumer *Consumer
	Slurm    *slurmfake.Slurm
	Instance cloud.Instance // a spot instance of node a10g-1 running job 7
	Metrics  *prometheus.Registry
}

func startEmulated(t *testing.T, rule ec2emu.EventRule) *emulated {
	t.Helper()
	srv := ec2emu.New(ec2emu.Options{NoticePeriod: time.Hour})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	rule.Queue = "burst-test-interruptions"
	if _, err := srv.AddEventRule(rule); err != nil {
		t.Fatal(err)
	}
	ec := ec2.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxBackoff = 10 * time.Millisecond; o.RateLimiter = ratelimit.None })
		}}, func(o *ec2.Options) { o.BaseEndpoint = aws.String(srv.URL()) })
	p, err := cloudec2.New(ec, cloudec2.Options{Cluster: "demo", ImageID: "ami-0abc", Subnets: map[string]string{"us-east-1a": "subnet-a"}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := p.Launch(ctx, cloud.LaunchRequest{Cluster: "demo", Nodes: []cloud.NodeSpec{{Node: "a10g-1", JobID: 7}},
		Offerings: []cloud.Offering{{InstanceType: "g5.xlarge", Zone: "us-east-1a", Capacity: capacity.Spot}}})
	if err != nil {
		t.Fatal(err)
	}
	sl := slurmfake.New([]slurm.Job{{ID: 7, State: "RUNNING", Nodes: "a10g-1", StartTime: time.Now().Add(-time.Hour)}},
		[]slurm.Node{{Name: "a10g-1", State: "MIXED", Flags: []string{"NOT_RESPONDING"}}})
	ops := interruption.SlurmClient{C: sl}
	h, err := interruption.New(ops, interruption.Options{CheckpointRoot: t.TempDir(), By: "sizer"})
	if err != nil {
		t.Fatal(err)
	}
	q, err := NewSQSClient(ctx, awssdk.Options{Region: "us-east-1", Endpoint: srv.URL(), StaticCredentials: true})
	if err != nil {
		t.Fatal(err)
	}
	url, _ := srv.QueueURL(rule.Queue)
	reg := prometheus.NewRegistry()
	c, err := New(q, p, &memStore{}, h, ops, Options{QueueURL: url, Expect: ec2events.Expect{Account: ec2emu.DefaultAccount, Region: "us-east-1"},
		AgentWait: 50 * time.Millisecond, Wait: time.Second, Registerer: reg, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return &emulated{Emu: srv, Consumer: c, Slurm: sl, Instance: res.Instances[0], Metrics: reg}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	giveUp := time.Now().Add(time.Minute) // a hang guard, not a performance bound
	for !cond() {
		if time.Now().After(giveUp) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConsumerOnTheEmulator: the emulator interrupts the instance; the
// EventBridge rule delivers the warning twice (at-least-once) and the
// instance's state changes; a stranger's message sits in the queue too.
// The consumer requeues the job once (its node is unreachable: no
// checkpoint), drops the stranger's message, and empties the queue, calling
// only ReceiveMessage and DeleteMessage on SQS.
func TestConsumerOnTheEmulator(t *testing.T) {
	e := startEmulated(t, ec2emu.EventRule{DuplicateFraction: 1, DetailTypes: []string{ec2emu.DetailSpotInterruption}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, _ := e.Emu.QueueURL("burst-test-interruptions")
	sender, _ := NewSQSClient(ctx, awssdk.Options{Region: "us-east-1", Endpoint: e.Emu.URL(), StaticCredentials: true})
	if _, err := sender.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(`{"source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning"}`)}); err != nil {
		t.Fatal(err)
	}
	e.Emu.ResetCalls()
	done := make(chan error)
	go func() { done <- e.Consumer.Run(ctx) }()
	if err := e.Emu.Interrupt(e.Instance.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job requeued", func() bool { return slices.Contains(e.Slurm.Calls(), "requeue 7") })
	count := func(kind, outcome string) float64 {
		var m dto.Metric
		e.Consumer.count.WithLabelValues(kind, outcome).Write(&m)
		return m.GetCounter().GetValue()
	}
	waitFor(t, "every message handled", func() bool {
		return count("spot-interruption", OutcomeRequeued) == 1 && count("spot-interruption", OutcomeDuplicate) == 1 && count("invalid", "dropped") == 1
	})
	waitFor(t, "the queue empty", func() bool { return e.Emu.CallCount("DeleteMessage") == 3 })
	cancel()
	<-done
	if n := strings.Count(strings.Join(e.Slurm.Calls(), "\n"), "requeue 7"); n != 1 {
		t.Errorf("job requeued %d times", n)
	}
	var sqsActions []string
	for _, a := range e.Emu.IAMActions() {
		if strings.HasPrefix(a, "sqs:") {
			sqsActions = append(sqsActions, a)
		}
	}
	if !slices.Equal(sqsActions, Actions) {
		t.Errorf("the consumer called %v, want exactly %v", sqsActions, Actions)
	}
}

// A consumer whose sizer no longer leads (Fence fails) handles nothing:
// the job is not requeued and the message is not deleted (it comes back
// to the leader after the visibility timeout).
func TestConsumerFenced(t *testing.T) {
	e := startEmulated(t, ec2emu.EventRule{DetailTypes: []string{ec2emu.DetailSpotInterruption}})
	var fenced atomic.Int32
	e.Consumer.o.Fence = func(context.Context) error { fenced.Add(1); return errors.New("deposed") }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.Emu.ResetCalls()
	done := make(chan error)
	go func() { done <- e.Consumer.Run(ctx) }()
	if err := e.Emu.Interrupt(e.Instance.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the message reaching the fence", func() bool { return fenced.Load() >= 1 })
	cancel()
	<-done
	if slices.Contains(e.Slurm.Calls(), "requeue 7") {
		t.Error("a fenced consumer requeued the job")
	}
	if n := e.Emu.CallCount("DeleteMessage"); n != 0 {
		t.Errorf("a fenced consumer deleted %d messages", n)
	}
}
