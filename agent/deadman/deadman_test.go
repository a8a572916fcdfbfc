package deadman

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
)

type fakeTerm struct{ n int }

func (f *fakeTerm) TerminateSelf(context.Context) error { f.n++; return nil }

func TestSwitch(t *testing.T) {
	now := time.Unix(1000, 0)
	sl := slurmfake.New(nil, []slurm.Node{{Name: "l4-1", State: "ALLOCATED"}})
	term := &fakeTerm{}
	s := New(sl, term, Options{Node: "l4-1", After: 10 * time.Minute, Now: func() time.Time { return now }})
	step := func(d time.Duration) bool {
		now = now.Add(d)
		fired, err := s.Check(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return fired
	}
	if step(0) {
		t.Fatal("fired on a healthy node")
	}
	sl.SetNodes(slurm.Node{Name: "l4-1", State: "IDLE", Flags: []string{"CLOUD", "POWERED_DOWN"}})
	if step(time.Minute) || step(9*time.Minute-time.Second) {
		t.Fatal("fired before the configured time")
	}
	// back in service resets the clock
	sl.SetNodes(slurm.Node{Name: "l4-1", State: "IDLE"})
	if step(time.Minute) {
		t.Fatal("fired on a node back in service")
	}
	sl.SetNodes()
	sl.NodesErr = errors.New("connection refused")
	if step(time.Second) || step(5*time.Minute) {
		t.Fatal("fired early while cut off")
	}
	if !step(5*time.Minute) || term.n != 1 {
		t.Fatalf("did not fire after 10 minutes cut off from the controller (terminations %d)", term.n)
	}
}

func TestState(t *testing.T) {
	for _, tc := range []struct {
		nodes []slurm.Node
		err   error
		bad   bool
	}{
		{[]slurm.Node{{Name: "n", State: "MIXED"}}, nil, false},
		{[]slurm.Node{{Name: "n", State: "DOWN", Reason: "Not responding"}}, nil, true},
		{[]slurm.Node{{Name: "n", State: "IDLE", Flags: []string{"POWERING_DOWN"}}}, nil, true},
		{[]slurm.Node{{Name: "other", State: "IDLE"}}, nil, true},
		{nil, errors.New("timeout"), true},
	} {
		if got := State(tc.nodes, tc.err, "n") != ""; got != tc.bad {
			t.Errorf("%+v %v: bad=%v", tc.nodes, tc.err, got)
		}
	}
}
