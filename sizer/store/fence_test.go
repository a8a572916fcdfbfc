package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/pgtest"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

// leadOnce starts s.Lead and returns the context and term of its first
// leadership (the leader's work gets that context).
func leadOnce(t *testing.T, s *Store, who string, check time.Duration) (context.Context, Term) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	type led struct {
		ctx  context.Context
		term Term
	}
	first := make(chan led, 1)
	go func() {
		defer close(done)
		s.Lead(ctx, LeaderOptions{Holder: who, Retry: 100 * time.Millisecond, Check: check}, func(lctx context.Context, term Term) {
			select {
			case first <- led{lctx, term}:
			default:
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case l := <-first:
		return l.ctx, l.term
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not lead within 60s", who)
	}
	return nil, Term{}
}

func intent(token string) sizerapi.LaunchIntent {
	return sizerapi.LaunchIntent{ClientToken: token, Nodes: []string{"n-1"}, Time: time.Now()}
}

// Leader a is paused (its session check never runs) while its database
// session is lost; b is elected with the next epoch. a's next write, under
// its term, is refused with ErrDeposed and a clear error, nothing of it is
// stored, and a's leadership context ends; b's writes go through.
func TestFenceDeposedLeaderPostgres(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	tg := target{Config{Driver: DriverPostgres, Postgres: Postgres{URL: dsn}}}
	a, b := tg.open(t), tg.open(t)
	actx, aterm := leadOnce(t, a, "a", time.Hour) // "paused": never checks its session
	if err := a.RecordIntent(actx, intent("burst-a1")); err != nil {
		t.Fatalf("the leader's write under its own term: %v", err)
	}
	endLeaderSessions(t, adminDB(t, dsn))
	bctx, bterm := leadOnce(t, b, "b", 100*time.Millisecond)
	if bterm.Epoch != aterm.Epoch+1 {
		t.Fatalf("b leads with epoch %d, want %d", bterm.Epoch, aterm.Epoch+1)
	}
	if actx.Err() != nil {
		t.Fatal("a's term ended before its write: the test does not model a paused leader")
	}
	err := a.RecordIntent(actx, intent("burst-a2"))
	if !errors.Is(err, ErrDeposed) {
		t.Fatalf("the deposed leader's write: %v, want ErrDeposed", err)
	}
	for _, want := range []string{"epoch " + itoa(aterm.Epoch), "epoch " + itoa(bterm.Epoch), "b"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not name %q", err, want)
		}
	}
	select {
	case <-actx.Done():
	case <-time.After(5 * time.Second):
		t.Error("a's leadership context did not end after its write was refused")
	}
	if _, ok, err := b.IntentFor(context.Background(), "burst-a2", "", time.Now()); err != nil || ok {
		t.Errorf("the refused write is stored: %v %v", ok, err)
	}
	if err := b.Fence(bctx); err != nil {
		t.Errorf("the new leader's fence: %v", err)
	}
	if err := b.RecordIntent(bctx, intent("burst-b1")); err != nil {
		t.Errorf("the new leader's write: %v", err)
	}
	// writes outside any term (agents' reports, resumes' launches) are not fenced
	if err := a.RecordIntent(context.Background(), intent("burst-a3")); err != nil {
		t.Errorf("an unfenced write on the deposed sizer: %v", err)
	}
}

// On both drivers: a term's writes and Fence pass while it is the newest
// and are refused once a newer term is recorded.
func TestFenceNewerTerm(t *testing.T) { forDrivers(t, testFenceNewerTerm) }

func testFenceNewerTerm(t *testing.T, d driverCase) {
	ctx := context.Background()
	tg := d.fresh(t)
	s := tg.open(t)
	old, err := s.newTerm(ctx, "c1", "old")
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	octx := WithTerm(ctx, old, func() { stopped = true })
	if err := s.Fence(octx); err != nil {
		t.Fatalf("fence of the newest term: %v", err)
	}
	if err := s.RecordIntent(octx, intent("burst-1")); err != nil {
		t.Fatalf("write of the newest term: %v", err)
	}
	if _, err := s.newTerm(ctx, "c1", "new"); err != nil {
		t.Fatal(err)
	}
	if err := s.Fence(octx); !errors.Is(err, ErrDeposed) {
		t.Errorf("fence of a superseded term: %v, want ErrDeposed", err)
	}
	if err := s.RecordIntent(octx, intent("burst-2")); !errors.Is(err, ErrDeposed) {
		t.Errorf("write of a superseded term: %v, want ErrDeposed", err)
	}
	if !stopped {
		t.Error("the superseded term was not stopped")
	}
	if _, ok, _ := s.IntentFor(ctx, "burst-2", "", time.Now()); ok {
		t.Error("the refused write is stored")
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
