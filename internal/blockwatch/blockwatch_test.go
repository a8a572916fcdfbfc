package blockwatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/interruption"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm"
)

// Wait waits for the evacuations Pass started.
func (w *Watcher) Wait() { w.wg.Wait() }

type fakeCloud struct {
	insts []cloud.Instance
	rs    []cloud.Reservation
}

func (f *fakeCloud) List(context.Context) ([]cloud.Instance, error) { return f.insts, nil }
func (f *fakeCloud) Reservations(_ context.Context, ids []string) ([]cloud.Reservation, error) {
	var out []cloud.Reservation
	for _, r := range f.rs {
		for _, id := range ids {
			if r.ID == id {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

type fence struct{ name, nodes string }

type fakeSlurm struct {
	mu      sync.Mutex
	fences  map[string]fence
	windows map[string][2]time.Time
	evac    []interruption.Notice
}

func (f *fakeSlurm) CreateMaintReservation(_ context.Context, name string, nodes []string, start, end time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.fences[name]; ok {
		return fmt.Errorf("creating %s: %w", name, slurm.ErrReservationExists)
	}
	f.fences[name] = fence{name, strings.Join(nodes, ",")}
	f.windows[name] = [2]time.Time{start, end}
	return nil
}

func (f *fakeSlurm) Evacuate(_ context.Context, n interruption.Notice, _ string) (sizerapi.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.evac = append(f.evac, n)
	return sizerapi.Event{}, nil
}

// An instance in a Capacity Block: its node is fenced from 40 minutes
// before the block's end (EC2's warning) to the end at the first pass, and
// evacuated once from the warning on; an instance in an ODCR and one in no
// reservation are left alone.
func TestPassFencesThenEvacuates(t *testing.T) {
	end := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	c := &fakeCloud{
		insts: []cloud.Instance{
			{ID: "i-block", Node: "h200x8-1", State: "running", Reservation: "cr-block"},
			{ID: "i-odcr", Node: "h100x8-1", State: "running", Reservation: "cr-odcr"},
			{ID: "i-spot", Node: "l4-1", State: "running"},
			{ID: "i-gone", Node: "h200x8-2", State: "shutting-down", Reservation: "cr-block"},
		},
		rs: []cloud.Reservation{
			{ID: "cr-block", Type: capacity.BlockType, State: "active", End: end},
			{ID: "cr-odcr", Type: "default", State: "active"},
		},
	}
	s := &fakeSlurm{fences: map[string]fence{}, windows: map[string][2]time.Time{}}
	now := end.Add(-2 * time.Hour)
	w, err := New(c, s, s, Options{Blocks: []string{"cr-block"}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	w.Wait()
	warn := time.Date(2026, 12, 1, 17, 20, 0, 0, time.UTC)
	if len(s.fences) != 1 || s.fences["burst_block_i-block"].nodes != "h200x8-1" || s.windows["burst_block_i-block"] != [2]time.Time{warn, end} {
		t.Errorf("fences %+v %v, want burst_block_i-block on h200x8-1 from 17:20 to 18:00", s.fences, s.windows)
	}
	if len(s.evac) != 0 {
		t.Errorf("evacuated %+v two hours before the end", s.evac)
	}
	now = warn.Add(-time.Second)
	_ = w.Pass(ctx)
	w.Wait()
	if len(s.evac) != 0 {
		t.Errorf("evacuated %+v a second before the warning", s.evac)
	}
	now = warn
	for range 3 {
		if err := w.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		w.Wait()
	}
	reclaim := time.Date(2026, 12, 1, 17, 30, 0, 0, time.UTC)
	if len(s.evac) != 1 || s.evac[0].Node != "h200x8-1" || s.evac[0].InstanceID != "i-block" || !s.evac[0].Deadline.Equal(reclaim) || s.evac[0].Action != NoticeAction {
		t.Errorf("evacuations %+v, want one of h200x8-1 (i-block) with deadline 17:30, EC2's reclaim", s.evac)
	}
	// a restarted sizer finds the fence there: no error, no second one
	w2, _ := New(c, s, s, Options{Now: func() time.Time { return now }})
	if err := w2.Pass(ctx); err != nil {
		t.Errorf("a second watcher's pass: %v", err)
	}
	w2.Wait()
}

// A deposed leader's pass (Fence refuses) reserves no node and evacuates
// nothing, even at the warning.
func TestPassFencedActsOnNothing(t *testing.T) {
	end := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	c := &fakeCloud{
		insts: []cloud.Instance{{ID: "i-block", Node: "h200x8-1", State: "running", Reservation: "cr-block"}},
		rs:    []cloud.Reservation{{ID: "cr-block", Type: capacity.BlockType, State: "active", End: end}},
	}
	s := &fakeSlurm{fences: map[string]fence{}, windows: map[string][2]time.Time{}}
	deposed := errors.New("this sizer no longer leads")
	w, err := New(c, s, s, Options{Blocks: []string{"cr-block"}, Now: func() time.Time { return end.Add(-35 * time.Minute) },
		Fence: func(context.Context) error { return deposed }})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Pass(context.Background()); !errors.Is(err, deposed) {
		t.Errorf("pass: %v, want the fence's refusal", err)
	}
	w.Wait()
	if len(s.fences) != 0 || len(s.evac) != 0 {
		t.Errorf("a fenced pass reserved %v and evacuated %v", s.fences, s.evac)
	}
}
