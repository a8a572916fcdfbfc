package server

import (
	"context"
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
