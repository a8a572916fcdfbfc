package sizing

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/catalog"
)

// exampleClasses are examples/burst.yaml's classes and partitions.
func exampleClasses() []Class {
	gpu := []string{"gpu"}
	return []Class{
		{Name: "l4", GPUModel: "l4", GPUsPerNode: 1, MaxNodes: 32, InstanceTypes: []string{"g6.xlarge", "g6.2xlarge", "g6.4xlarge"}, Partition: "gpu", Partitions: gpu},
		{Name: "a10g", GPUModel: "a10g", GPUsPerNode: 1, MaxNodes: 32, InstanceTypes: []string{"g5.xlarge", "g5.2xlarge"}, Partition: "gpu", Partitions: gpu},
		{Name: "a10gx4", GPUModel: "a10g", GPUsPerNode: 4, MaxNodes: 8, InstanceTypes: []string{"g5.12xlarge", "g5.24xlarge"}, Capacity: capacity.Spot, Partition: "gpu", Partitions: gpu},
		{Name: "h100x8", GPUModel: "h100", GPUsPerNode: 8, MaxNodes: 4, InstanceTypes: []string{"p5.48xlarge"}, Capacity: capacity.OnDemand, Partition: "gpu", Partitions: []string{"gpu", "gpu-big"}},
	}
}

