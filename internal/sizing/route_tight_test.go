package sizing

import (
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
	// well beyond the error: refused, saying so
	d := route(t, p, RouteInput{Request: Request{GPUModel: "l4", GPUsPerNode: 1, Nodes: 1, Explicit: Explicit{GPUs: true, Nodes: true}, Metadata: meta}})
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
