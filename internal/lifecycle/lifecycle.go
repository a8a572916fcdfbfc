// Package lifecycle is burst's node lifecycle as Slurm drives it: resume
// (ResumeProgram), the PrologSlurmctld wait, event-driven release
// (EpilogSlurmctld), and suspend (SuspendProgram, ResumeFailProgram).
//
// Everything here runs inside slurmctld's power-saving loop, so it is
// bounded in time, never fails a resume because an optional service (the
// sizer) is down, and hands nodes back with a reason at once when it cannot
// launch, so Slurm requeues the job instead of waiting out ResumeTimeout.
package lifecycle

import (
	"context"
	"log/slog"
	"time"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm"
)

// Slurm is the part of slurm.Client the lifecycle uses.
type Slurm interface {
	Jobs(ctx context.Context, ids ...uint32) ([]slurm.Job, error)
	JobStates(ctx context.Context, f slurm.JobFilter) ([]slurm.JobState, error)
	Nodes(ctx context.Context, names ...string) ([]slurm.Node, error)
	UpdateNodes(ctx context.Context, updates ...slurm.NodeUpdate) error
	Hold(ctx context.Context, jobID uint32, reason string) error
}

// Ranker ranks a class's offerings for a job. Source says who ranked
// ("sizer" or "in-process").
type Ranker interface {
	Rank(ctx context.Context, rq sizerapi.RankRequest) (offers []cloud.Offering, source string, err error)
}

// Recorder receives instance launch and termination events (spend and
// budgets). Implementations must not block long; failures are logged and
// journaled, never fatal.
type Recorder interface {
	Launched(ctx context.Context, ev sizerapi.InstanceEvent) error
	Terminated(ctx context.Context, instanceID string, at time.Time) error
}

// UserDataFunc renders the user data of one launch request (all its nodes).
type UserDataFunc func(nodes []cloud.NodeSpec, issued time.Time) (string, error)

func nowOr(f func() time.Time) func() time.Time {
	if f == nil {
		return time.Now
	}
	return f
}

func logOr(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
