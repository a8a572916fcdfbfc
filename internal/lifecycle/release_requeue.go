package lifecycle

import (
	"context"
	"slices"

	"github.com/burst-hpc/burst/internal/interruption"
	"github.com/burst-hpc/burst/internal/slurm"
)

// requeueHold splits the nodes of a job that just ended when this end is
// the requeue burst made after losing one of its nodes (a spot
// interruption: internal/interruption wrote its Note into the job's
// AdminComment for this very run): the nodes not lost and still healthy
// are held for the job's relaunch, so that Slurm allocates them again
// (it prefers powered-up idle nodes) and only the lost node is replaced.
// The lost nodes come back in lost: the interruption handler that
// requeued the job hands them back itself, after it made the job eligible
// again (releasing one here would tear down the agent on it before that).
// Everything else comes back in rest. The note is then marked used, so the
// relaunched run's own end releases everything.
func (r *Releaser) requeueHold(ctx context.Context, jobID uint32, nodes []string, states map[string]slurm.Node) (held, rest, lost []string, note interruption.Note) {
	if jobID == 0 {
		return nil, nodes, nil, note
	}
	js, err := r.Slurm.Jobs(ctx, jobID)
	if err != nil || len(js) != 1 {
		logOr(r.Log).Debug("looking up the ended job for a requeue hold", "job", jobID, "err", err)
		return nil, nodes, nil, note
	}
	j := js[0]
	note, ok := interruption.ParseNote(j.AdminComment)
	if !ok {
		return nil, nodes, nil, note
	}
	if !note.Ends(j) {
		logOr(r.Log).Info("the ended job's requeue note is of another run; not holding its nodes", "job", jobID, "state", j.State,
			"restarts", j.RestartCount, "note_restart", note.Restart)
		return nil, nodes, nil, note
	}
	hold := r.Cfg.Teardown.RequeueHold.Duration > 0 && r.Linger != nil
	for _, n := range nodes {
		switch {
		case note.IsLost(n):
			lost = append(lost, n)
		case hold && healthy(states, n):
			held = append(held, n)
		default:
			rest = append(rest, n)
		}
	}
	ac, ok := r.Slurm.(slurm.AdminCommenter)
	if !ok {
		logOr(r.Log).Warn("cannot mark the requeue note used (the Slurm client sets no admin comments); not holding nodes", "job", jobID)
		return nil, append(rest, held...), lost, note
	}
	if err := ac.SetAdminComment(ctx, jobID, note.Consumed(held)); err != nil {
		// unmarked, the relaunched run's end would hold its nodes again
		logOr(r.Log).Warn("marking the requeue note used; not holding nodes", "job", jobID, "err", err)
		return nil, append(rest, held...), lost, note
	}
	return held, rest, lost, note
}

// healthy: Slurm shows the node, and it is not drained, down, failing or
// unreachable (a node that is leaving is never held or kept warm). A node
// Slurm did not describe counts as healthy only when no state was read.
func healthy(states map[string]slurm.Node, name string) bool {
	if states == nil {
		return true
	}
	n, ok := states[name]
	if !ok {
		return false
	}
	if n.State == "DOWN" || n.State == "ERROR" || n.State == "FUTURE" {
		return false
	}
	return !slices.ContainsFunc([]string{"DRAIN", "DRAINING", "DRAINED", "FAIL", "NOT_RESPONDING", "POWER_DOWN", "POWERING_DOWN", "POWERED_DOWN"}, n.HasFlag)
}
