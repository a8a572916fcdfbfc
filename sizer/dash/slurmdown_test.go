package dash

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
)

// hangingSlurm answers like inner until hang is set; then every call
// blocks until its context ends or release is closed, as a slurmctld that
// accepts connections and never answers.
type hangingSlurm struct {
	inner   SlurmReader
	mu      sync.Mutex
	hang    bool
	release chan struct{}
}

func (h *hangingSlurm) wait(ctx context.Context) error {
	h.mu.Lock()
	hang := h.hang
	h.mu.Unlock()
	if !hang {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-h.release:
		return context.DeadlineExceeded
	}
}

func (h *hangingSlurm) Nodes(ctx context.Context, names ...string) ([]slurm.Node, error) {
	if err := h.wait(ctx); err != nil {
		return nil, err
	}
	return h.inner.Nodes(ctx, names...)
}

func (h *hangingSlurm) Jobs(ctx context.Context, ids ...uint32) ([]slurm.Job, error) {
	if err := h.wait(ctx); err != nil {
		return nil, err
	}
	return h.inner.Jobs(ctx, ids...)
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestFleetWithSlurmHanging: when Slurm stops answering, the fleet view
// does not wait for it: it comes back with the last known node states,
// Slurm marked unreachable since when, and a log line says so; when Slurm
// answers again the view is live and another line says so.
func TestFleetWithSlurmHanging(t *testing.T) {
	hs := &hangingSlurm{release: make(chan struct{}),
		inner: slurmfake.New([]slurm.Job{{ID: 21, Name: "train", User: "bob", Account: "vision", State: "RUNNING", Nodes: "l4x4-1"}},
			[]slurm.Node{{Name: "l4x4-1", State: "ALLOCATED", Flags: []string{"CLOUD"}}})}
	defer close(hs.release)
	src, _ := fixture(t, hs)
	var mu sync.Mutex
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	src.o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	var logs syncBuf
	src.o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	src.o.SlurmTimeout = time.Hour // the hang outlasts every view: only release ends it

	fleet := func() (v fleetResult) {
		t.Helper()
		done := make(chan fleetResult, 1)
		go func() {
			fv, err := src.Fleet(context.Background(), Scope{})
			done <- fleetResult{fv.Slurm, fv.SlurmError, fv.SlurmDownSince != nil, fv.Classes[1].Nodes[0].SlurmState, err}
		}()
		select {
		case v = <-done:
		case <-time.After(time.Minute): // generous: the view must not wait on Slurm at all
			t.Fatal("the fleet view waits on a hanging Slurm")
		}
		if v.err != nil {
			t.Fatal(v.err)
		}
		return v
	}
	if v := fleet(); !v.slurm || v.state != "ALLOCATED" {
		t.Fatalf("live fleet: %+v", v)
	}
	hs.mu.Lock()
	hs.hang = true
	hs.mu.Unlock()
	advance(time.Minute) // past SlurmTTL: the next view asks Slurm again
	v := fleet()
	if v.slurm || !v.downSince || !strings.Contains(v.slurmError, "cannot reach Slurm since 2026-03-02T12:01:00Z") || v.state != "ALLOCATED" {
		t.Errorf("fleet with Slurm hanging: %+v; want the last known state, Slurm unreachable since 12:01", v)
	}
	if !strings.Contains(logs.String(), "Slurm is unreachable") {
		t.Errorf("no log line for Slurm down: %q", logs.String())
	}
	// a second view while the read still hangs: the same answer, no second read
	if v2 := fleet(); v2.slurm || v2.state != "ALLOCATED" {
		t.Errorf("second view: %+v", v2)
	}
	hs.mu.Lock()
	hs.hang = false
	hs.mu.Unlock()
	hs.release <- struct{}{} // the hung read ends (failed)
	deadline := time.Now().Add(time.Minute)
	for {
		advance(time.Minute)
		if v := fleet(); v.slurm {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Slurm answers again but the fleet never shows it live")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "Slurm answers again") {
		t.Errorf("no log line for the recovery: %q", logs.String())
	}
}

type fleetResult struct {
	slurm      bool
	slurmError string
	downSince  bool
	state      string
	err        error
}
