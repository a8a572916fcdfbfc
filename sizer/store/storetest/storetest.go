// Package storetest opens an empty store on either driver for the tests
// that check a reader of the store on both.
package storetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/burst-hpc/burst/internal/pgtest"
	"github.com/burst-hpc/burst/sizer/store"
)

// Open opens an empty store on driver: SQLite in the test's temporary
// directory, or a new database on a PostgreSQL server of the test's
// (pgtest). The store is closed when the test ends.
func Open(t testing.TB, driver string) *store.Store {
	t.Helper()
	ctx := context.Background()
	var st *store.Store
	var err error
	if driver == store.DriverPostgres {
		srv := pgtest.Start(t)
		st, err = store.OpenConfig(ctx, store.Config{Driver: store.DriverPostgres, Postgres: store.Postgres{URL: srv.NewDatabase(t)}})
	} else {
		st, err = store.Open(ctx, filepath.Join(t.TempDir(), "state"))
	}
	if err != nil {
		t.Fatalf("opening a %s store: %v", driver, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
