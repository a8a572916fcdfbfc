package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/pgtest"
)

// TestLedgerChangesLateCommit: on PostgreSQL a transaction that takes a
// change-log number and commits after a later one is seen below the mark
// a reader passed; asking for the pending number finds it.
func TestLedgerChangesLateCommit(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	st := target{Config{Driver: DriverPostgres, Postgres: Postgres{URL: srv.NewDatabase(t)}}}.open(t)
	at := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	late, err := st.w.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ltx := &Tx{Tx: late, driver: st.driver}
	if _, err := ltx.ExecContext(ctx, `INSERT INTO instance_states(instance_id, state, at) VALUES(?,?,?)`, "i-late", "running", ms(at)); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordState(ctx, "i-early", "running", at); err != nil {
		t.Fatal(err)
	}
	ch, err := st.LedgerChangesSince(ctx, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ch.Instances, []string{"i-early"}) || len(ch.Seen) != 1 {
		t.Fatalf("before the late commit: %+v, want only i-early", ch)
	}
	if ch.Seen[0] < 2 {
		t.Fatalf("i-early is number %d; the uncommitted one should hold a lower one", ch.Seen[0])
	}
	if err := late.Commit(); err != nil {
		t.Fatal(err)
	}
	mark := ch.Last
	if ch, err = st.LedgerChangesSince(ctx, mark, nil); err != nil || !ch.Empty() {
		t.Fatalf("past the mark without the pending number: %+v, %v: want nothing (why it must be asked for)", ch, err)
	}
	if ch, err = st.LedgerChangesSince(ctx, mark, []int64{mark - 1}); err != nil || !slices.Equal(ch.Instances, []string{"i-late"}) {
		t.Fatalf("asking for the pending number: %+v, %v: want i-late", ch, err)
	}
	if n, err := st.PruneChangeLogs(ctx, time.Now().Add(time.Hour)); err != nil || n != 2 {
		t.Errorf("pruning: %d, %v: want both entries gone", n, err)
	}
}
