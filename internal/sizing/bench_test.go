package sizing

import (
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
)

// BenchmarkPolicy measures policy decisions per second over a mix of
// submission-time requests (Route) and resume-time ranking (Rank).
func BenchmarkPolicy(b *testing.B) {
	p := newTestPolicy(b)
	reqs := []RouteInput{
		{Request: Request{GPUsPerNode: 1, Metadata: md(b, "burst: params=1B dataset=20GB workload=finetune checkpoint=30m")}},
		{Request: Request{Nodes: 4, Metadata: md(b, "burst: params=10B dataset=50TB workload=train checkpoint=1h")}},
		{Request: Request{TimeLimit: 4 * time.Hour, Metadata: md(b, "burst: params=70B workload=inference")}},
		{Request: Request{GPUModel: "l40s", GPUsPerNode: 8, JobName: "eval"}, History: History{Jobs: 5, GPUsAllocated: 8, GPUMemoryMiBAllocated: 8 * 45776, GPUsUsed: 1, PeakGPUMemoryMiB: 20000}},
		{Request: Request{GPUsPerNode: 1, Metadata: md(b, "burst: params=1B dataset=20GB deadline=20h")}},
	}
	b.Run("route", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := p.Route(reqs[i%len(reqs)]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	})
	b.Run("rank", func(b *testing.B) {
		b.ReportAllocs()
		in := RankInput{Class: "l4-1x", Zones: []string{"us-east-1a", "us-east-1b", "us-east-1c"}, Unavailable: []Unavailable{{InstanceType: "g6.xlarge", Zone: "us-east-1a", Capacity: capacity.Spot}}}
		for b.Loop() {
			if _, err := p.Rank(in); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	})
}
