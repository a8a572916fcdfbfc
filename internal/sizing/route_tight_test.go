package sizing

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/jobmeta"
)

// calibrationClasses have a GPU of each size the memory facts cite: 24 GB
// (A10G, L4), 48 GB (L40S), 40 GB (A100, p4d) and 80 GB (H100).
func calibrationClasses() []Class {
	gpu := []string{"gpu"}
	return []Class{
		{Name: "l4", GPUModel: "l4", GPUsPerNode: 1, MaxNodes: 8, InstanceTypes: []string{"g6.xlarge"}, Partition: "gpu", Partitions: gpu},
		{Name: "a10g", GPUModel: "a10g", GPUsPerNode: 1, MaxNodes: 8, InstanceTypes: []string{"g5.xlarge"}, Partition: "gpu", Partitions: gpu},
		{Name: "l40s", GPUModel: "l40s", GPUsPerNode: 1, MaxNodes: 8, InstanceTypes: []string{"g6e.xlarge", "g6e.2xlarge"}, Partition: "gpu", Partitions: gpu},
		{Name: "a100x8", GPUModel: "a100", GPUsPerNode: 8, MaxNodes: 2, InstanceTypes: []string{"p4d.24xlarge"}, Partition: "gpu", Partitions: gpu},
		{Name: "h100x8", GPUModel: "h100", GPUsPerNode: 8, MaxNodes: 2, InstanceTypes: []string{"p5.48xlarge"}, Partition: "gpu", Partitions: gpu},
	}
}

// TestTightExplicitIsAdmitted is issue 31's first case: the QLoRA paper
// fine-tunes a 65B model on one 48 GB GPU; burst's estimate is above the
// usable 90% of an L40S but within the model's measured error, so the
// explicit request is admitted with a warning naming the numbers, on one
// node with or without --nodes.
func TestTightExplicitIsAdmitted(t *testing.T) {
	p := examplePolicy(t, DefaultParams(), calibrationClasses()...)
	meta := md(t, "burst: params=65B workload=finetune method=qlora")
	for _, e := range []Explicit{{GPUs: true, Nodes: true}, {GPUs: true}} {
		d := route(t, p, RouteInput{Request: Request{GPUModel: "l40s", GPUsPerNode: 1, Nodes: 1, Explicit: e, Metadata: meta}})
		if d.Refused || d.Class != "l40s" || d.Nodes != 1 || d.GPUsPerNode != 1 {
			t.Fatalf("%+v: want 1 x l40s admitted, got %+v", e, d)
		}
		if len(d.Warnings) == 0 || !strings.Contains(d.Warnings[0], "tight: the model predicts 44.2 GiB per GPU, more than the 40.2 GiB usable of each l40s GPU (44.7 GiB") ||
			!strings.Contains(d.Warnings[0], "+10%") || !strings.Contains(d.Reason, "warning: tight") {
			t.Errorf("%+v: want the tight warning with the numbers: %q", e, d.Warnings)
		}
	}
	// --nodes 1 alone: the class that holds it within usable memory wins
	// over a tight one; with only the L40S class, the tight plan is admitted
	d := route(t, p, RouteInput{Request: Request{Nodes: 1, Explicit: Explicit{Nodes: true}, Metadata: meta}})
	if d.Refused || d.Nodes != 1 || d.NeedGPUMemPerGPUGiB > d.UsableGPUMemGiB {
		t.Errorf("--nodes 1: want a plan within usable memory, got %+v", d)
	}
	only := examplePolicy(t, DefaultParams(), calibrationClasses()[2])
	d = route(t, only, RouteInput{Request: Request{Nodes: 1, Explicit: Explicit{Nodes: true}, Metadata: meta}})
	if d.Refused || d.Class != "l40s" || len(d.Warnings) == 0 || !strings.HasPrefix(d.Warnings[0], "tight:") {
		t.Errorf("--nodes 1, L40S only: want the tight plan admitted, got %+v", d)
	}
	// well beyond the error: refused, saying so
	d = route(t, p, RouteInput{Request: Request{GPUModel: "l4", GPUsPerNode: 1, Nodes: 1, Explicit: Explicit{GPUs: true, Nodes: true}, Metadata: meta}})
	if !d.Refused || !strings.Contains(d.RefuseMessage, "more than the model's measured error allows (+10%") {
		t.Errorf("65B QLoRA on one 24 GB L4: want a refusal beyond the measured error, got %+v", d)
	}
	// full fine-tune of 7B on one L4 (issue 15's refusal, the e2e test's)
	d = route(t, p, RouteInput{Request: Request{GPUsPerNode: 1, Nodes: 1, GPUModel: "l4", Explicit: Explicit{GPUs: true, Nodes: true}, Metadata: md(t, "burst: params=7B workload=finetune")}})
	if !d.Refused || !strings.Contains(d.RefuseMessage, "optimizer 78.2") {
		t.Errorf("7B full fine-tune on one L4: want refused with the numbers, got %+v", d)
	}
	// metadata alone is never sized tight
	d = route(t, p, RouteInput{Request: Request{Metadata: meta}})
	if d.Refused || d.NeedGPUMemPerGPUGiB > d.UsableGPUMemGiB || len(d.Warnings) > 0 && strings.Contains(d.Warnings[0], "tight") {
		t.Errorf("metadata-only: want a plan within usable memory, got %+v", d)
	}
}

// TestPublishedSetupsAreAdmitted: every setup a cited publication ran
// (memoryFacts with fits) is admitted when asked for explicitly on GPUs of
// its size; every setup it says cannot run is refused.
func TestPublishedSetupsAreAdmitted(t *testing.T) {
	p := examplePolicy(t, DefaultParams(), calibrationClasses()...)
	model := map[float64]string{24: "a10g", 48: "l40s", 40: "a100", 80: "h100"}
	for _, f := range memoryFacts {
		if f.gpuGB == 0 {
			continue
		}
		gm := model[f.gpuGB]
		c, _ := p.Class(map[string]string{"a10g": "a10g", "l40s": "l40s", "a100": "a100x8", "h100": "h100x8"}[gm])
		gpn, nodes := f.gpus, 1
		if c.GPUsPerNode < gpn {
			gpn, nodes = c.GPUsPerNode, f.gpus/c.GPUsPerNode
		}
		meta := md(t, "burst: "+f.meta)
		if f.sh != "" && meta.Sharding == jobmeta.ShardingAuto {
			meta.Sharding = f.sh
		}
		d, err := p.Route(RouteInput{Request: Request{GPUModel: gm, GPUsPerNode: gpn, Nodes: nodes, Explicit: Explicit{GPUs: true, Nodes: true}, Metadata: meta}})
		if err != nil {
			t.Errorf("%s: %v", f.fact, err)
			continue
		}
		if f.fits && d.Refused {
			t.Errorf("%s (%s): refused: %s", f.fact, f.source, d.RefuseMessage)
		}
		if !f.fits && !d.Refused {
			t.Errorf("%s (%s): admitted: %+v", f.fact, f.source, d)
		}
	}
}

// TestShardingOverTCPIsPenalised is issue 31's second case: a 65B QLoRA
// job in a partition of single-GPU nodes used to be spread over three L4
// nodes in FSDP over plain networking. ZeRO-3 across g6.xlarge nodes
// moves (2 x 33.5 + 2.6) GB x 2/3 per micro-batch over 2.5 Gbps, ten times
// its compute, so the planner takes a node that holds the job.
func TestShardingOverTCPIsPenalised(t *testing.T) {
	p := examplePolicy(t, DefaultParams(), calibrationClasses()...)
	meta := md(t, "burst: params=65B workload=finetune method=qlora tokens=100M")
	d := route(t, p, RouteInput{Request: Request{Partition: "gpu", Explicit: Explicit{Partition: true}, Metadata: meta}})
	if d.Refused || d.Nodes != 1 || d.Class != "a100x8" {
		t.Fatalf("want one node that holds the job (1 x a100x8), got %d x %s: %s", d.Nodes, d.Class, d.Reason)
	}
	// without tokens= there is no run time: the price of a unit of work
	// decides, and three network-bound nodes are not cheaper per step
	noTokens := md(t, "burst: params=65B workload=finetune method=qlora")
	d = route(t, p, RouteInput{Request: Request{Partition: "gpu", Explicit: Explicit{Partition: true}, Metadata: noTokens}})
	if d.Refused || d.Nodes != 1 || !strings.Contains(d.Reason, "price per unit of work") {
		t.Fatalf("no tokens: want one node that holds the job, got %d x %s: %s", d.Nodes, d.Class, d.Reason)
	}
	// asked for: three L4 nodes are kept, with the network's efficiency
	d = route(t, p, RouteInput{Request: Request{GPUModel: "l4", GPUsPerNode: 1, Nodes: 3, Explicit: Explicit{GPUs: true, Nodes: true}, Metadata: meta}})
	if d.Refused || d.Nodes != 3 || d.ScalingEfficiency > 0.2 || !strings.Contains(d.Reason, "ZeRO-3 across nodes moves 46.5 GB per node per micro-batch over 2.5 Gbps") {
		t.Errorf("3 x l4 asked for: want kept at a network-bound efficiency, got %+v", d)
	}
	// by hand: 4 x (65e9 + 2 x 80 x 8192 x 2048) x 2048 FLOPs at the L4's
	// MFU for 65B against 46.6 GB over 2.5 Gbps
	mfu := 0.4560 * 0.75 / (1 + math.Pow(3.39e8*121/989/65e9, 0.4708))
	tComp := 4 * (65e9 + 2*80*8192*2048) * 2048 / (121e12 * mfu)
	w, g := 0.516*65e9, 16*0.01*65e9/4
	tNet := (2*w + g) * 2 / 3 / (2.5 / 8 * 1e9)
	if want := tComp / tNet; math.Abs(d.ScalingEfficiency-want) > 0.001 {
		t.Errorf("efficiency %v, by hand %v", d.ScalingEfficiency, want)
	}
	readmeHas(t, fmt.Sprintf("ZeRO-3 across nodes moves %.1f GB per node per micro-batch over 2.5 Gbps: %.1f s against %.1f s of compute, efficiency %.3g",
		(2*w+g)*2/3/1e9, tNet, tComp, tComp/tNet))
}

// TestTightShardingLoses: a sharding that holds the job within the usable
// memory wins over a tight one on the same GPUs: 7B full fine-tune on one
// node of 8 H100s replicated needs 16 B per parameter on each GPU (above
// the usable 72 GiB, within the +134% error), ZeRO-3 an eighth of it.
func TestTightShardingLoses(t *testing.T) {
	p := examplePolicy(t, DefaultParams(), calibrationClasses()...)
	meta := md(t, "burst: params=7B workload=finetune")
	for _, e := range []Explicit{{GPUs: true, Nodes: true}, {GPUs: true}} {
		d := route(t, p, RouteInput{Request: Request{GPUModel: "h100", GPUsPerNode: 8, Nodes: 1, Explicit: e, Metadata: meta}})
		if d.Refused || d.Nodes != 1 || !strings.HasPrefix(d.Sharding, "zero3") || d.NeedGPUMemPerGPUGiB > d.UsableGPUMemGiB {
			t.Errorf("%+v: want 1 x h100x8 under ZeRO-3 within usable memory, got %+v", e, d)
		}
		for _, w := range d.Warnings {
			if strings.HasPrefix(w, "tight:") {
				t.Errorf("%+v: planned tight: %s", e, w)
			}
		}
	}
}

// TestSuggestionSavingWithoutRunTime: without tokens= plans compare the
// price of a unit of work, so the cheaper plan named may cost more an
// hour; the suggestion says what it saves on that measure (never a
// negative saving an hour).
func TestSuggestionSavingWithoutRunTime(t *testing.T) {
	meta := md(t, "burst: params=65B workload=finetune method=qlora")
	in := RouteInput{Request: Request{GPUModel: "l4", GPUsPerNode: 1, Nodes: 3, Explicit: Explicit{GPUs: true, Nodes: true}, Metadata: meta}}
	d := route(t, examplePolicy(t, DefaultParams(), calibrationClasses()...), in)
	if d.Refused || d.Nodes != 3 || !strings.Contains(d.Suggestion, "% less per unit of work") || strings.Contains(d.Suggestion, "$-") {
		t.Errorf("3 x l4 without tokens: want a suggestion priced per unit of work, got %q", d.Suggestion)
	}
	if len(d.Warnings) == 0 || !strings.HasPrefix(d.Warnings[len(d.Warnings)-1], "network-bound: ZeRO-3 across 3 nodes of l4 over 2.5 Gbps") ||
		!strings.Contains(d.Reason, "ZeRO-3 across nodes moves 46.5 GB per node per micro-batch") {
		t.Errorf("3 x l4: want the network-bound warning and its numbers in the reason, got %q / %q", d.Warnings, d.Reason)
	}
	params := DefaultParams()
	params.RewriteExplicit = true
	d = route(t, examplePolicy(t, params, calibrationClasses()...), in)
	if !d.Downsized || d.Nodes != 1 || d.SavedUSD <= 0 || !strings.Contains(d.Reason, "% less per unit of work") {
		t.Errorf("rewrite_explicit: want the rewrite with a positive saving, got %+v", d)
	}
}
