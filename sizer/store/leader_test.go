package store

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/pgtest"
)

type termEvent struct {
	who   string
	epoch int64
	ended bool
}

// Two sizers on one PostgreSQL: one leads; when its database session dies
// (what SIGKILL of its process does) its leadership context ends and the
// standby leads with the next epoch; a leader shutting down hands over.
func TestLeaderFailover(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	tg := target{Config{Driver: DriverPostgres, Postgres: Postgres{URL: dsn}}}
	events := make(chan termEvent, 16)
	run := func(who string) context.CancelFunc {
		s := tg.open(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Lead(ctx, LeaderOptions{Holder: who, Retry: 100 * time.Millisecond, Check: 100 * time.Millisecond}, func(lctx context.Context, term Term) {
				events <- termEvent{who: who, epoch: term.Epoch}
				go func() { <-lctx.Done(); events <- termEvent{who: who, epoch: term.Epoch, ended: true} }()
			})
		}()
		t.Cleanup(func() { cancel(); <-done })
		return cancel
	}
	next := func(what string) termEvent {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-time.After(60 * time.Second):
			t.Fatalf("no %s within 60s", what)
		}
		return termEvent{}
	}
	run("a")
	first := next("first leader")
	if first.who != "a" || first.ended {
		t.Fatalf("first event %+v", first)
	}
	stopB := run("b")
	select {
	case e := <-events:
		t.Fatalf("a second leader while the first holds: %+v", e)
	case <-time.After(time.Second):
	}
	// a's session dies
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted`); err != nil {
		t.Fatal(err)
	}
	got := map[string]termEvent{}
	for range 2 {
		e := next("failover")
		got[e.who] = e
	}
	if !got["a"].ended || got["b"].ended || got["b"].epoch != first.epoch+1 {
		t.Fatalf("after a's session died: %+v, want a ended and b leading with epoch %d", got, first.epoch+1)
	}
	// b shuts down: a (standing by again) leads
	stopB()
	got = map[string]termEvent{}
	for range 2 {
		e := next("handover")
		got[e.who] = e
	}
	if !got["b"].ended || got["a"].ended || got["a"].epoch != first.epoch+2 {
		t.Fatalf("after b stopped: %+v", got)
	}
	st := tg.open(t)
	if holder, term, err := st.Leadership(context.Background()); err != nil || holder != "a" || term.Epoch != first.epoch+2 {
		t.Errorf("recorded leadership %q %+v %v", holder, term, err)
	}
}
