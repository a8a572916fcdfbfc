package store

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/burst-hpc/burst/internal/pgtest"
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
