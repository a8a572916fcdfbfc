package ec2

import (
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/test/ec2emu"
)

// TestConcurrentLaunchesOfOneNode: two burst-resume processes (two
// providers sharing the state directory) launch the same node with
// different attempts (tokens) at the same moment, against an EC2 that
// answers every call after 200 ms: the node's lock makes the second see the
// first's instance, so the node gets exactly one.
func TestConcurrentLaunchesOfOneNode(t *testing.T) {
	e := newEnv(t, ec2emu.Options{Latency: 200 * time.Millisecond}, Options{})
	second, err := New(e.client, Options{Cluster: "test", Subnets: testSubnets, LaunchTemplateName: e.lt, StateDir: e.prov.opts.StateDir})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	ids := make([]string, 2)
	for i, p := range []*Provider{e.prov, second} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := p.Launch(ctx(t), cloud.LaunchRequest{Cluster: "test", Nodes: nodes(0, "gpu-1"), Offerings: []cloud.Offering{spot("g6.xlarge", "us-east-1a")}, Attempt: 100 + i})
			if err != nil || len(res.Instances) != 1 {
				t.Errorf("launch %d: %v %+v", i, err, res)
				return
			}
			ids[i] = res.Instances[0].ID
		}()
	}
	wg.Wait()
	if n := len(e.srv.Instances()); n != 1 || ids[0] != ids[1] {
		t.Fatalf("%d instances launched for one node (%v), want 1 shared", n, ids)
	}
}
