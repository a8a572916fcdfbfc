package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/internal/statefile"
)

// JournalRecorder sends instance events to the sizer and, when it is down,
// appends them to a journal in the state directory (0600) that the next run
// replays first, so no launch or termination is lost for spend accounting.
// The journal is shared by every resume and suspend process (see
// internal/statefile): appends and the replay's rewrite take its lock, and
// one process replays at a time.
type JournalRecorder struct {
	Sizer *sizerclient.Client // may be nil: journal only
	Dir   string
	Log   *slog.Logger
}

type journalEntry struct {
	Kind  string                 `json:"kind"` // launch | terminate
	Event sizerapi.InstanceEvent `json:"event"`
}

func (j *JournalRecorder) path() string { return filepath.Join(j.Dir, "instance-events.jsonl") }

// Launched implements Recorder.
func (j *JournalRecorder) Launched(ctx context.Context, ev sizerapi.InstanceEvent) error {
	return j.send(ctx, journalEntry{"launch", ev})
}

// Terminated implements Recorder.
func (j *JournalRecorder) Terminated(ctx context.Context, id string, at time.Time) error {
	return j.send(ctx, journalEntry{"terminate", sizerapi.InstanceEvent{InstanceID: id, Time: at}})
}

func (j *JournalRecorder) post(ctx context.Context, e journalEntry) error {
	if j.Sizer == nil {
		return sizerclient.ErrUnavailable
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if e.Kind == "launch" {
		return j.Sizer.Launched(ctx, e.Event)
	}
	return j.Sizer.Terminated(ctx, e.Event.InstanceID, e.Event.Time)
}

func (j *JournalRecorder) send(ctx context.Context, e journalEntry) error {
	err := j.post(ctx, e)
	if err == nil {
		return nil
	}
	return j.append(e, err)
}

func (j *JournalRecorder) append(e journalEntry, cause error) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("journaling instance event: %w (sizer: %v)", err, cause)
	}
	if err := statefile.Append(j.path(), 0o600, append(b, '\n')); err != nil {
		return fmt.Errorf("journaling instance event: %w (sizer: %v)", err, cause)
	}
	logOr(j.Log).Info("sizer unreachable; journaled instance event", "kind", e.Kind, "instance_id", e.Event.InstanceID, "cause", cause)
	return nil
}

// Flush replays the journal to the sizer in order, stopping at the first
// event it cannot send; the events it sent (and corrupt lines) leave the
// journal, events appended meanwhile stay. Another process replaying at the
// same time makes it return at once.
func (j *JournalRecorder) Flush(ctx context.Context) (sent int, err error) {
	if j.Sizer == nil {
		return 0, nil
	}
	unlock, ok, err := statefile.TryLock(j.path()+".replay", 0o600)
	if err != nil {
		return 0, fmt.Errorf("replaying the event journal: %w", err)
	}
	if !ok {
		return 0, nil
	}
	defer unlock()
	data, err := statefile.Read(j.path())
	if err != nil {
		return 0, fmt.Errorf("replaying the event journal: %w", err)
	}
	lines := journalLines(data)
	done := 0 // leading lines sent or dropped
	for i, l := range lines {
		var e journalEntry
		if json.Unmarshal([]byte(l), &e) != nil {
			logOr(j.Log).Warn("dropping a corrupt journal line", "line", i+1)
			done = i + 1
			continue
		}
		if err := j.post(ctx, e); err != nil {
			break
		}
		sent++
		done = i + 1
	}
	if done == 0 {
		return sent, nil
	}
	err = statefile.Update(j.path(), 0o600, func(old []byte) ([]byte, bool, error) {
		cur := journalLines(old)
		if len(cur) < done || !slices.Equal(cur[:done], lines[:done]) {
			return nil, false, errors.New("the journal changed under the replay")
		}
		rest := cur[done:]
		if len(rest) == 0 {
			return []byte{}, true, nil
		}
		return []byte(strings.Join(rest, "\n") + "\n"), true, nil
	})
	if err != nil {
		return sent, fmt.Errorf("rewriting the event journal: %w", err)
	}
	return sent, nil
}

// journalLines splits the journal into its lines (no trailing empty one).
func journalLines(b []byte) []string {
	s := strings.TrimRight(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
