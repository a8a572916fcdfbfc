package sizing

import (
	"errors"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/jobmeta"
)

// testClasses is a realistic admin class set.
func testClasses() []Class {
	return []Class{
		{Name: "t4-1x", GPUModel: "t4", GPUsPerNode: 1, InstanceTypes: []string{"g4dn.xlarge", "g4dn.2xlarge"}},
		{Name: "l4-1x", GPUModel: "l4", GPUsPerNode: 1, InstanceTypes: []string{"g6.xlarge", "g6.2xlarge"}},
		{Name: "a10g-1x", GPUModel: "a10g", GPUsPerNode: 1, InstanceTypes: []string{"g5.xlarge", "g5.2xlarge"}},
		{Name: "l40s-1x", GPUModel: "l40s", GPUsPerNode: 1, InstanceTypes: []string{"g6e.xlarge", "g6e.2xlarge"}},
		{Name: "l40s-4x", GPUModel: "l40s", GPUsPerNode: 4, InstanceTypes: []string{"g6e.12xlarge", "g6e.24xlarge"}},
		{Name: "l40s-8x", GPUModel: "l40s", GPUsPerNode: 8, InstanceTypes: []string{"g6e.48xlarge"}},
		{Name: "a100-8x", GPUModel: "a100", GPUsPerNode: 8, MaxNodes: 16, InstanceTypes: []string{"p4d.24xlarge"}},
		{Name: "a100-80g-8x", GPUModel: "a100", GPUsPerNode: 8, MaxNodes: 16, InstanceTypes: []string{"p4de.24xlarge"}},
		{Name: "h100-1x", GPUModel: "h100", GPUsPerNode: 1, InstanceTypes: []string{"p5.4xlarge"}, Capacity: capacity.OnDemand},
		{Name: "h100-8x", GPUModel: "h100", GPUsPerNode: 8, MaxNodes: 16, InstanceTypes: []string{"p5.48xlarge"}},
	}
}

