package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/slurm"
)

// busyFlags are node state flags that mean "not ready for a job yet".
var busyFlags = []string{"POWERING_UP", "POWERED_DOWN", "NOT_RESPONDING", "POWER_DOWN", "POWERING_DOWN"}

// WaitNodes is the PrologSlurmctld mode of burst-resume: it returns as soon
// as every node of the job has registered, so slurmctld launches the batch
// job at once instead of on its next 30-second pass. It never fails the
// job: on timeout or error it returns and Slurm's own timers apply.
func WaitNodes(ctx context.Context, sl Slurm, jobID uint32, nodelist string, timeout, poll time.Duration, log *slog.Logger) (ready bool, err error) {
	log = logOr(log)
	nodes, err := hostlist.Expand(nodelist)
	if err != nil || len(nodes) == 0 {
		return false, fmt.Errorf("reading the job's node list %q: %w", nodelist, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	for i := 0; ; i++ {
		if jobID != 0 && i%5 == 4 {
			// a node handed back (failed launch) requeues the job: stop
			// waiting once the job is no longer being configured
			if js, err := sl.JobStates(ctx, slurm.JobFilter{IDs: []uint32{jobID}}); err == nil && (len(js) == 0 || js[0].State != "CONFIGURING" && js[0].State != "RUNNING") {
				log.Info("the job left CONFIGURING while its nodes came up; leaving it to Slurm", "job", jobID)
				return false, nil
			}
		}
		ns, err := sl.Nodes(ctx, nodes...)
		if err == nil {
			waiting := 0
			for _, n := range ns {
				if isBusy(n) {
					waiting++
				}
				if n.State == "DOWN" || n.HasFlag("DRAIN") && n.HasFlag("POWER_DOWN") {
					log.Warn("a node of the job failed; leaving it to Slurm", "node", n.Name, "state", n.StateString(), "reason", n.Reason)
					return false, nil
				}
			}
			if waiting == 0 && len(ns) == len(nodes) {
				return true, nil
			}
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(poll):
		}
	}
}

func isBusy(n slurm.Node) bool {
	for _, f := range busyFlags {
		if n.HasFlag(f) {
			return true
		}
	}
	return false
}