func examplePolicy(t testing.TB, params Params, classes ...Class) *Policy {
	t.Helper()
	if classes == nil {
		classes = exampleClasses()
	}
	p, err := New(catalog.Default(), "us-east-1", classes, params)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func route(t *testing.T, p *Policy, in RouteInput) Decision {
	t.Helper()
	d, err := p.Route(in)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", d)
	return d
}

// TestIssueExamples are the four cases issue 15 reported, before -> after.
func TestIssueExamples(t *testing.T) {
	p := examplePolicy(t, DefaultParams())
	t.Run("--gres=gpu:8 with params= stays at 8 GPUs", func(t *testing.T) {
		d := route(t, p, RouteInput{Request: Request{GPUsPerNode: 8, Explicit: Explicit{GPUs: true}, Metadata: md(t, "burst: params=1B dataset=20GB workload=finetune")}})
		if d.GPUsPerNode != 8 || d.Nodes != 1 || d.Class != "h100x8" || d.Refused {
			t.Errorf("want 1 x 8 GPUs kept, got %d x %d %s", d.Nodes, d.GPUsPerNode, d.Class)
		}
		if d.Suggestion == "" || !strings.Contains(d.Suggestion, "cheaper plan fits") || !strings.Contains(d.Reason, "kept what you asked for") {
			t.Errorf("a cheaper plan should be suggested, not applied: %q", d.Suggestion)
		}
	})
	t.Run("--partition gpu-big is kept", func(t *testing.T) {
		d := route(t, p, RouteInput{Request: Request{Partition: "gpu-big", Explicit: Explicit{Partition: true}, Metadata: md(t, "burst: params=1B workload=finetune")}})
		if d.Class != "h100x8" || d.Partition != "" {
			t.Errorf("want h100x8 in the user's partition, got %s partition %q", d.Class, d.Partition)
		}
		// one A10G: the same spot price as an L4 for 125 against 121 TFLOPS
		// (cheaper per unit of work; no tokens, so no cost per run)
		if !strings.Contains(d.Suggestion, "1 node(s) of a10g") {
			t.Errorf("suggestion %q", d.Suggestion)
		}
	})
	t.Run("--nodes 4 with a 70B finetune shards over all 32 GPUs", func(t *testing.T) {
		d := route(t, p, RouteInput{Request: Request{Nodes: 4, Explicit: Explicit{Nodes: true}, Metadata: md(t, "burst: params=70B dataset=1TB workload=finetune deadline=2d")}})
		// 70e9 x 16 B / 32 GPUs of model state, plus activations of Llama 3.1 70B's shape
		acts := 2.0*2048*8192*80 + 34.0*2048*8192 + 4.0*2048*128256
		want := (70e9*16/32 + acts) / (1 << 30)
		if d.Refused || d.Nodes != 4 || d.Class != "h100x8" || d.NeedGPUMemPerGPUGiB < want-0.01 || d.NeedGPUMemPerGPUGiB > want+0.01 {
			t.Errorf("want 4 x h100x8 at %.2f GiB per GPU, got %+v", want, d)
		}
		if !strings.Contains(d.Sharding, "zero3") {
			t.Errorf("sharding %q", d.Sharding)
		}
		// 6 x (70e9 + 2 x 80 layers x 8192 x 2048 seq) x 2.5e11 tokens at
		// 989 TFLOPS x the MFU of mfu.go for 70B on H100 x 32 GPUs x (1 - 0.05 x 1.5)
		mfu := 0.3195 / (1 + math.Pow(3.39e8/70e9, 0.4708))
		hours := 6 * (70e9 + 2*80*8192*2048) * (1e12 / 4) / (32 * 989e12 * mfu * (1 - 0.05*1.5)) / 3600
		if d.EstHours < hours*0.999 || d.EstHours > hours*1.001 || d.MeetsDeadline {
			t.Errorf("est %.2f h, want %.2f h and a missed 48 h deadline", d.EstHours, hours)
		}
		// sizer/README.md's route --json example
		readmeHas(t, fmt.Sprintf("4 x h100x8, %.1f GiB per GPU under ZeRO-3 over 32 GPUs, %s h", want, commas(hours)), fmt.Sprintf("at the %.1f%% MFU", 100*mfu))
	})
	t.Run("10B on 50TB with 30d scales out to max_nodes and says it misses", func(t *testing.T) {
		d := route(t, p, RouteInput{Request: Request{Metadata: md(t, "burst: params=10B dataset=50TB workload=train deadline=30d")}})
		if d.Nodes != 4 || d.Class != "h100x8" || d.MeetsDeadline || !strings.Contains(d.Reason, "no plan meets") {
			t.Errorf("want the fastest plan, 4 x h100x8, flagged: %+v", d)
		}
		if !strings.Contains(d.Reason, "1 node(s) would take") {
			t.Errorf("reason should say what one node would take: %s", d.Reason)
		}
	})
}

// TestScaleOutToDeadline: one L4 class of up to 8 nodes, a 1B full
// fine-tune that takes 1,000 h on one node (at the MFU of mfu.go for 1B
// on an L4, with Llama 3.2 1B's 16 layers x 2048 for the attention FLOPs). Over TCP (g6.xlarge has no
// EFA) each extra node runs at 0.70, so n nodes take 1000 / (0.70 n) h:
// a 300 h deadline needs n >= 4.76, so 5 nodes (285.7 h).
func TestScaleOutToDeadline(t *testing.T) {
	l4 := Class{Name: "l4", GPUModel: "l4", GPUsPerNode: 1, MaxNodes: 8, InstanceTypes: []string{"g6.xlarge"}, MaxTime: 7 * 24 * time.Hour, Partition: "gpu"}
	p := examplePolicy(t, DefaultParams(), l4)
	mfu := 0.4560 * 0.75 / (1 + math.Pow(3.39e8*121/989/1e9, 0.4708))
	tokens := 1000 * 3600 * 121e12 * mfu / (6 * (1e9 + 2*16*2048*2048)) // 1,000 h on one L4
	meta := md(t, "burst: params=1B workload=finetune checkpoint=30m")
	meta.Tokens = tokens
	noDeadline := route(t, p, RouteInput{Request: Request{Metadata: meta}})
	if noDeadline.Nodes != 1 {
		t.Errorf("without a deadline the cheapest plan is one node, got %d", noDeadline.Nodes)
	}
	if len(noDeadline.Warnings) != 2 || !strings.Contains(noDeadline.Reason, "MaxTime") || !strings.Contains(noDeadline.Reason, "days") {
		t.Errorf("want warnings for MaxTime (7 days) and for > 30 days: %v", noDeadline.Warnings)
	}
	meta.Deadline = 300 * time.Hour
	d := route(t, p, RouteInput{Request: Request{Metadata: meta}})
	want := 1000 / (0.70 * 5)
	if d.Nodes != 5 || !d.MeetsDeadline || d.EstHours < want || d.EstHours > want*1.01 {
		t.Errorf("want 5 nodes, %.1f h (plus spot rework), got %d nodes %.2f h", want, d.Nodes, d.EstHours)
	}
	// the cheapest fitting plan is one node; the reason says what it would take
	if d.ScalingEfficiency != 0.7 || !strings.Contains(d.Reason, "no EFA (TCP) between nodes 0.7)") || !strings.Contains(d.Reason, "1 node(s) would take 1000.1 h") {
		t.Errorf("efficiency %v, reason %s", d.ScalingEfficiency, d.Reason)
	}
	// An explicit --nodes wins over the deadline.
	d = route(t, p, RouteInput{Request: Request{Nodes: 2, Explicit: Explicit{Nodes: true}, Metadata: meta}})
	if d.Nodes != 2 || d.MeetsDeadline {
		t.Errorf("explicit 2 nodes: %+v", d)
	}
}

func TestExplicitRequestPredictedOOMIsRefused(t *testing.T) {
	p := examplePolicy(t, DefaultParams())
	// 7B full fine-tune: 112 GB of model state on one 22 GiB L4.
	in := RouteInput{Request: Request{GPUModel: "l4", GPUsPerNode: 1, Nodes: 1, Explicit: Explicit{GPUs: true, Nodes: true}, Metadata: md(t, "burst: params=7B workload=finetune")}}
	d := route(t, p, in)
	if !d.Refused || !strings.Contains(d.RefuseMessage, "cannot hold this job") || !strings.Contains(d.RefuseMessage, "A plan that fits") {
		t.Fatalf("want a refusal with the numbers and a plan that fits: %+v", d)
	}
	for _, w := range []string{"weights 13.0", "optimizer 78.2", "20.1 GiB usable"} {
		if !strings.Contains(d.RefuseMessage, w) {
			t.Errorf("refusal lacks %q: %s", w, d.RefuseMessage)
		}
	}
	// With the nodes left open --gres keeps one node (issue 31), so it is
	// refused too, naming the --nodes that shards it over enough L4 nodes:
	// (2+2+12) x 7e9 / n + activations <= 20.1 GiB takes n = 6.
	open := in
	open.Request.Nodes, open.Request.Explicit = 0, Explicit{GPUs: true}
	if d := route(t, p, open); !d.Refused || !strings.Contains(d.RefuseMessage, "keeps one node") || !strings.Contains(d.RefuseMessage, "add --nodes 6:") {
		t.Errorf("nodes open: want refused with --nodes 6 named: %+v", d)
	}
	asked := in
	asked.Request.Nodes = 6
	if d := route(t, p, asked); d.Refused || d.Nodes != 6 || d.GPUsPerNode != 1 || !strings.Contains(d.Sharding, "zero3") {
		t.Errorf("--nodes 6: %+v", d)
	}
	// The same job with nothing explicit is sized to fit.
	free := route(t, p, RouteInput{Request: Request{Metadata: in.Request.Metadata}})
	if free.Refused || free.NeedGPUMemPerGPUGiB > free.UsableGPUMemGiB {
		t.Errorf("metadata-only: %+v", free)
	}
}

func TestRewriteExplicit(t *testing.T) {
	pr := DefaultParams()
	pr.RewriteExplicit = true
	p := examplePolicy(t, pr)
	d := route(t, p, RouteInput{Request: Request{GPUsPerNode: 8, Explicit: Explicit{GPUs: true}, Metadata: md(t, "burst: params=1B dataset=20GB workload=finetune")}})
	if d.GPUsPerNode != 1 || !d.Downsized || !strings.Contains(d.Reason, "sizing.rewrite_explicit") {
		t.Errorf("with rewrite_explicit the cheaper plan is applied: %+v", d)
	}
}

func TestLearningDownAndUp(t *testing.T) {
	p := examplePolicy(t, DefaultParams())
	// 20B bf16 inference: 40 GB of weights, two L4 nodes.
	req := Request{JobName: "serve", User: "ann", Metadata: md(t, "burst: params=20B workload=inference")}
	first := route(t, p, RouteInput{Request: req})
	if first.Nodes*first.GPUsPerNode < 2 {
		t.Fatalf("20B in bf16 needs at least 2 GPUs of 22 GiB: %+v", first)
	}
	// Two runs that used 4,000 MiB of their 2 x 22,888 MiB.
	h := History{Key: "k", Jobs: 2, GPUsAllocated: 1, NodesAllocated: 2, GPUMemoryMiBAllocated: 22888, GPUsUsed: 1,
		PeakGPUMemoryMiB: 2000, PeakPerGPUMiB: 2000, PeakJobGPUMemoryMiB: 4000, JobGPUMemoryMiB: 2 * 22888, MeanUtilPct: 40}
	down := route(t, p, RouteInput{Request: req, History: h})
	// 1.25 x 4,000 MiB = 5,000 MiB fits one L4 (20.1 GiB usable)
	if !down.Downsized || down.Nodes != 1 || down.NeedGPUMemPerGPUGiB != 4.88 || !strings.Contains(down.Reason, "learned: your last 2 runs of serve") || down.HistoryKey != "k" {
		t.Errorf("want 1 node at 5000 MiB from history: %+v", down)
	}
	// One run is not enough; a well-used one changes nothing.
	if d := route(t, p, RouteInput{Request: req, History: History{Jobs: 1, GPUsAllocated: 1, NodesAllocated: 2, GPUMemoryMiBAllocated: 22888, GPUsUsed: 1, PeakGPUMemoryMiB: 2000}}); d.Downsized {
		t.Error("downsized from one run")
	}
	busy := h
	busy.PeakGPUMemoryMiB, busy.PeakPerGPUMiB, busy.PeakJobGPUMemoryMiB = 20000, 20000, 40000
	if d := route(t, p, RouteInput{Request: req, History: busy}); d.Downsized {
		t.Error("a busy history downsized")
	}
	// Explicit requests are not rewritten by learning.
	ex := req
	ex.Nodes, ex.Explicit = 2, Explicit{Nodes: true}
	if d := route(t, p, RouteInput{Request: ex, History: h}); d.Downsized || d.Nodes != 2 || !strings.Contains(d.Suggestion, "cheaper plan") {
		t.Errorf("explicit nodes with learned history: %+v", d)
	}

	// A 1B fine-tune fits one L4; after a run on 1 x 22,888 MiB ran out of
	// memory the next must have more: two L4 nodes, sharded.
	ft := Request{JobName: "ft", User: "ann", Metadata: md(t, "burst: params=1B workload=finetune")}
	before := route(t, p, RouteInput{Request: ft})
	if before.Nodes != 1 || before.GPUsPerNode != 1 {
		t.Fatalf("1B fine-tune: %+v", before)
	}
	oom := History{Key: "k2", LastOOM: &OOMRun{JobID: "7", Class: before.Class, Nodes: 1, GPUsPerNode: 1, GPUMemoryMiB: 22888, Evidence: `"CUDA out of memory" in slurm-7.out`}}
	up := route(t, p, RouteInput{Request: ft, History: oom})
	total := up.Nodes * up.GPUsPerNode
	if !up.Upsized || total < 2 || !strings.Contains(up.Reason, "ended out of GPU memory") || !strings.Contains(up.Reason, "CUDA out of memory") {
		t.Errorf("want more GPU memory than 22,888 MiB: %+v", up)
	}
	if up.Nodes == 2 && !strings.Contains(up.Sharding, "zero3") {
		t.Errorf("two 22 GiB GPUs only hold more when sharded: %s", up.Sharding)
	}
}

func TestInferenceTargets(t *testing.T) {
	p := examplePolicy(t, DefaultParams())
	// 8B bf16: 16 GB read per token. One L4 at 300 GB/s x 0.5: 0.107 s per
	// token; one A10G at 600 GB/s: 0.054 s. A 60 ms target rules the L4 out.
	d := route(t, p, RouteInput{Request: Request{Metadata: md(t, "burst: params=8B workload=inference latency=60ms")}})
	if !d.MeetsDeadline || d.TokenLatencyMS > 60 || d.GPUModel == "l4" {
		t.Errorf("want a plan under 60 ms/token: %+v", d)
	}
	// throughput scales with pipelined nodes, latency does not
	tp := route(t, p, RouteInput{Request: Request{Metadata: md(t, "burst: params=8B workload=inference throughput=50")}})
	if !tp.MeetsDeadline || tp.TokensPerSec < 50 {
		t.Errorf("want >= 50 tokens/s: %+v", tp)
	}
	// tokens= gives the run time: tokens / tokens per second.
	tk := route(t, p, RouteInput{Request: Request{Metadata: md(t, "burst: params=8B workload=inference tokens=36M capacity=on-demand")}})
	if tk.EstHours <= 0 || tk.TokensPerSec <= 0 {
		t.Errorf("want hours from the decode rate: %+v", tk)
	}
	if want := 36e6 / tk.TokensPerSec / 3600; tk.EstHours < want*0.99 || tk.EstHours > want*1.02 {
		t.Errorf("est %.2f h, want %.2f", tk.EstHours, want)
	}
	impossible := route(t, p, RouteInput{Request: Request{Metadata: md(t, "burst: params=8B workload=inference latency=1ms")}})
	if impossible.MeetsDeadline || !strings.Contains(impossible.Reason, "no plan meets") {
		t.Errorf("1 ms/token cannot be met: %+v", impossible)
	}
}

func TestRecurringKey(t *testing.T) {
	a := RecurringKey("ann", "train.sh", md(t, "burst: params=7B workload=lora deadline=8h"))
	b := RecurringKey("ann", "train.sh", md(t, "burst: workload=lora params=7B deadline=2d checkpoint=10m"))
	if a != b || len(a) != 16 {
		t.Errorf("same job, keys %q %q", a, b)
	}
	for _, other := range []string{RecurringKey("bob", "train.sh", md(t, "burst: params=7B workload=lora")),
		RecurringKey("ann", "eval.sh", md(t, "burst: params=7B workload=lora")),
		RecurringKey("ann", "train.sh", md(t, "burst: params=13B workload=lora"))} {
		if other == a {
			t.Error("different job, same key")
		}
	}
}

func TestNoFitNamesTheShortfall(t *testing.T) {
	p := examplePolicy(t, DefaultParams(), exampleClasses()[:2]...)
	_, err := p.Route(RouteInput{Request: Request{Metadata: md(t, "burst: params=70B workload=finetune")}})
	if !errors.Is(err, ErrNoClass) || !strings.Contains(err.Error(), "32 node(s) x 1 GPU(s) need") || !strings.Contains(err.Error(), "max_nodes") {
		t.Errorf("got %v", err)
	}
}