func newTestPolicy(t testing.TB) *Policy {
	t.Helper()
	p, err := New(catalog.Default(), "us-east-1", testClasses(), DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func md(t testing.TB, s string) jobmeta.Metadata {
	t.Helper()
	m, errs := jobmeta.ParseMetadata(s)
	if len(errs) > 0 {
		t.Fatalf("metadata %q: %v", s, errs)
	}
	return m
}

func TestRouteCapacity(t *testing.T) {
	p := newTestPolicy(t)
	cases := []struct {
		name string
		req  Request
		want capacity.Type
		why  string
	}{
		{"checkpointing job is spot", Request{GPUsPerNode: 1, Metadata: md(t, "burst: params=1B dataset=20GB workload=finetune checkpoint=30m")}, capacity.Spot, "spot"},
		{"no-requeue goes on-demand", Request{GPUsPerNode: 1, NoRequeue: true, Metadata: md(t, "burst: params=1B dataset=20GB workload=finetune")}, capacity.OnDemand, "no-requeue"},
		{"checkpoint=none goes on-demand", Request{GPUsPerNode: 1, Metadata: md(t, "burst: params=1B dataset=20GB workload=finetune checkpoint=none")}, capacity.OnDemand, "cannot checkpoint"},
		{"capacity=on-demand is honoured", Request{GPUsPerNode: 1, Metadata: md(t, "burst: capacity=on-demand")}, capacity.OnDemand, "on-demand"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := p.Route(RouteInput{Request: c.req})
			if err != nil {
				t.Fatal(err)
			}
			if d.Capacity != c.want || !strings.Contains(d.Reason, c.why) {
				t.Errorf("got %s: %s", d.Capacity, d.Reason)
			}
		})
	}
	d, err := p.Route(RouteInput{Request: Request{GPUModel: "a100", GPUsPerNode: 8}})
	if err != nil || d.Class != "a100-8x" || d.Gres != "gpu:a100:8" || d.InstanceTypes[0] != "p4d.24xlarge" || d.Nodes != 1 {
		t.Errorf("no metadata: cheapest class with the GPUs: %+v %v", d, err)
	}
}

func TestRouteOverBudgetAndNoFit(t *testing.T) {
	p := newTestPolicy(t)
	d, err := p.Route(RouteInput{Request: Request{GPUsPerNode: 1}, Budget: Budget{Account: "physics", CapUSD: 100, SpentUSD: 100.5}})
	if err != nil || !d.Refused || !strings.Contains(d.RefuseMessage, "physics") || !strings.Contains(d.RefuseMessage, "budget") {
		t.Fatalf("want refusal, got %+v %v", d, err)
	}
	// 2T params in bf16 are 4 TB of weights: more than 64 T4 nodes hold.
	_, err = p.Route(RouteInput{Request: Request{GPUModel: "t4", Metadata: md(t, "burst: params=2T workload=inference")}})
	if !errors.Is(err, ErrNoClass) || !strings.Contains(err.Error(), "GiB") {
		t.Fatalf("want ErrNoClass with memory, got %v", err)
	}
	_, err = p.Route(RouteInput{Request: Request{GPUModel: "a100", Nodes: 32, GPUsPerNode: 8, Explicit: Explicit{GPUs: true, Nodes: true}}})
	if !errors.Is(err, ErrNoClass) || !strings.Contains(err.Error(), "16 nodes") {
		t.Fatalf("want ErrNoClass for max nodes, got %v", err)
	}
}

func TestRank(t *testing.T) {
	p := newTestPolicy(t)
	req := Request{GPUsPerNode: 1}
	offers, err := p.Rank(RankInput{Class: "l4-1x", Request: req, Zones: []string{"us-east-1a", "us-east-1b"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(offers) != 8 {
		t.Fatalf("want 2 types x 2 zones x 2 capacities, got %d: %+v", len(offers), offers)
	}
	for i := 1; i < len(offers); i++ {
		if offers[i].ExpectedUSD < offers[i-1].ExpectedUSD {
			t.Errorf("not sorted at %d: %+v", i, offers)
		}
	}
	if offers[0].Capacity != capacity.Spot || offers[len(offers)-1].Capacity != capacity.OnDemand {
		t.Errorf("spot should rank first: %+v", offers)
	}
	un := []Unavailable{{InstanceType: offers[0].InstanceType, Zone: offers[0].Zone, Capacity: capacity.Spot}}
	o2, err := p.Rank(RankInput{Class: "l4-1x", Request: req, Zones: []string{"us-east-1a", "us-east-1b"}, Unavailable: un})
	if err != nil {
		t.Fatal(err)
	}
	if len(o2) != 7 || o2[0] == offers[0] {
		t.Errorf("unavailable offering not excluded: %+v", o2)
	}
	// No requeue: on-demand only.
	od, _ := p.Rank(RankInput{Class: "l4-1x", Request: Request{NoRequeue: true}})
	for _, o := range od {
		if o.Capacity != capacity.OnDemand {
			t.Errorf("no-requeue job offered %+v", o)
		}
	}
	// Spot-only class and a job that must not be interrupted: nothing.
	if _, err := p.Rank(RankInput{Class: "h100-8x", Request: Request{NoRequeue: true}}); err != nil {
		t.Errorf("spot-then-on-demand class should offer on-demand: %v", err)
	}
	if _, err := p.Rank(RankInput{Class: "nope"}); !errors.Is(err, ErrUnknownClass) {
		t.Errorf("unknown class: %v", err)
	}
	all := []Unavailable{{InstanceType: "p5.4xlarge"}}
	if _, err := p.Rank(RankInput{Class: "h100-1x", Unavailable: all}); !errors.Is(err, ErrNoOffering) {
		t.Errorf("all unavailable: %v", err)
	}
	_, err = p.Rank(RankInput{Class: "l4-1x", Budget: Budget{Account: "a", CapUSD: 1, SpentUSD: 2}})
	var ob *OverBudgetError
	if !errors.As(err, &ob) || !errors.Is(err, ErrOverBudget) {
		t.Errorf("over budget: %v", err)
	}
}

func TestNewValidates(t *testing.T) {
	_, err := New(catalog.Default(), "", []Class{
		{Name: "a", GPUModel: "a100", GPUsPerNode: 4, InstanceTypes: []string{"p4d.24xlarge"}},
		{Name: "a", GPUModel: "l4", GPUsPerNode: 1, InstanceTypes: []string{"g6.xlarge"}},
		{Name: "b", GPUModel: "l4", GPUsPerNode: 1, InstanceTypes: []string{"nope.xlarge"}, Capacity: "cheap"},
		{Name: "c", GPUModel: "l4", GPUsPerNode: 1},
	}, Params{})
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{`class "a": instance type p4d.24xlarge has 8 x a100`, "duplicate", "nope.xlarge", `capacity "cheap"`, `class "c": no instance types`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestClassesFromCatalog(t *testing.T) {
	cs := ClassesFromCatalog(catalog.Default())
	p, err := New(catalog.Default(), "us-east-1", cs, Params{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Class("a100-8x"); !ok {
		t.Errorf("no a100-8x in %v", cs)
	}
	d, err := p.Route(RouteInput{Request: Request{Metadata: md(t, "burst: params=70B workload=inference")}})
	if err != nil {
		t.Fatal(err)
	}
	if d.NeedGPUMemPerGPUGiB <= 0 || d.Class == "" {
		t.Errorf("%+v", d)
	}
}

func TestSpotRiskFactor(t *testing.T) {
	// >20% bucket: 0.25/730 per hour; 2 nodes, 1 h checkpoints, 10 min relaunch.
	got := SpotRiskFactor(catalog.InterruptOver20.HourlyRate(), 2, 1, 1.0/6)
	want := 1 + 0.25/730*2*(0.5+1.0/6)
	if d := got - want; d > 1e-12 || d < -1e-12 {
		t.Errorf("got %v want %v", got, want)
	}
	if SpotRiskFactor(0.01, 1, 100, 0) <= SpotRiskFactor(0.01, 1, 1, 0) {
		t.Error("longer checkpoint interval must cost more")
	}
}

// TestEveryPrecisionHasAWeight: each precision the metadata grammar accepts
// has a size in the memory model.
func TestEveryPrecisionHasAWeight(t *testing.T) {
	for _, p := range jobmeta.Precisions {
		if _, ok := weightBytes[p]; !ok {
			t.Errorf("precision %s has no weight size", p)
		}
	}
}
