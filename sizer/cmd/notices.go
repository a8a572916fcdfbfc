package cmd

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	sizerstore "github.com/burst-hpc/burst/sizer/store"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/burst-hpc/burst/internal/awssdk"
	cloudec2 "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/ec2events"
	"github.com/burst-hpc/burst/internal/interruption"
	"github.com/burst-hpc/burst/internal/notices"
)

// eventParts are what the readers of EC2's events act through: the
// cluster's instances, Slurm, and the interruption handler (By "sizer").
type eventParts struct {
	prov  *cloudec2.Provider
	ops   interruption.SlurmOps
	h     *interruption.Handler
	root  string // the checkpoint root as the nodes see it
	sched *notices.Scheduled
}

// newEventParts builds them; the Scheduled is the one the queue's reader
// and the DescribeInstanceStatus poller share, so an event both report is
// acted on once.
func newEventParts(ctx context.Context, st *settings, log *slog.Logger) (*eventParts, error) {
	cfg := st.cfg
	prov, err := compose.Cloud(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	sl, err := compose.Slurm(cfg, os.Getenv, log)
	if err != nil {
		return nil, err
	}
	ops := interruption.SlurmClient{C: sl}
	// the checkpoint root as the nodes see it (internal/lifecycle's user
	// data); on the head node too when it mounts the file system, else the
	// markers are never seen and the wait runs out the grace period
	root := filepath.Join(cfg.FSx.MountPoint, cfg.FSx.CheckpointDir)
	h, err := interruption.New(ops, interruption.Options{CheckpointRoot: root, Grace: cfg.Agent.CheckpointGrace.Duration, By: "sizer", Logger: log})
	if err != nil {
		return nil, err
	}
	sched, err := notices.NewScheduled(prov, h, ops, nil, log)
	if err != nil {
		return nil, err
	}
	return &eventParts{prov: prov, ops: ops, h: h, root: root, sched: sched}, nil
}

// startEvents runs, on the leader, the readers of EC2's events: the
// EventBridge queue's (startNotices) and the DescribeInstanceStatus poll
// of scheduled events (interruptions.scheduled_poll). Parts that cannot
// be built are logged and the daemon serves without them.
func startEvents(ctx context.Context, st *settings, store *sizerstore.Store, stateChange func(context.Context, string, string, time.Time) error, kick func(), reg prometheus.Registerer, log *slog.Logger) {
	cfg := st.cfg
	_, queue := cfg.Interruptions.Queue()
	poll := cfg.Interruptions.ScheduledPoll.Duration
	if !queue {
		log.Info("no interruptions.queue_url: spot notices come from the node agents only")
	}
	if !queue && poll <= 0 {
		log.Info("interruptions.scheduled_poll is 0 and there is no queue: EC2's scheduled events are not acted on")
		return
	}
	parts, err := newEventParts(ctx, st, log)
	if err != nil {
		log.Error("EC2 event readers not started: scheduled events and spot notices of silent agents are not acted on", "err", err)
		return
	}
	if _, err := os.Stat(parts.root); err != nil {
		log.Warn("the checkpoint root is not visible here: for a node whose agent is dead, the sizer cannot see its jobs' markers and waits out the grace period before requeueing",
			"checkpoint_root", parts.root, "err", err)
	}
	if poll > 0 {
		p, err := notices.NewPoller(parts.prov, parts.sched, notices.PollOptions{Interval: poll, Fence: store.Fence, Logger: log, Registerer: reg})
		if err != nil {
			log.Error("scheduled-event poller not started", "err", err)
		} else {
			go p.Run(ctx)
		}
	}
	if queue {
		startNotices(ctx, st, parts, store, stateChange, kick, reg, log)
	}
}

// startNotices runs the reader of the EventBridge interruption queue
// (interruptions.queue_url): spot interruptions and rebalance
// recommendations of nodes whose agent is silent are acted on here,
// through the agent's own sequence, and scheduled events through the
// shared Scheduled; state changes kick the reconciler (nil: none runs) and
// go to the ledger through stateChange (the state-change spool).
func startNotices(ctx context.Context, st *settings, parts *eventParts, store *sizerstore.Store, stateChange func(context.Context, string, string, time.Time) error, kick func(), reg prometheus.Registerer, log *slog.Logger) {
	cfg := st.cfg
	q, _ := cfg.Interruptions.Queue()
	sqsc, err := notices.NewSQSClient(ctx, awssdk.Options{Region: cfg.Cluster.Region, Endpoint: cfg.Interruptions.SQSEndpoint,
		StaticCredentials: cfg.Cluster.EC2StaticCredentials})
	if err != nil {
		log.Error("interruption queue reader not started", "err", err)
		return
	}
	c, err := notices.New(sqsc, parts.prov, store, parts.h, parts.ops, notices.Options{QueueURL: cfg.Interruptions.QueueURL,
		Expect: ec2events.Expect{Account: q.Account, Region: cfg.Cluster.Region}, AgentWait: cfg.Interruptions.AgentWait.Duration,
		Kick: kick, StateChange: stateChange, Fence: store.Fence, Scheduled: parts.sched, Logger: log, Registerer: reg})
	if err != nil {
		log.Error("interruption queue reader not started", "err", err)
		return
	}
	go c.Run(ctx)
}
