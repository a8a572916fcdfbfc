package sizing

import (
	"errors"
	"strings"
	"testing"
	"time"

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
		{Name: "h100-1x", GPUModel: "h100", GPUsPerNode: 1, InstanceTypes: []string{"p5.4xlarge"}, Capacity: jobmeta.CapacityOnDemand},
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

func classOf(t testing.TB, p *Policy, name string) Class {
	c, ok := p.Class(name)
	if !ok {
		t.Fatalf("no class %s", name)
	}
	return c
}

func TestRoute(t *testing.T) {
	p := newTestPolicy(t)
	cases := []struct {
		name  string
		req   Request
		check func(t *testing.T, d Decision)
	}{
		{
			name: "small fine-tune fits one small GPU",
			req:  Request{JobName: "ft", User: "ann", GPUsPerNode: 1, Metadata: md(t, "burst: params=1B dataset=20GB workload=finetune precision=bf16 checkpoint=30m")},
			check: func(t *testing.T, d Decision) {
				if d.GPUsPerNode != 1 || d.Nodes != 1 {
					t.Errorf("want 1 GPU on 1 node, got %d x %d", d.GPUsPerNode, d.Nodes)
				}
				// 1B x 18.4 B/param = 17.1 GiB: must not land on a 16 GiB T4, nor on an 80 GiB+ data-centre GPU.
				if d.GPUModel == "t4" || d.GPUModel == "h100" || d.GPUModel == "a100" {
					t.Errorf("want a small GPU that holds 17 GiB, got %s", d.GPUModel)
				}
				if d.Capacity != jobmeta.CapacitySpot {
					t.Errorf("checkpointing job should be spot, got %s", d.Capacity)
				}
			},
		},
		{
			name: "10B params on 50TB gets an 8-GPU A100/H100 class",
			req:  Request{JobName: "pretrain", User: "bob", Nodes: 4, GPUsPerNode: 1, Metadata: md(t, "burst: params=10B dataset=50TB workload=train checkpoint=1h")},
			check: func(t *testing.T, d Decision) {
				if d.GPUsPerNode != 8 || (d.GPUModel != "a100" && d.GPUModel != "h100") {
					t.Errorf("want 8 x A100/H100, got %d x %s (%s)", d.GPUsPerNode, d.GPUModel, d.Reason)
				}
				if d.Nodes != 4 {
					t.Errorf("nodes changed to %d", d.Nodes)
				}
			},
		},
		{
			name: "70B inference gets a class whose memory holds it",
			req:  Request{JobName: "serve", User: "cat", GPUsPerNode: 1, TimeLimit: 4 * time.Hour, Metadata: md(t, "burst: params=70B workload=inference precision=bf16")},
			check: func(t *testing.T, d Decision) {
				need := 70e9 * 2 * InferenceOverhead / (1 << 30)
				c := classOf(t, p, d.Class)
				tp, _ := catalog.Default().Lookup(c.InstanceTypes[0])
				have := float64(c.GPUsPerNode*tp.GPUMemoryMiB) / 1024 * DefaultParams().UsableGPUMemoryFraction
				if have < need {
					t.Errorf("class %s holds %.0f GiB < %.0f GiB needed", d.Class, have, need)
				}
				if d.NeedGPUMemGiB < need*0.99 || d.NeedGPUMemGiB > need*1.01 {
					t.Errorf("need %.1f GiB, want %.1f", d.NeedGPUMemGiB, need)
				}
				// Every cheaper class must be unable to hold it.
				for _, oc := range p.Classes() {
					ot, _ := catalog.Default().Lookup(oc.InstanceTypes[0])
					ohave := float64(oc.GPUsPerNode*ot.GPUMemoryMiB) / 1024 * 0.9
					if ohave >= need && ot.SpotUSD() > 0 && ot.SpotUSD() < tp.SpotUSD()*0.999 {
						t.Errorf("cheaper class %s ($%.2f spot) also holds the model; chose %s", oc.Name, ot.SpotUSD(), d.Class)
					}
				}
				if d.EstHours < 3.99 || d.EstHours > 4.1 {
					t.Errorf("est hours %.2f, want ~4 from --time", d.EstHours)
				}
			},
		},
		{
			name: "no-requeue goes on-demand",
			req:  Request{JobName: "x", GPUsPerNode: 1, NoRequeue: true, Metadata: md(t, "burst: params=1B dataset=20GB workload=finetune")},
			check: func(t *testing.T, d Decision) {
				if d.Capacity != jobmeta.CapacityOnDemand || !strings.Contains(d.Reason, "no-requeue") {
					t.Errorf("want on-demand because of --no-requeue, got %s: %s", d.Capacity, d.Reason)
				}
			},
		},
		{
			name: "job that cannot checkpoint goes on-demand",
			req:  Request{JobName: "x", GPUsPerNode: 1, Metadata: md(t, "burst: params=1B dataset=20GB workload=finetune checkpoint=none")},
			check: func(t *testing.T, d Decision) {
				if d.Capacity != jobmeta.CapacityOnDemand || !strings.Contains(d.Reason, "cannot checkpoint") {
					t.Errorf("want on-demand because it cannot checkpoint, got %s: %s", d.Capacity, d.Reason)
				}
			},
		},
		{
			name: "capacity=on-demand is honoured",
			req:  Request{GPUsPerNode: 1, Metadata: md(t, "burst: capacity=on-demand")},
			check: func(t *testing.T, d Decision) {
				if d.Capacity != jobmeta.CapacityOnDemand {
					t.Errorf("got %s", d.Capacity)
				}
			},
		},
		{
			name: "no metadata: cheapest class with the requested GPUs",
			req:  Request{GPUModel: "a100", GPUsPerNode: 8},
			check: func(t *testing.T, d Decision) {
				if d.Class != "a100-8x" || d.Gres != "gpu:a100:8" || d.Constraint != "a100-8x" {
					t.Errorf("got %+v", d)
				}
				if d.InstanceTypes[0] != "p4d.24xlarge" {
					t.Errorf("types %v", d.InstanceTypes)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := p.Route(RouteInput{Request: tc.req})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %+v", tc.name, d)
			tc.check(t, d)
		})
	}
}

func TestRouteDeadlineForcesFasterDearerClass(t *testing.T) {
	p := newTestPolicy(t)
	req := Request{JobName: "ft", GPUsPerNode: 1, Metadata: md(t, "burst: params=1B dataset=20GB workload=finetune checkpoint=30m")}
	slow, err := p.Route(RouteInput{Request: req})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Duration(slow.EstHours / 3 * float64(time.Hour)).Round(time.Hour)
	req.Metadata.Deadline = deadline
	fast, err := p.Route(RouteInput{Request: req})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("no deadline: %s %.1fh $%.2f; deadline %s: %s %.1fh $%.2f (%s)", slow.Class, slow.EstHours, slow.EstCostUSD, deadline, fast.Class, fast.EstHours, fast.EstCostUSD, fast.Reason)
	if !fast.MeetsDeadline || fast.EstHours > deadline.Hours() {
		t.Errorf("decision %s takes %.1fh, deadline %s", fast.Class, fast.EstHours, deadline)
	}
	if fast.Class == slow.Class || fast.EstCostUSD <= slow.EstCostUSD {
		t.Errorf("want a dearer class than %s ($%.2f), got %s ($%.2f)", slow.Class, slow.EstCostUSD, fast.Class, fast.EstCostUSD)
	}
	if slow.MeetsDeadline && slow.EstHours <= deadline.Hours() {
		t.Errorf("cheap class would have met the deadline")
	}
	// An impossible deadline gets the fastest class, flagged.
	req.Metadata.Deadline = time.Minute
	d, err := p.Route(RouteInput{Request: req})
	if err != nil {
		t.Fatal(err)
	}
	if d.MeetsDeadline || !strings.Contains(d.Reason, "no class meets") {
		t.Errorf("impossible deadline: %+v", d)
	}
}

func TestRouteLearnedDownsizing(t *testing.T) {
	p := newTestPolicy(t)
	req := Request{JobName: "eval", User: "dan", GPUModel: "l40s", GPUsPerNode: 8}
	before, err := p.Route(RouteInput{Request: req})
	if err != nil {
		t.Fatal(err)
	}
	if before.Class != "l40s-8x" || before.Downsized {
		t.Fatalf("without history: %+v", before)
	}
	h := History{Jobs: 5, GPUsAllocated: 8, GPUMemoryMiBAllocated: 8 * 45776, GPUsUsed: 1, PeakGPUMemoryMiB: 20000, MeanUtilPct: 11}
	after, err := p.Route(RouteInput{Request: req, History: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("learned: %+v", after)
	if !after.Downsized || after.GPUsPerNode >= 8 || after.HourlyUSD >= before.HourlyUSD {
		t.Errorf("want a smaller class, got %+v", after)
	}
	if !strings.Contains(after.Reason, "learned") || !strings.Contains(after.Reason, "eval") || after.SavedUSD <= 0 {
		t.Errorf("reason should say what was learned and the saving: %q (saved %.2f)", after.Reason, after.SavedUSD)
	}
	// Well-used history changes nothing.
	h.GPUsUsed, h.PeakGPUMemoryMiB = 8, 300000
	same, _ := p.Route(RouteInput{Request: req, History: h})
	if same.Downsized || same.Class != before.Class {
		t.Errorf("busy history should not downsize: %+v", same)
	}
	// One job is not enough to learn from.
	h = History{Jobs: 1, GPUsAllocated: 8, GPUsUsed: 1, PeakGPUMemoryMiB: 1000, GPUMemoryMiBAllocated: 8 * 45776}
	if d, _ := p.Route(RouteInput{Request: req, History: h}); d.Downsized {
		t.Errorf("downsized from one job")
	}
}

func TestRouteOverBudgetAndNoFit(t *testing.T) {
	p := newTestPolicy(t)
	d, err := p.Route(RouteInput{Request: Request{GPUsPerNode: 1}, Budget: Budget{Account: "physics", CapUSD: 100, SpentUSD: 100.5}})
	if err != nil || !d.Refused || !strings.Contains(d.RefuseMessage, "physics") || !strings.Contains(d.RefuseMessage, "budget") {
		t.Fatalf("want refusal, got %+v %v", d, err)
	}
	_, err = p.Route(RouteInput{Request: Request{GPUModel: "t4", Metadata: md(t, "burst: params=70B workload=inference")}})
	if !errors.Is(err, ErrNoClass) || !strings.Contains(err.Error(), "GiB") {
		t.Fatalf("want ErrNoClass with memory, got %v", err)
	}
	_, err = p.Route(RouteInput{Request: Request{GPUModel: "a100", Nodes: 32, GPUsPerNode: 8}})
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
	if offers[0].Capacity != jobmeta.CapacitySpot || offers[len(offers)-1].Capacity != jobmeta.CapacityOnDemand {
		t.Errorf("spot should rank first: %+v", offers)
	}
	un := []Unavailable{{InstanceType: offers[0].InstanceType, Zone: offers[0].Zone, Capacity: jobmeta.CapacitySpot}}
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
		if o.Capacity != jobmeta.CapacityOnDemand {
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
	if d.NeedGPUMemGiB <= 0 || d.Class == "" {
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

func TestMemoryModel(t *testing.T) {
	cases := []struct {
		w    jobmeta.Workload
		p    jobmeta.Precision
		want float64
	}{
		{jobmeta.WorkloadInference, jobmeta.PrecisionBF16, 2.4},
		{jobmeta.WorkloadInference, jobmeta.PrecisionInt4, 0.6},
		{jobmeta.WorkloadFinetune, jobmeta.PrecisionBF16, 18.4},
		{jobmeta.WorkloadTrain, jobmeta.PrecisionFP32, 18.4},
		{jobmeta.WorkloadLoRA, jobmeta.PrecisionBF16, (2 + 0.16) * 1.15},
	}
	for _, c := range cases {
		if got := MemoryBytesPerParam(c.w, c.p); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("%s %s: got %v want %v", c.w, c.p, got, c.want)
		}
	}
	// 7B for 1T tokens on 8 H100 at 40% MFU: 6*7e9*1e12 / (8*989e12*0.4) s.
	h := ComputeHours(6*7e9*1e12, "h100", 8)
	want := 6 * 7e9 * 1e12 / (8 * 989e12 * 0.4) / 3600
	if h < want*0.999 || h > want*1.001 {
		t.Errorf("compute hours %v want %v", h, want)
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
