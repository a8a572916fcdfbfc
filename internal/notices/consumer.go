// Package notices is burst-sizer serve's reader of EC2's EventBridge
// events: it long-polls the SQS queue an EventBridge rule delivers them to,
// validates each (internal/ec2events: source, detail type, account, region,
// exact identifiers, bounded size), keeps only the cluster's instances (by
// their cluster tag, through the EC2 provider's DescribeInstances), and acts
// through the same code as the node agent (internal/interruption):
//
//   - a spot interruption warning or a rebalance recommendation is left to
//     the node's agent when it announced that notice to the sizer within
//     AgentWait (it does so as soon as IMDS shows it); then, for an
//     interruption, a watchdog requeues at once whatever run is still on
//     the node shortly before EC2's deadline (an agent that died mid-way);
//   - otherwise (a dead agent, a wedged node) the sizer drains the node,
//     checkpoints and requeues its jobs (at once, without the checkpoint
//     signal, when Slurm cannot reach the node) and hands the node back, or
//     drains it on a rebalance recommendation;
//   - every state change goes to the spend ledger (Options.StateChange:
//     EC2 bills from running to stopping or shutting-down), and one to
//     stopping, stopped, shutting-down or terminated makes the reconciler
//     run a pass at once.
//
// Duplicates (EventBridge and SQS standard queues deliver at least once)
// are dropped by event; requeueing twice is prevented on Slurm's side (a
// job is requeued only while the run that was on the node is still there).
// A message is deleted once handled; one whose handling failed before
// anything was done comes back after the visibility timeout.
package notices

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/ec2events"
	"github.com/burst-hpc/burst/internal/interruption"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

// KindInvalid is the kind label of a message that is not an event burst
// reads (the others are ec2events.Kind values).
const KindInvalid = "invalid"

// Instances lists the cluster's instances (cloud.Provider's List: one
// DescribeInstances filtered by the cluster tag).
type Instances interface {
	List(ctx context.Context) ([]cloud.Instance, error)
}

// Store is where agents' announcements are and the sizer's own go (the
// sizer's state: sizer/store).
type Store interface {
	// Interruptions returns notices at or after since, newest first.
	Interruptions(ctx context.Context, since time.Time) ([]sizerapi.Interruption, error)
	AddInterruption(ctx context.Context, in sizerapi.Interruption) error
}

