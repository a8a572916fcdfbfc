package store

import (
	"context"
	"database/sql"
	"errors"
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
	endLeaderSessions(t, adminDB(t, dsn))
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
	if holder, term, err := st.Leadership(context.Background(), ""); err != nil || holder != "a" || term.Epoch != first.epoch+2 {
		t.Errorf("recorded leadership %q %+v %v", holder, term, err)
	}
}

// Two clusters on one PostgreSQL elect a leader each (their reconcilers,
// SQS consumers and ledgers act on their own instances), with their own
// epochs; a second sizer of a cluster stands by; one cluster's newer term
// does not fence the other's.
func TestLeaderPerCluster(t *testing.T) {
	srv := pgtest.Start(t)
	tg := target{Config{Driver: DriverPostgres, Postgres: Postgres{URL: srv.NewDatabase(t)}}}
	lead := func(cluster, who string) (chan Term, context.CancelFunc) {
		s := tg.open(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		terms := make(chan Term, 4)
		go func() {
			defer close(done)
			s.Lead(ctx, LeaderOptions{Holder: who, Cluster: cluster, Retry: 100 * time.Millisecond, Check: 100 * time.Millisecond},
				func(_ context.Context, term Term) { terms <- term })
		}()
		t.Cleanup(func() { cancel(); <-done })
		return terms, cancel
	}
	got := func(terms chan Term, who string) Term {
		t.Helper()
		select {
		case term := <-terms:
			return term
		case <-time.After(60 * time.Second):
			t.Fatalf("%s did not lead within 60s", who)
		}
		return Term{}
	}
	east, _ := lead("east", "east-a")
	west, _ := lead("west", "west-a")
	te, tw := got(east, "east-a"), got(west, "west-a")
	if te.Cluster != "east" || tw.Cluster != "west" || te.Epoch != 1 || tw.Epoch != 1 {
		t.Fatalf("terms %+v %+v, want epoch 1 of east and of west", te, tw)
	}
	eastB, _ := lead("east", "east-b")
	select {
	case term := <-eastB:
		t.Fatalf("a second leader of east while east-a leads: %+v", term)
	case <-time.After(time.Second):
	}
	s := tg.open(t)
	if _, err := s.newTerm(context.Background(), "west", "west-c"); err != nil {
		t.Fatal(err)
	}
	if err := s.Fence(WithTerm(context.Background(), te, nil)); err != nil {
		t.Errorf("west's new term fenced east's: %v", err)
	}
	if err := s.Fence(WithTerm(context.Background(), tw, nil)); !errors.Is(err, ErrDeposed) {
		t.Errorf("west's old term after west's new one: %v, want ErrDeposed", err)
	}
	if holder, term, err := s.Leadership(context.Background(), "east"); err != nil || holder != "east-a" || term.Epoch != 1 {
		t.Errorf("east's recorded leadership %q %+v %v", holder, term, err)
	}
}

// Migration 6 keys the leadership by cluster and keeps the row before it
// (its epoch) as cluster "", on both drivers; rolled back, the newest row
// is the one row again.
func TestMigrateLeadershipPerCluster(t *testing.T) { forDrivers(t, testMigrateLeadershipPerCluster) }

func testMigrateLeadershipPerCluster(t *testing.T, d driverCase) {
	ctx := context.Background()
	s := d.fresh(t).open(t)
	p, err := provider(s.w.DB, s.driver)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 5); err != nil {
		t.Fatalf("down to 5: %v", err)
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO leadership(id, epoch, holder, since) VALUES(1, 7, 'old pid 1', 5)`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	if holder, term, err := s.Leadership(ctx, ""); err != nil || holder != "old pid 1" || term.Epoch != 7 {
		t.Fatalf("the row before migration 6: %q %+v %v, want epoch 7 of old pid 1", holder, term, err)
	}
	if term, err := s.newTerm(ctx, "east", "east-a"); err != nil || term.Epoch != 1 {
		t.Fatalf("east's first term: %+v %v", term, err)
	}
	if _, err := s.newTerm(ctx, "", "new pid 2"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 5); err != nil {
		t.Fatalf("down to 5 again: %v", err)
	}
	var epoch int64
	var holder string
	if err := s.w.QueryRowContext(ctx, `SELECT epoch, holder FROM leadership WHERE id = 1`).Scan(&epoch, &holder); err != nil || epoch != 8 || holder != "new pid 2" {
		t.Errorf("after rolling back: epoch %d holder %q %v, want 8 new pid 2", epoch, holder, err)
	}
}

// adminDB is a second connection to the test's PostgreSQL database, closed
// when the test ends.
func adminDB(tb testing.TB, dsn string) *sql.DB {
	tb.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// endLeaderSessions ends every session holding an advisory lock, as when
// the leader's process dies.
func endLeaderSessions(tb testing.TB, admin *sql.DB) {
	tb.Helper()
	if _, err := admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted`); err != nil {
		tb.Fatal(err)
	}
}
