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
	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/ec2events"
	"github.com/burst-hpc/burst/internal/interruption"
	"github.com/burst-hpc/burst/internal/notices"
)

// startNotices runs the reader of the EventBridge interruption queue when
// burst.yaml names one (interruptions.queue_url): spot interruptions and
// rebalance recommendations of nodes whose agent is silent are acted on
// here, through the agent's own sequence; state changes kick the
// reconciler (nil: none runs) and go to the ledger through stateChange
// (the state-change spool). A reader that cannot be built is logged and
// the daemon serves without it.
func startNotices(ctx context.Context, st *settings, store *sizerstore.Store, stateChange func(context.Context, string, string, time.Time) error, kick func(), reg prometheus.Registerer, log *slog.Logger) {
	cfg := st.cfg
	q, ok := cfg.Interruptions.Queue()
	if !ok {
		log.Info("no interruptions.queue_url: spot notices come from the node agents only")
		return
	}
	sqsc, err := notices.NewSQSClient(ctx, awssdk.Options{Region: cfg.Cluster.Region, Endpoint: cfg.Interruptions.SQSEndpoint,
		StaticCredentials: cfg.Cluster.EC2StaticCredentials})
	if err != nil {
		log.Error("interruption queue reader not started", "err", err)
		return
	}
	prov, err := compose.Cloud(ctx, cfg, log)
	if err != nil {
		log.Error("interruption queue reader not started", "err", err)
		return
	}
	sl, err := compose.Slurm(cfg, os.Getenv, log)
	if err != nil {
		log.Error("interruption queue reader not started", "err", err)
		return
	}
	ops := interruption.SlurmClient{C: sl}
	// the checkpoint root as the nodes see it (internal/lifecycle's user
	// data); on the head node too when it mounts the file system, else the
	// markers are never seen and the wait runs out the grace period
	root := filepath.Join(cfg.FSx.MountPoint, cfg.FSx.CheckpointDir)
	h, err := interruption.New(ops, interruption.Options{CheckpointRoot: root, Grace: cfg.Agent.CheckpointGrace.Duration, By: "sizer", Logger: log})
	if err != nil {
		log.Error("interruption queue reader not started", "err", err)
		return
	}
	c, err := notices.New(sqsc, prov, store, h, ops, notices.Options{QueueURL: cfg.Interruptions.QueueURL,
		Expect: ec2events.Expect{Account: q.Account, Region: cfg.Cluster.Region}, AgentWait: cfg.Interruptions.AgentWait.Duration,
		Kick: kick, StateChange: stateChange, Fence: store.Fence, Logger: log, Registerer: reg})
	if err != nil {
		log.Error("interruption queue reader not started", "err", err)
		return
	}
	if _, err := os.Stat(root); err != nil {
		log.Warn("the checkpoint root is not visible here: for a node whose agent is dead, the sizer cannot see its jobs' markers and waits out the grace period before requeueing",
			"checkpoint_root", root, "err", err)
	}
	go c.Run(ctx)
}
