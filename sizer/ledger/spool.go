package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/statefile"
	"github.com/burst-hpc/burst/sizer/store"
)

// SpoolFile is the spool of EC2 state changes the database did not take,
// in the sizer's state directory.
const SpoolFile = "ledger-states.jsonl"

// StateRecorder is the store's write of one EC2 state change
// (store.RecordState).
type StateRecorder interface {
	RecordState(ctx context.Context, id, state string, at time.Time) error
}

// StateSpool records EC2's state changes (the running and shutting-down
// times EC2 bills between) in the store, and keeps those the store cannot
// take now (its database locked by another process past the busy
// timeout, a full disk) in SpoolFile, fsynced, to be written again by
// Replay: a state change is either in the database or in the spool before
// Record returns nil, so the queue message that brought it may go.
// Entries are idempotent (the store ignores duplicates), so a replay
// cut short by a crash only repeats them.
type StateSpool struct {
	st   StateRecorder
	path string
	log  *slog.Logger
	mu   sync.Mutex // one replay at a time in this process
}

// NewStateSpool returns the spool of the state directory dir.
func NewStateSpool(st StateRecorder, dir string, log *slog.Logger) *StateSpool {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &StateSpool{st: st, path: filepath.Join(dir, SpoolFile), log: log}
}

// spooled is one spool line.
type spooled struct {
	InstanceID string    `json:"instance_id"`
	State      string    `json:"state"`
	At         time.Time `json:"at"`
}

// Record writes one state change to the store, or to the spool when the
// store fails. It fails only when both do (the caller keeps the event and
// retries, e.g. SQS redelivers the message), and when the store refused
// a deposed leader's write (store.ErrDeposed): that event is left to the
// queue, which hands it to the new leader, not kept on this head node.
//
// Every replica replays its own spool whether it leads or not (what it
// kept while it led lands after it stood down; entries are EC2's facts
// and idempotent, so landing late or twice changes nothing). A spool on a
// head node lost for good is lost with it; the leader's ledger sync then
// closes those instances from EC2's own description.
func (s *StateSpool) Record(ctx context.Context, id, state string, at time.Time) error {
	err := s.st.RecordState(ctx, id, state, at)
	if err == nil || errors.Is(err, store.ErrDeposed) {
		return err
	}
	line, jerr := json.Marshal(spooled{InstanceID: id, State: state, At: at})
	if jerr == nil {
		jerr = statefile.AppendLine(s.path, 0o600, append(line, '\n'))
	}
	if jerr != nil {
		return fmt.Errorf("%w; keeping it in %s failed too: %v (free space on that file system, or fix its permissions)", err, s.path, jerr)
	}
	s.log.Warn("the sizer database did not take an EC2 state change; kept in the spool and written again once it can",
		"instance_id", id, "state", state, "spool", s.path, "err", err)
	return nil
}

// Replay writes the spooled state changes to the store; those written
// leave the spool, the rest stay for the next replay. It returns how many
// were written.
func (s *StateSpool) Replay(ctx context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := os.Stat(s.path); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	data, err := statefile.ReadLocked(s.path, 0o600)
	if err != nil {
		return 0, fmt.Errorf("reading the state-change spool: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return 0, nil
	}
	done := map[string]bool{} // raw lines written (or unreadable)
	written := 0
	var errs []error
	for _, raw := range bytes.Split(data, []byte("\n")) {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || done[string(raw)] {
			continue
		}
		var e spooled
		if err := json.Unmarshal(raw, &e); err != nil || e.InstanceID == "" || e.State == "" || e.At.IsZero() {
			// only a crash in the middle of an append cuts a line, and
			// then Record had not returned: the event is still in its queue
			s.log.Warn("dropping an unreadable line of the state-change spool", "spool", s.path, "line", string(raw))
			done[string(raw)] = true
			continue
		}
		if err := s.st.RecordState(ctx, e.InstanceID, e.State, e.At); err != nil {
			errs = append(errs, err)
			break // the store still refuses: try again later
		}
		done[string(raw)] = true
		written++
	}
	if len(done) > 0 {
		err := statefile.Update(s.path, 0o600, func(old []byte) ([]byte, bool, error) {
			var keep []byte
			for _, raw := range bytes.Split(old, []byte("\n")) {
				raw = bytes.TrimSpace(raw)
				if len(raw) == 0 {
					continue
				}
				if done[string(raw)] {
					continue
				}
				keep = append(append(keep, raw...), '\n')
			}
			return keep, true, nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("rewriting the state-change spool %s: %w", s.path, err))
		}
	}
	if written > 0 {
		s.log.Info("wrote spooled EC2 state changes to the sizer database", "written", written, "spool", s.path)
	}
	if err := errors.Join(errs...); err != nil {
		return written, fmt.Errorf("replaying the state-change spool %s: %w", s.path, err)
	}
	return written, nil
}

// Run replays the spool every interval until ctx ends; errors are logged
// once until a replay succeeds again.
func (s *StateSpool) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := s.Replay(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			s.log.Error("the sizer database still refuses spooled EC2 state changes; retrying", "err", err)
			failing = true
		case err == nil:
			failing = false
		}
	}
}
