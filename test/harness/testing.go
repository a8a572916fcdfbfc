package harness

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

var staleOnce sync.Once

// New starts a cluster for a test and registers its teardown with t.Cleanup
// (log tails are printed first when the test failed). It skips the test, with
// a loud message, only when not running as root; any other start-up problem
// fails the test. The first New of a process also runs CleanupStale.
func New(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if _, bench := t.(*testing.B); testing.Short() && !bench {
		// a -short benchmark (make bench-smoke) still runs its cluster
		t.Skip("SKIPPING REAL-SLURM TEST in -short mode (make test-unit starts no daemon)")
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING REAL-SLURM TEST: test/harness needs root (network namespaces, bridge, munged, slurmd); run `sudo go test ...`")
	}
	if os.Getenv("BURST_HARNESS_KEEP") == "1" {
		opts.KeepDir = true
	}
	if lvl := os.Getenv("BURST_HARNESS_DEBUG"); lvl != "" {
		opts.Debug = lvl
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	staleOnce.Do(func() {
		if removed, err := CleanupStale(ctx, nil); err != nil || len(removed) > 0 {
			t.Logf("cleaned up after crashed earlier harness runs: removed %q, errors: %v", removed, err)
		}
	})
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("starting slurm harness: %v", err)
	}
	t.Logf("%s (cluster %s, run dir %s)", c.Slurm(), c.Name(), c.Dir())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("slurm harness %s (dir %s) after failure:\n--- slurmctld.log (tail) ---\n%s", c.id, c.dir, tail(c.SlurmctldLog(), 40))
			logs, _ := filepath.Glob(filepath.Join(c.dir, "log", "slurmd-*.log"))
			for _, l := range logs {
				t.Logf("--- %s (tail) ---\n%s", filepath.Base(l), tail(l, 20))
			}
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stopping slurm harness: %v", err)
		}
	})
	return c
}

// LocalPort is a free TCP port on 127.0.0.1 (free when asked: bind it
// soon).
func LocalPort(t testing.TB) int {
	t.Helper()
	port, err := FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// SyncBuffer is a bytes.Buffer safe for one writer (a process's output)
// and readers at the same time.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
