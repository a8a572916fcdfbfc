package sizing

import (
	"fmt"
	"strings"
	"testing"
)

// runSetup is the GPU configuration a published pretraining run of
// publishedRuns ran on: gpus (0: its source states no count) of gpuGB
// each. Where the memory per GPU is not stated the smaller A100 (40 GB)
// is used, the stricter test.
type runSetup struct {
	gpus   int
	gpuGB  int
	source string
}

var runSetups = map[string]runSetup{
	"Llama 2 7B":     {0, 80, "Llama 2 model card: A100-80GB (no GPU count per model)"},
	"Llama 2 13B":    {0, 80, "same"},
	"Llama 2 70B":    {0, 80, "same"},
	"Llama 3 8B":     {0, 80, "Llama 3 model card: H100-80GB (no GPU count per model)"},
	"Llama 3 70B":    {0, 80, "same"},
	"Llama 3.1 405B": {16384, 80, "Llama 3 paper (Meta 2024) Table 4: 8,192 and 16,384 H100s at 8K sequences"},
	"BLOOM 176B":     {384, 80, "BLOOM paper (Le Scao et al. 2022) §3.4.1: 384 A100-80GB (48 nodes of 8)"},
	"MPT-7B":         {440, 40, "mosaicml/mpt-7b model card: 440 A100-40GBs"},
	"Pythia 1B":      {0, 40, "Pythia paper: A100 (memory per GPU not in the quoted source: 40 GB, the stricter)"},
	"LLaMA 7B":       {0, 80, "LLaMA paper Table 15: A100-80GB"},
	"LLaMA 13B":      {0, 80, "same"},
	"LLaMA 33B":      {0, 80, "same"},
	"LLaMA 65B":      {2048, 80, "LLaMA paper §2.4: 2048 A100-80GB"},
	"TinyLlama 1.1B": {16, 40, "jzhang38/TinyLlama README.md: 16 A100-40G"},
}

// publishedRunClasses hold every GPU configuration of runSetups: 8-GPU
// nodes of A100-40GB (p4d), A100-80GB (p4de) and H100 (p5), as many as the
// largest run used.
func publishedRunClasses() []Class {
	return []Class{
		{Name: "a100-40g", GPUModel: "a100", GPUsPerNode: 8, MaxNodes: 64, InstanceTypes: []string{"p4d.24xlarge"}},
		{Name: "a100-80g", GPUModel: "a100", GPUsPerNode: 8, MaxNodes: 256, InstanceTypes: []string{"p4de.24xlarge"}},
		{Name: "h100", GPUModel: "h100", GPUsPerNode: 8, MaxNodes: 2048, InstanceTypes: []string{"p5.48xlarge"}},
	}
}

// TestPublishedRunsAreAdmitted walks every published pretraining run of
// the time calibration through Route as the user would ask for it
// (--gres gpu:<type>:8, and --nodes where the source states the GPU count),
// with the run's parameters, tokens, sequence length and shape: none may be
// refused for memory, and where the count is stated the plan is what was
// asked for.
func TestPublishedRunsAreAdmitted(t *testing.T) {
	p := examplePolicy(t, DefaultParams(), publishedRunClasses()...)
	for _, r := range publishedRuns {
		s, ok := runSetups[r.name]
		if !ok {
			t.Errorf("%s: no GPU configuration in runSetups", r.name)
			continue
		}
		class := map[string]string{"a100": fmt.Sprintf("a100-%dg", s.gpuGB), "h100": "h100"}[r.gpu]
		meta := md(t, fmt.Sprintf("burst: params=%gB tokens=%gB seq=%d layers=%d hidden=%d workload=train", r.params/1e9, r.tokens/1e9, r.seq, r.layers, r.hidden))
		req := Request{GPUModel: r.gpu, GPUsPerNode: 8, Explicit: Explicit{GPUs: true}, Metadata: meta}
		if s.gpus > 0 {
			req.Nodes, req.Explicit.Nodes = s.gpus/8, true
		}
		// only the class of the published GPU memory
		only := p
		if c, ok := p.Class(class); ok {
			only = examplePolicy(t, DefaultParams(), c)
		} else {
			t.Fatalf("%s: no class %s", r.name, class)
		}
		d, err := only.Route(RouteInput{Request: req})
		if err != nil {
			t.Errorf("%s on %s (%s): %v", r.name, class, s.source, err)
			continue
		}
		if d.Refused {
			t.Errorf("%s on %s (%s): refused: %s", r.name, class, s.source, d.RefuseMessage)
			continue
		}
		if s.gpus > 0 && d.Nodes*d.GPUsPerNode != s.gpus {
			t.Errorf("%s: asked for %d GPUs, planned %d x %d", r.name, s.gpus, d.Nodes, d.GPUsPerNode)
		}
		// on the GPUs the source states, the estimate is within the usable
		// memory (no tight warning); with the count not stated the one
		// node --gres keeps may be tight (admitted)
		for _, w := range d.Warnings {
			if s.gpus > 0 && strings.HasPrefix(w, "tight:") {
				t.Errorf("%s on its published %d GPUs: planned tight (%s)", r.name, s.gpus, w)
			}
		}
		t.Logf("%s: %d x %s, %.1f of %.1f GiB per GPU (%s)", r.name, d.Nodes, d.Class, d.NeedGPUMemPerGPUGiB, d.UsableGPUMemGiB, d.Sharding)
	}
}
