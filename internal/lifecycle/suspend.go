package lifecycle

import (
	"context"
	"errors"
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
	// Sleep waits between throttled attempts (default: a timer honouring
	// ctx); tests shorten it.
	Sleep func(context.Context, time.Duration) error
}

// SuspendThrottleBudget is how long Suspend keeps retrying terminations
// EC2 throttled after the SDK's own attempts gave up (RequestLimitExceeded
// comes in storms): a node Slurm powered down must not keep its instance
// until the reconciler's next pass. Backoff doubles from 2 s.
const SuspendThrottleBudget = 60 * time.Second

// Suspend handles SuspendProgram and ResumeFailProgram: it terminates the
// nodes' live instances (batched by the provider) and records the end of
// each one EC2 accepted to terminate, at burst's clock (the ledger takes
// EC2's own transition time when it reads it). An instance whose
// TerminateInstances failed is not recorded: it still runs, and the ledger
// closes it when EC2 reports it terminated. Nodes with no instance are
// fine: there is nothing to release.
func (s *Suspender) Suspend(ctx context.Context, arg string) ([]cloud.Instance, error) {
	log, now := logOr(s.Log), nowOr(s.Now)
	nodes, err := hostlist.Expand(arg)
	if err != nil {
		return nil, fmt.Errorf("reading the node list Slurm passed: %w", err)
	}
	t0 := now()
	gone, err := s.terminate(ctx, nodes, arg, log)
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

// terminate terminates the nodes' instances, retrying for
// SuspendThrottleBudget while EC2 throttles (Terminate skips instances
// already terminating, so a retry asks only for the rest).
func (s *Suspender) terminate(ctx context.Context, nodes []string, arg string, log *slog.Logger) ([]cloud.Instance, error) {
	sleep := s.Sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	var all []cloud.Instance
	wait, waited := 2*time.Second, time.Duration(0)
	for {
		gone, err := s.Cloud.Terminate(ctx, nodes)
		all = append(all, gone...)
		if err == nil || !errors.Is(err, cloud.ErrThrottled) || waited+wait > SuspendThrottleBudget {
			return all, err
		}
		log.Warn("terminate throttled by EC2: retrying", "nodes", arg, "in", wait.String(), "terminated_so_far", len(all), "err", err)
		if serr := sleep(ctx, wait); serr != nil {
			return all, err
		}
		waited += wait
		wait *= 2
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
