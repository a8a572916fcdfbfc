package server

import (
	"context"
	"os"
	"testing"

	"github.com/burst-hpc/burst/sizer/store"
)

func countRecords(t testing.TB, st *store.Store) int64 {
	n, err := st.CountRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }
