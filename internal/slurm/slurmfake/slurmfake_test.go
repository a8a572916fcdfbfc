package slurmfake

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/burst-hpc/burst/internal/slurm"
)

func TestState(t *testing.T) {
	ctx := context.Background()
	s := New([]slurm.Job{{ID: 1, State: "RUNNING", Nodes: "n1"}, {ID: 2, State: "PENDING"}}, []slurm.Node{{Name: "n1"}, {Name: "n2"}})
	if js, _ := s.Jobs(ctx, 2, 9); len(js) != 1 || js[0].ID != 2 {
		t.Fatalf("Jobs(2, 9) = %+v", js)
	}
	if ns, _ := s.Nodes(ctx, "n2"); len(ns) != 1 || ns[0].Name != "n2" {
		t.Fatalf("Nodes(n2) = %+v", ns)
	}
	s.Requeue(ctx, 1)
	s.Hold(ctx, 1, "why")
	s.UpdateNodes(ctx, slurm.NodeUpdate{Names: []string{"n1"}, State: "POWER_DOWN_FORCE", Reason: "gone", Comment: "c"})
	if j, _ := s.Job(1); j.State != "PENDING" || j.Nodes != "" || j.RestartCount != 1 || j.AdminComment != "why" || j.Reason != "JobHeldAdmin" {
		t.Fatalf("job 1: %+v", j)
	}
	if n, _ := s.Node("n1"); n.Reason != "gone" || n.Comment != "c" {
		t.Fatalf("node n1: %+v", n)
	}
	want := []string{"requeue 1", "hold 1 why", "update n1 POWER_DOWN_FORCE gone | c"}
	if !slices.Equal(s.Calls(), want) {
		t.Fatalf("calls %q, want %q", s.Calls(), want)
	}
	s.RequeueErr = map[uint32]error{2: errors.New("not requeueable")}
	if err := s.Requeue(ctx, 2); err == nil {
		t.Fatal("injected error not returned")
	}
	if j, _ := s.Job(2); j.State != "PENDING" || j.RestartCount != 0 {
		t.Fatalf("a failed requeue changed the job: %+v", j)
	}
}
