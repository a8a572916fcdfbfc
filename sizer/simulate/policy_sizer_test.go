package simulate

import (
	"testing"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/sizer/trace"
)

func TestNodeShape(t *testing.T) {
	for _, c := range []struct{ total, max, nodes, gpn int }{
		{1, 8, 1, 1}, {8, 8, 1, 8}, {12, 8, 2, 6}, {16, 8, 2, 8}, {24, 8, 3, 8}, {128, 8, 16, 8}, {3, 0, 1, 3}, {5, 4, 2, 3},
	} {
		n, g := NodeShape(c.total, c.max)
		if n != c.nodes || g != c.gpn {
			t.Errorf("NodeShape(%d, %d) = %d x %d, want %d x %d", c.total, c.max, n, g, c.nodes, c.gpn)
		}
	}
}

// TestPolicySizerOnCatalog checks the adapter against the real policy and
// catalog: what burst picks for Philly's common shapes on a10g.
func TestPolicySizerOnCatalog(t *testing.T) {
	s, err := NewPolicySizer(catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		gpus      int
		allowSpot bool
		typ       string
		spot      bool
		nodes     int
	}{
		{1, true, "g5.xlarge", true, 1},
		{1, false, "g5.xlarge", false, 1},
		{2, true, "g5.12xlarge", true, 1},
		{8, true, "g5.48xlarge", true, 1},
		{16, true, "g5.48xlarge", true, 2},
		{16, false, "g5.48xlarge", false, 2},
	} {
		offs, err := s.Offerings(Request{Job: trace.Job{GPUs: c.gpus}, GPUModel: "a10g", AllowSpot: c.allowSpot, Checkpoint: DefaultCheckpoint})
		if err != nil {
			t.Fatalf("%d GPUs: %v", c.gpus, err)
		}
		o := offs[0]
		if o.Type.Name != c.typ || o.Spot != c.spot || o.Nodes != c.nodes {
			t.Errorf("%d GPUs (spot %v): first offering %d x %s spot=%v, want %d x %s spot=%v", c.gpus, c.allowSpot, o.Nodes, o.Type.Name, o.Spot, c.nodes, c.typ, c.spot)
		}
		for _, x := range offs {
			if x.Spot && !c.allowSpot {
				t.Errorf("%d GPUs: spot offering %s when spot is not allowed", c.gpus, x.Type.Name)
			}
			if x.Nodes*x.Type.GPUs < c.gpus {
				t.Errorf("%d GPUs: offering %d x %s is too small", c.gpus, x.Nodes, x.Type.Name)
			}
		}
		want := o.Type.OnDemandUSD
		if o.Spot {
			want = o.Type.SpotUSD()
		}
		if o.USDPerHour != want {
			t.Errorf("%s price %g, want catalog's %g", o.Type.Name, o.USDPerHour, want)
		}
	}
	// After an interruption the relaunch avoids the interrupted spot pool:
	// the policy moves to the next spot pool, on-demand g5.xlarge stays.
	offs, err := s.Offerings(Request{Job: trace.Job{GPUs: 1}, GPUModel: "a10g", AllowSpot: true, AvoidSpot: []string{"g5.xlarge"}, Checkpoint: DefaultCheckpoint})
	if err != nil {
		t.Fatal(err)
	}
	if offs[0].Type.Name == "g5.xlarge" && offs[0].Spot || !offs[0].Spot {
		t.Errorf("avoiding g5.xlarge spot: first offering %s spot=%v, want another spot pool", offs[0].Type.Name, offs[0].Spot)
	}
	odSeen := false
	for _, o := range offs {
		if o.Type.Name == "g5.xlarge" && o.Spot {
			t.Error("g5.xlarge spot offered although avoided")
		}
		odSeen = odSeen || o.Type.Name == "g5.xlarge" && !o.Spot
	}
	if !odSeen {
		t.Error("on-demand g5.xlarge missing when only its spot pool is avoided")
	}
	// With zones, each zone's spot pool is its own offering.
	offs, err = s.Offerings(Request{Job: trace.Job{GPUs: 8}, GPUModel: "a10g", AllowSpot: true, Zones: []string{"us-east-1a", "us-east-1b", "us-east-1c"}, Checkpoint: DefaultCheckpoint})
	if err != nil {
		t.Fatal(err)
	}
	zones := map[string]bool{}
	for _, o := range offs[:3] {
		if o.Type.Name != "g5.48xlarge" || !o.Spot {
			t.Errorf("8 GPUs in 3 zones: offering %s spot=%v among the first three, want g5.48xlarge spot", o.Type.Name, o.Spot)
		}
		zones[o.Zone] = true
	}
	if len(zones) != 3 {
		t.Errorf("8 GPUs in 3 zones: first three offerings in zones %v, want three zones", zones)
	}
	// A job that says it cannot checkpoint gets on-demand from the policy.
	offs, err = s.Offerings(Request{Job: trace.Job{GPUs: 1, Metadata: "burst: checkpoint=none"}, GPUModel: "a10g", AllowSpot: true})
	if err != nil || offs[0].Spot {
		t.Errorf("checkpoint=none: %+v, %v; want on-demand first", offs, err)
	}
	if _, err := s.Offerings(Request{Job: trace.Job{GPUs: 1, Metadata: "burst: bogus=1"}, GPUModel: "a10g"}); err == nil {
		t.Error("bad metadata: no error")
	}
}
