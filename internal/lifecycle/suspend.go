package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/hostlist"
)

// Suspender terminates the instances of nodes Slurm powers down.
type Suspender struct {
	Cfg      *config.Config
	Cloud    cloud.Provider
	Recorder Recorder // may be nil
	Log      *slog.Logger
	Now      func() time.Time
}

// Suspend handles SuspendProgram and ResumeFailProgram: it terminates the
// nodes' live instances (batched by the provider) and records the end of
// each. Nodes with no instance are fine: there is nothing to release.
func (s *Suspender) Suspend(ctx context.Context, arg string) ([]cloud.Instance, error) {
	log, now := logOr(s.Log), nowOr(s.Now)
	nodes, err := hostlist.Expand(arg)
	if err != nil {
		return nil, fmt.Errorf("reading the node list Slurm passed: %w", err)
	}
	t0 := now()
	gone, err := s.Cloud.Terminate(ctx, nodes)
	log.Info("terminate", "nodes", arg, "instances", len(gone), "seconds", now().Sub(t0).Seconds(), "err", err)
	for _, in := range gone {
		log.Info("released", "node", in.Node, "instance_id", in.ID, "type", in.InstanceType, "capacity", in.Capacity,
			"launched", in.LaunchTime, "seconds_billed", now().Sub(in.LaunchTime).Seconds())
		if s.Recorder != nil {
			if rerr := s.Recorder.Terminated(ctx, in.ID, now()); rerr != nil {
				log.Warn("recording termination", "instance_id", in.ID, "err", rerr)
			}
		}
	}
	if err != nil {
		return gone, fmt.Errorf("terminating instances of %s: %w", arg, err)
	}
	return gone, nil
}
