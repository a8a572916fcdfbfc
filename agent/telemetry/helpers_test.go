package telemetry

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// sizerStub is an HTTP server standing in for the sizer's report endpoint:
// it checks the bearer token and records every delivered seq, duplicates
// included, in arrival order.
type sizerStub struct {
	srv   *httptest.Server
	mu    sync.Mutex
	down  bool
	code  int // status when down
	seqs  []uint64
	drops []uint64 // sizerapi.ReportBatch.Dropped per batch
	token string
}

func newSizerStub(t *testing.T) *sizerStub {
	s := &sizerStub{token: "s3cret", code: http.StatusServiceUnavailable}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+s.token {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.down {
			http.Error(w, "down", s.code)
			return
		}
		var b sizerapi.ReportBatch
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil || b.Node != "gpu-1" {
			http.Error(w, fmt.Sprintf("bad batch: %v", err), http.StatusBadRequest)
			return
		}
		for _, rec := range b.Records {
			s.seqs = append(s.seqs, rec.Seq)
		}
		s.drops = append(s.drops, b.Dropped)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sizerStub) setDown(down bool) { s.mu.Lock(); s.down = down; s.mu.Unlock() }

func (s *sizerStub) got() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.seqs...)
}

func (s *sizerStub) sink(t *testing.T) *HTTPSink {
	cred := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(cred, []byte(s.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &HTTPSink{URL: s.srv.URL + "/v1/reports", CredentialFile: cred, Client: s.srv.Client()}
}

func gpuRecord(i int) sizerapi.Record {
	return sizerapi.Record{Time: time.Unix(1_800_000_000+int64(i), 0).UTC(), Kind: sizerapi.KindGPU, GPUs: []sizerapi.GPUReading{{
		Index: 0, UUID: "GPU-x", UtilPercent: uint32(i % 101), MemoryUsedBytes: uint64(i) << 20, PIDs: []int{100 + i},
		JobIDs: []uint32{7},
	}}}
}

func addN(t *testing.T, r *Reporter, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if err := r.Add(gpuRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
}

func wantSeqs(t *testing.T, got []uint64, from, to uint64) {
	t.Helper()
	if len(got) != int(to-from+1) {
		t.Fatalf("sink got %d records %v, want seqs %d..%d exactly once", len(got), got, from, to)
	}
	for i, s := range got {
		if s != from+uint64(i) {
			t.Fatalf("sink got seq %d at position %d, want %d (full: %v)", s, i, from+uint64(i), got)
		}
	}
}

func checkModes(t *testing.T, dir string) {
	t.Helper()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("spool dir mode %v, want 0700", fi.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		fi, _ := e.Info()
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", e.Name(), fi.Mode().Perm())
		}
	}
}
