package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/sizer/store"
)

// lockedStore refuses writes while locked, as SQLite does past its busy
// timeout, and keeps what it took.
type lockedStore struct {
	locked bool
	got    []string
}

func (l *lockedStore) RecordState(_ context.Context, id, state string, at time.Time) error {
	if l.locked {
		return errors.New("database is locked (5) (SQLITE_BUSY)")
	}
	l.got = append(l.got, id+" "+state+" "+at.UTC().Format(time.RFC3339Nano))
	return nil
}

func TestStateSpoolKeepsWhatTheStoreRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := &lockedStore{locked: true}
	sp := NewStateSpool(st, dir, nil)
	t0 := time.Date(2026, 12, 2, 1, 0, 0, 123e6, time.UTC)
	if err := sp.Record(ctx, "i-1", "pending", t0); err != nil {
		t.Fatalf("a refused write is spooled, not failed: %v", err)
	}
	if err := sp.Record(ctx, "i-1", "running", t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := sp.Replay(ctx); err == nil || n != 0 || !strings.Contains(err.Error(), filepath.Join(dir, SpoolFile)) {
		t.Fatalf("replay while locked: %d written, err %v; want 0 and an error naming the spool", n, err)
	}
	st.locked = false
	if err := sp.Record(ctx, "i-1", "shutting-down", t0.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := sp.Replay(ctx)
	if err != nil || n != 2 {
		t.Fatalf("replay once unlocked: %d written, err %v; want 2", n, err)
	}
	want := []string{
		"i-1 shutting-down 2026-12-02T01:00:30.123Z",
		"i-1 pending 2026-12-02T01:00:00.123Z",
		"i-1 running 2026-12-02T01:00:02.123Z",
	}
	if strings.Join(st.got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the store got\n%s\nwant\n%s", strings.Join(st.got, "\n"), strings.Join(want, "\n"))
	}
	if b, _ := os.ReadFile(filepath.Join(dir, SpoolFile)); len(b) != 0 {
		t.Errorf("the spool keeps %q after a full replay", b)
	}
	if n, err := sp.Replay(ctx); n != 0 || err != nil {
		t.Errorf("an empty spool replays %d, %v", n, err)
	}
}

func TestStateSpoolFailsWhenItCannotKeepTheEvent(t *testing.T) {
	dir := t.TempDir()
	sp := NewStateSpool(&lockedStore{locked: true}, dir+"/missing/\x00bad", nil)
	err := sp.Record(context.Background(), "i-1", "running", time.Now())
	if err == nil || !strings.Contains(err.Error(), "SQLITE_BUSY") || !strings.Contains(err.Error(), "free space") {
		t.Fatalf("neither store nor spool took the event: err %v, want both causes and what to do", err)
	}
}

func TestStateSpoolDropsACutLineAndKeepsTheRest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := &lockedStore{}
	sp := NewStateSpool(st, dir, nil)
	cut := `{"instance_id":"i-2","state":"running","at":"2026-12-02T01:00:00Z"}` + "\n" + `{"instance_id":"i-3","sta`
	if err := os.WriteFile(filepath.Join(dir, SpoolFile), []byte(cut), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := sp.Replay(ctx); n != 1 || err != nil {
		t.Fatalf("replay: %d, %v; want 1 written", n, err)
	}
	if len(st.got) != 1 || !strings.HasPrefix(st.got[0], "i-2 running") {
		t.Errorf("the store got %v", st.got)
	}
}

// deposedStore refuses every write as the store refuses a deposed
// leader's.
type deposedStore struct{}

func (deposedStore) RecordState(context.Context, string, string, time.Time) error {
	return fmt.Errorf("storing state running of i-1: %w", store.ErrDeposed)
}

// A deposed leader's state change is not spooled: Record fails, the SQS
// message stays and reaches the new leader.
func TestStateSpoolLeavesADeposedLeadersEventToTheQueue(t *testing.T) {
	dir := t.TempDir()
	sp := NewStateSpool(deposedStore{}, dir, nil)
	if err := sp.Record(context.Background(), "i-1", "running", time.Now()); !errors.Is(err, store.ErrDeposed) {
		t.Fatalf("Record under a deposed term: %v, want ErrDeposed", err)
	}
	if _, err := os.Stat(filepath.Join(dir, SpoolFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the deposed leader spooled the event (stat: %v)", err)
	}
}
