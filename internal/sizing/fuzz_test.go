package sizing

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/jobmeta"
)

// FuzzRouteMetadata routes arbitrary metadata (with the new model keys)
// and explicit requests: no panic, and every plan it returns holds the job
// by its own numbers.
func FuzzRouteMetadata(f *testing.F) {
	for _, s := range []string{
		"burst: params=70B workload=finetune method=lora seq=8K batch=4 sharding=fsdp deadline=2d tokens=1B",
		"burst: params=405B workload=inference precision=fp8 context=128K batch=32 latency=30ms throughput=5K",
		"burst: params=65B workload=qlora seq=512", "burst: params=1 layers=1 hidden=1 heads=1 kv_heads=1",
		"burst: params=999T dataset=1PB deadline=1s", "burst: workload=train sharding=zero1 params=7B",
	} {
		f.Add(s, uint8(0), uint8(0))
	}
	p := examplePolicy(f, DefaultParams())
	f.Fuzz(func(t *testing.T, s string, gpus, nodes uint8) {
		md, errs := jobmeta.ParseMetadata(s)
		if len(errs) > 0 {
			return
		}
		r := Request{Metadata: md}
		if gpus > 0 {
			r.GPUsPerNode, r.Explicit.GPUs = int(gpus%9), true
		}
		if nodes > 0 {
			r.Nodes, r.Explicit.Nodes = int(nodes%40), true
		}
		d, err := p.Route(RouteInput{Request: r})
		if err != nil || d.Refused {
			return
		}
		if d.Nodes < 1 || d.GPUsPerNode < 1 || math.IsNaN(d.EstHours) || d.EstHours < 0 || math.IsInf(d.EstCostUSD, 0) {
			t.Fatalf("%q: bad decision %+v", s, d)
		}
		// above the usable memory only as an explicit request the model
		// cannot rule out, admitted with its tight: warning (issue 31)
		tight := (r.Explicit.GPUs || r.Explicit.Nodes) && len(d.Warnings) > 0 && slices.ContainsFunc(d.Warnings, func(w string) bool { return strings.HasPrefix(w, "tight:") })
		if d.NeedGPUMemPerGPUGiB > d.UsableGPUMemGiB+0.01 && !tight {
			t.Fatalf("%q: plan needs %.2f GiB per GPU of %.2f usable", s, d.NeedGPUMemPerGPUGiB, d.UsableGPUMemGiB)
		}
		if r.Explicit.GPUs && r.GPUsPerNode > 0 && d.GPUsPerNode != r.GPUsPerNode || r.Explicit.Nodes && r.Nodes > 0 && d.Nodes != r.Nodes {
			t.Fatalf("%q: explicit %d x %d became %d x %d", s, r.Nodes, r.GPUsPerNode, d.Nodes, d.GPUsPerNode)
		}
	})
}
