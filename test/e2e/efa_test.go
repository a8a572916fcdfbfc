package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// TestEFATwoNodeP5: a two-node job of an 8 x H100 class (p5.48xlarge, on
// demand) gets, on each of its two instances, one EFA interface per network
// card as the EC2 User Guide lays them out for P5 (32 cards: card 0 device
// 0, the others device 1, type efa), the security groups of burst.yaml on
// every interface, and both instances in one cluster placement group burst
// created with the cluster tag; the job runs on both nodes and completes.
// A second two-node job, of a class whose only capacity is an On-Demand
// Capacity Reservation of two p5.48xlarge, gets the same interfaces and
// group through RunInstances into the reservation. The ledger check
// follows (start's cleanup). The interface layout below is written out
// from AWS's documentation, not taken from burst.
func TestEFATwoNodeP5(t *testing.T) {
	versionBlind(t)
	s := start(t, stack.Options{Configure: func(c *config.Config) {
		c.Classes = append(c.Classes, config.Class{Name: "h100x8", GPUModel: "h100", GPUsPerNode: 8, MaxNodes: 2,
			InstanceTypes: []string{"p5.48xlarge"}, Capacity: "on-demand"},
			config.Class{Name: "h100x8r", GPUModel: "h100", GPUsPerNode: 8, MaxNodes: 2, InstanceTypes: []string{"p5.48xlarge"}, Capacity: "on-demand"})
	}})
	id := sbatch(t, s, "-N", "2", "--gres=gpu:8", "--constraint=h100x8", "--wrap", "srun -l printenv SLURMD_NODENAME; sleep 1")
	waitJob(t, s, id, 3*time.Minute, "COMPLETED")
	ins := efaLayoutCheck(t, s, id)
	group := ins[0].PlacementGroup
	strategy, tags, ok := s.Emu.PlacementGroup(group)
	if !ok || strategy != "cluster" || tags[ec2p.TagCluster] != s.Cfg.Cluster.Name {
		t.Errorf("placement group %q: exists %v, strategy %q, tags %v; want a cluster group tagged %s=%s", group, ok, strategy, tags, ec2p.TagCluster, s.Cfg.Cluster.Name)
	}

	zone := ins[0].Zone
	cr := s.Emu.AddCapacityReservation(ec2emu.CapacityReservationSpec{InstanceType: "p5.48xlarge", Zone: zone, Count: 2, Match: "targeted"})
	if err := s.UpdateConfig(func(c *config.Config) {
		for i := range c.Classes {
			if c.Classes[i].Name == "h100x8r" {
				c.Classes[i].Reservations = config.Reservations{IDs: []string{cr}, Only: true}
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	runs := s.Emu.CallCount("RunInstances")
	id2 := sbatch(t, s, "-N", "2", "--gres=gpu:8", "--constraint=h100x8r", "--wrap", "srun -l printenv SLURMD_NODENAME; sleep 1")
	waitJob(t, s, id2, 3*time.Minute, "COMPLETED")
	for _, in := range efaLayoutCheck(t, s, id2) {
		if in.CapacityReservation != cr || in.PlacementGroup != group {
			t.Errorf("%s: reservation %q, placement group %q; want %s and burst's %s", in.ID, in.CapacityReservation, in.PlacementGroup, cr, group)
		}
	}
	if n := s.Emu.CallCount("RunInstances") - runs; n != 1 {
		t.Errorf("%d RunInstances calls for the reserved job, want one into the reservation", n)
	}
}

// efaLayoutCheck: job id ran on two instances, each with one EFA interface
// per network card laid out as the EC2 User Guide asks for P5 (card 0
// device 0, the others device 1, type efa), on the instance's subnet with
// burst.yaml's security groups, both in one placement group.
func efaLayoutCheck(t *testing.T, s *stack.Stack, id string) []ec2emu.Instance {
	t.Helper()
	var ins []ec2emu.Instance
	for _, in := range s.Emu.Instances() {
		if in.Tags[ec2p.TagJobID] == id {
			ins = append(ins, in)
		}
	}
	if len(ins) != 2 {
		t.Fatalf("job %s ran on %d instances, want 2: %+v", id, len(ins), ins)
	}
	var want []string
	for card := range 32 {
		dev := 1
		if card == 0 {
			dev = 0
		}
		want = append(want, fmt.Sprintf("card %d device %d efa", card, dev))
	}
	group := ins[0].PlacementGroup
	for _, in := range ins {
		var got []string
		for _, ni := range in.NetworkInterfaces {
			got = append(got, ni.String())
			if ni.SubnetID != in.SubnetID || strings.Join(ni.Groups, ",") != strings.Join(s.Cfg.Network.SecurityGroups, ",") {
				t.Errorf("%s interface %s: subnet %s groups %v; want the instance's subnet %s and burst.yaml's groups %v", in.ID, ni, ni.SubnetID, ni.Groups,
					in.SubnetID, s.Cfg.Network.SecurityGroups)
			}
		}
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Errorf("%s (%s) interfaces:\n%s\nwant:\n%s", in.ID, in.InstanceType, strings.Join(got, "; "), strings.Join(want, "; "))
		}
		if in.PlacementGroup == "" || in.PlacementGroup != group {
			t.Errorf("%s in placement group %q, %s in %q; want both in one", in.ID, in.PlacementGroup, ins[0].ID, group)
		}
	}
	return ins
}
