package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/burst-hpc/burst/internal/journal"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
)

// JournalRecorder sends instance events and job runs to the sizer and,
// when it is down, appends them to the journal of the state directory
// (internal/journal: flock, fsync, atomic replay) that later runs replay
// first, so no launch, termination or job run is lost for spend
// accounting. Launch intents always go to the journal, before CreateFleet.
type JournalRecorder struct {
	Sizer *sizerclient.Client // may be nil: journal only
	Dir   string
	Log   *slog.Logger
}

func (j *JournalRecorder) file() *journal.File { return journal.In(j.Dir, j.Log) }

// Launched implements Recorder.
func (j *JournalRecorder) Launched(ctx context.Context, ev sizerapi.InstanceEvent) error {
	return j.send(ctx, journal.Entry{Kind: journal.KindLaunch, Event: &ev})
}

// Terminated implements Recorder: at is burst's own time (SourceBurst);
// the ledger replaces it with EC2's transition time when it reads it.
func (j *JournalRecorder) Terminated(ctx context.Context, id string, at time.Time) error {
	return j.send(ctx, journal.Entry{Kind: journal.KindTerminate, Event: &sizerapi.InstanceEvent{InstanceID: id, Time: at, Source: sizerapi.SourceBurst}})
}

// Intent journals a launch intent (fsynced) before its CreateFleet: the
// launch must not happen when this fails.
func (j *JournalRecorder) Intent(in sizerapi.LaunchIntent) error {
	return j.file().Append(journal.Entry{Kind: journal.KindIntent, Intent: &in})
}

// Run records a job's start or end on its nodes.
func (j *JournalRecorder) Run(ctx context.Context, run sizerapi.JobRun) error {
	return j.send(ctx, journal.Entry{Kind: journal.KindRun, Run: &run})
}

func (j *JournalRecorder) post(ctx context.Context, e journal.Entry) error {
	if j.Sizer == nil {
		return sizerclient.ErrUnavailable
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	switch e.Kind {
	case journal.KindLaunch:
		return j.Sizer.Launched(ctx, *e.Event)
	case journal.KindTerminate:
		return j.Sizer.TerminatedEvent(ctx, *e.Event)
	case journal.KindIntent:
		return j.Sizer.Intent(ctx, *e.Intent)
	case journal.KindRun:
		return j.Sizer.Run(ctx, *e.Run)
	}
	return fmt.Errorf("unknown journal entry kind %q", e.Kind)
}

func (j *JournalRecorder) send(ctx context.Context, e journal.Entry) error {
	err := j.post(ctx, e)
	if err == nil {
		return nil
	}
	if aerr := j.file().Append(e); aerr != nil {
		return fmt.Errorf("%w (sizer: %v)", aerr, err)
	}
	logOr(j.Log).Info("sizer unreachable; journaled the event", "kind", e.Kind, "cause", err)
	return nil
}

// Flush replays the journal to the sizer in order, stopping at the first
// entry it cannot send (see journal.File.Replay). Another process
// replaying at the same time makes it return at once.
func (j *JournalRecorder) Flush(ctx context.Context) (sent int, err error) {
	if j.Sizer == nil {
		return 0, nil
	}
	return j.file().Replay(ctx, j.post)
}