// Options configure a Consumer. Zero values take the defaults noted.
type Options struct {
	QueueURL string
	// Expect: the cluster's account and region.
	Expect ec2events.Expect
	// AgentWait is how long a notice is left to the node's agent; default 10 s.
	AgentWait time.Duration
	// Reserve is the handler's (time kept before EC2's deadline); the
	// watchdog looks at Deadline - Reserve/2; default 20 s.
	Reserve time.Duration
	// Visibility is the receive visibility timeout: longer than any
	// handling (the watchdog waits until shortly before the deadline, two
	// minutes after the event); default 5 minutes.
	Visibility time.Duration
	// Wait is the long-poll wait; default 20 s (SQS's maximum).
	Wait time.Duration
	// Concurrency bounds messages handled at once; default 16.
	Concurrency int
	// Kick asks the reconciler for a pass now (may be nil).
	Kick func()
	// StateChange records each of EC2's state changes for the spend
	// ledger (sizer/store's RecordState; may be nil). An error leaves the
	// message in the queue, to come back after the visibility timeout.
	StateChange func(ctx context.Context, instanceID, state string, at time.Time) error
	// Fence, when set, is asked before each message is handled
	// (sizer/store's Fence: whether this sizer still leads); on an error
	// the message stays in the queue for the leader.
	Fence func(ctx context.Context) error
	// Scheduled acts on EC2's scheduled events; nil: one of the
	// Consumer's own (the sizer shares one with its DescribeInstanceStatus
	// Poller, so an event both report is acted on once).
	Scheduled *Scheduled
	// Poll is how often the agent's announcement is looked for; default 500 ms.
	Poll       time.Duration
	Now        func() time.Time
	Sleep      func(ctx context.Context, d time.Duration) // default: a timer
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Consumer reads and acts on the queue.
type Consumer struct {
	q     SQS
	inst  Instances
	st    Store
	h     *interruption.Handler
	ops   interruption.SlurmOps
	sched *Scheduled
	o     Options
	log   *slog.Logger
	count *prometheus.CounterVec

	mu   sync.Mutex
	seen map[string]time.Time // event key -> when first seen
}

// New returns a Consumer. h acts on jobs (By "sizer"), ops is the same
// Slurm it uses.
func New(q SQS, inst Instances, st Store, h *interruption.Handler, ops interruption.SlurmOps, o Options) (*Consumer, error) {
	if q == nil || inst == nil || st == nil || h == nil || ops == nil {
		return nil, errors.New("creating the EventBridge consumer: SQS, instances, store, handler and Slurm are all required")
	}
	if o.QueueURL == "" || o.Expect.Region == "" {
		return nil, errors.New("creating the EventBridge consumer: a queue URL and the cluster's region are required")
	}
	if o.AgentWait <= 0 {
		o.AgentWait = 10 * time.Second
	}
	if o.Reserve <= 0 {
		o.Reserve = 20 * time.Second
	}
	if o.Visibility <= 0 {
		o.Visibility = 5 * time.Minute
	}
	if o.Wait <= 0 || o.Wait > 20*time.Second {
		o.Wait = 20 * time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = func(ctx context.Context, d time.Duration) {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Consumer{q: q, inst: inst, st: st, h: h, ops: ops, sched: o.Scheduled, o: o, log: o.Logger.With("component", "eventbridge"), seen: map[string]time.Time{}}
	if c.sched == nil {
		var err error
		if c.sched, err = NewScheduled(inst, h, ops, o.Now, o.Logger); err != nil {
			return nil, err
		}
	}
	c.count = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "burst_sizer_ec2_events_total",
		Help: "EC2 EventBridge events read from the interruption queue, by kind and what burst-sizer did (agent: left to the node's agent)."}, []string{"kind", "outcome"})
	if o.Registerer != nil {
		if err := o.Registerer.Register(c.count); err != nil {
			return nil, fmt.Errorf("creating the EventBridge consumer: %w", err)
		}
	}
	return c, nil
}

// Run long-polls the queue until ctx ends. Receive errors are logged (once
// per streak) and retried after a pause; they never stop it.
func (c *Consumer) Run(ctx context.Context) error {
	sem := make(chan struct{}, c.o.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	failing := false
	c.log.Info("reading EC2 events", "queue", c.o.QueueURL, "agent_wait", c.o.AgentWait)
	for ctx.Err() == nil {
		out, err := c.q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(c.o.QueueURL), MaxNumberOfMessages: 10,
			WaitTimeSeconds: int32(c.o.Wait / time.Second), VisibilityTimeout: int32(c.o.Visibility / time.Second)})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if !failing {
				c.log.Error("receiving from the interruption queue; retrying", "queue", c.o.QueueURL, "err", err)
			}
			failing = true
			c.o.Sleep(ctx, 5*time.Second)
			continue
		}
		if failing {
			c.log.Info("receiving from the interruption queue recovered")
			failing = false
		}
		for _, m := range out.Messages {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				c.message(ctx, aws.ToString(m.MessageId), aws.ToString(m.Body), aws.ToString(m.ReceiptHandle))
			}()
		}
	}
	return nil
}

// message handles one SQS message and deletes it unless it should come
// back (a failure before anything was done).
func (c *Consumer) message(ctx context.Context, id, body, handle string) {
	log := c.log.With("message_id", id)
	ev, err := ec2events.Parse([]byte(body), c.o.Expect)
	if err != nil {
		// not an event burst acts on: dropped (never retried), said loudly
		log.Warn("dropping a message from the interruption queue", "err", err, "bytes", len(body))
		c.count.WithLabelValues(KindInvalid, OutcomeDropped).Inc()
		c.delete(ctx, handle, log)
		return
	}
	if c.o.Fence != nil {
		if err := c.o.Fence(ctx); err != nil {
			log.Warn("EC2 event not handled here; it comes back to the leader after the visibility timeout", "event", ev.ID, "kind", ev.Kind, "err", err)
			return
		}
	}
	outcome, err := c.Handle(ctx, ev)
	c.count.WithLabelValues(string(ev.Kind), outcome).Inc()
	if err != nil && outcome == OutcomeRetry {
		log.Warn("EC2 event not handled; it comes back after the visibility timeout", "event", ev.ID, "kind", ev.Kind, "instance_id", ev.InstanceID, "err", err)
		return
	}
	c.delete(ctx, handle, log)
}

func (c *Consumer) delete(ctx context.Context, handle string, log *slog.Logger) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := c.q.DeleteMessage(dctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(c.o.QueueURL), ReceiptHandle: aws.String(handle)}); err != nil {
		log.Warn("deleting a handled message (it will come back and be taken for a duplicate or handled again safely)", "err", err)
	}
}
