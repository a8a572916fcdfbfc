package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
)

// JournalRecorder sends instance events to the sizer and, when it is down,
// appends them to a journal in the state directory (0600) that the next run
// replays first, so no launch or termination is lost for spend accounting.
type JournalRecorder struct {
	Sizer *sizerclient.Client // may be nil: journal only
	Dir   string
	Log   *slog.Logger
	mu    sync.Mutex
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
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := os.MkdirAll(j.Dir, 0o700); err != nil {
		return fmt.Errorf("journaling instance event: %w (sizer: %v)", err, cause)
	}
	f, err := os.OpenFile(j.path(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("journaling instance event: %w (sizer: %v)", err, cause)
	}
	defer f.Close()
	b, _ := json.Marshal(e)
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("journaling instance event: %w", err)
	}
	logOr(j.Log).Info("sizer unreachable; journaled instance event", "kind", e.Kind, "instance_id", e.Event.InstanceID, "cause", cause)
	return nil
}

// Flush replays the journal to the sizer; entries it cannot send stay.
func (j *JournalRecorder) Flush(ctx context.Context) (sent int, err error) {
	if j.Sizer == nil {
		return 0, nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	data, err := os.ReadFile(j.path())
	if errors.Is(err, os.ErrNotExist) || len(data) == 0 {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the event journal: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var keep []string
	for i, l := range lines {
		var e journalEntry
		if json.Unmarshal([]byte(l), &e) != nil {
			logOr(j.Log).Warn("dropping a corrupt journal line", "line", i+1)
			continue
		}
		if err := j.post(ctx, e); err != nil {
			keep = lines[i:]
			break
		}
		sent++
	}
	tmp := j.path() + ".tmp"
	out := ""
	if len(keep) > 0 {
		out = strings.Join(keep, "\n") + "\n"
	}
	if err := os.WriteFile(tmp, []byte(out), 0o600); err != nil {
		return sent, fmt.Errorf("rewriting the event journal: %w", err)
	}
	return sent, os.Rename(tmp, j.path())
}
