package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/pgtest"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

// The store's tests run on both drivers: SQLite in a temporary directory
// and a throwaway PostgreSQL (internal/pgtest; skipped without it unless
// BURST_REQUIRE_TOOLS=1).

// target is one empty database; open may be called again to reopen it.
type target struct{ cfg Config }

func (tg target) open(t testing.TB, opts ...Option) *Store {
	t.Helper()
	s, err := OpenConfig(context.Background(), tg.cfg, opts...)
	if err != nil {
		t.Fatalf("opening the %s store: %v", tg.cfg.Driver, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

type driverCase struct {
	name  string
	fresh func(t testing.TB) target // a new empty database
}

// forDrivers runs f once per driver, as subtests named after them. The
// PostgreSQL server starts on first use and stops when t ends.
func forDrivers(t *testing.T, f func(t *testing.T, d driverCase)) {
	var srv *pgtest.Server
	for _, d := range []driverCase{
		{DriverSQLite, func(st testing.TB) target {
			return target{Config{Driver: DriverSQLite, Dir: filepath.Join(st.TempDir(), "state")}}
		}},
		{DriverPostgres, func(st testing.TB) target {
			if srv == nil {
				srv = pgtest.Start(t)
			}
			return target{Config{Driver: DriverPostgres, Postgres: Postgres{URL: srv.NewDatabase(st)}}}
		}},
	} {
		t.Run(d.name, func(t *testing.T) { f(t, d) })
	}
}

// benchDrivers runs a benchmark on a fresh store on SQLite, then
// PostgreSQL.
func benchDrivers(b *testing.B, f func(b *testing.B, s *Store)) {
	b.Run("sqlite", func(b *testing.B) {
		f(b, target{Config{Driver: DriverSQLite, Dir: filepath.Join(b.TempDir(), "s")}}.open(b))
	})
	b.Run("postgres", func(b *testing.B) {
		srv := pgtest.Start(b)
		f(b, target{Config{Driver: DriverPostgres, Postgres: Postgres{URL: srv.NewDatabase(b)}}}.open(b))
	})
}

// A read-only open (the local paths with the daemon down) reads what the
// daemon wrote and refuses writes, on both drivers.
func TestOpenReadOnlyConfig(t *testing.T) { forDrivers(t, testOpenReadOnlyConfig) }

func testOpenReadOnlyConfig(t *testing.T, d driverCase) {
	ctx := context.Background()
	tg := d.fresh(t)
	w := tg.open(t)
	if err := w.RecordIntent(ctx, sizerapi.LaunchIntent{ClientToken: "burst-1", Nodes: []string{"n-1"}, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnlyConfig(ctx, tg.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, ok, err := ro.IntentFor(ctx, "burst-1", "n-1", time.Now()); err != nil || !ok {
		t.Errorf("the read-only store does not see the intent: %v %v", ok, err)
	}
	if err := ro.RecordIntent(ctx, sizerapi.LaunchIntent{ClientToken: "burst-2", Nodes: []string{"n-1"}, Time: time.Now()}); err == nil {
		t.Error("a read-only store accepted a write")
	}
	if _, err := ro.r.ExecContext(ctx, `DELETE FROM launch_intents`); err == nil {
		t.Error("a read-only store's connection deleted rows")
	}
}
