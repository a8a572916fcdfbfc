package cloudfake

import (
	"context"
	"errors"
	"testing"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
)

var (
	a = cloud.Offering{InstanceType: "g6.xlarge", Zone: "z1", Capacity: capacity.Spot}
	b = cloud.Offering{InstanceType: "g6.xlarge", Zone: "z2", Capacity: capacity.Spot}
)

func nodes(names ...string) []cloud.NodeSpec {
	var out []cloud.NodeSpec
	for _, n := range names {
		out = append(out, cloud.NodeSpec{Node: n, JobID: 1})
	}
	return out
}

func TestLaunchSemantics(t *testing.T) {
	ctx := context.Background()
	p := New("c")
	p.SetCapacity(a, 1)
	// all-or-nothing: a has room for one, so both go to b
	res, err := p.Launch(ctx, cloud.LaunchRequest{Cluster: "c", Nodes: nodes("n1", "n2"), Offerings: []cloud.Offering{a, b}, AllOrNothing: true})
	if err != nil || len(res.Instances) != 2 || res.Instances[0].Zone != "z2" || res.Instances[1].Zone != "z2" || len(res.Tried) != 2 {
		t.Fatalf("aon: %+v %v", res, err)
	}
	// a repeat reuses the live instances
	res, err = p.Launch(ctx, cloud.LaunchRequest{Cluster: "c", Nodes: nodes("n1", "n2"), Offerings: []cloud.Offering{a, b}, AllOrNothing: true})
	if err != nil || len(res.Reused) != 2 || len(p.Live()) != 2 {
		t.Fatalf("repeat: %+v %v", res, err)
	}
	// independent nodes: one gets a, the other nothing when b is dry too
	p.SetCapacity(b, 0)
	res, err = p.Launch(ctx, cloud.LaunchRequest{Cluster: "c", Nodes: nodes("n3", "n4"), Offerings: []cloud.Offering{a, b}})
	if err != nil || len(res.Instances) != 1 || len(res.Failed) != 1 || !errors.Is(res.Failed["n4"], cloud.ErrInsufficientCapacity) {
		t.Fatalf("independent: %+v %v", res, err)
	}
	if _, err := p.Launch(ctx, cloud.LaunchRequest{Cluster: "other", Nodes: nodes("n5"), Offerings: []cloud.Offering{a}}); err == nil {
		t.Fatal("a request for another cluster launched")
	}
	gone, err := p.Terminate(ctx, []string{"n1", "n3"})
	if err != nil || len(gone) != 2 || len(p.Terminated()) != 2 || len(p.Live()) != 1 {
		t.Fatalf("terminate: %+v %v", gone, err)
	}
	if l, _ := p.List(ctx); len(l) != 3 {
		t.Fatalf("list shows %d instances, want 3 (shutting-down ones too)", len(l))
	}
}
