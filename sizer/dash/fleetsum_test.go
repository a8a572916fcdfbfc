package dash

import (
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

func TestAttention(t *testing.T) {
	now := time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC)
	live := func(n sizerapi.FleetNode) sizerapi.FleetNode {
		n.InstanceID, n.UpSince = "i-1", now.Add(-time.Hour)
		return n
	}
	for _, c := range []struct {
		n    sizerapi.FleetNode
		want string
	}{
		{sizerapi.FleetNode{SlurmState: "IDLE+POWERED_DOWN"}, ""},
		{sizerapi.FleetNode{SlurmState: "DOWN+POWERED_DOWN"}, "Slurm: DOWN+POWERED_DOWN"},
		{sizerapi.FleetNode{SlurmState: "IDLE+DRAIN"}, "Slurm: IDLE+DRAIN"},
		{sizerapi.FleetNode{SlurmState: "MIXED+DRAINING"}, "Slurm: MIXED+DRAINING"},
		{sizerapi.FleetNode{SlurmState: "IDLE+NOT_RESPONDING"}, "Slurm: IDLE+NOT_RESPONDING"},
		{sizerapi.FleetNode{SlurmState: "IDLE+POWERING_DOWN"}, ""}, // not a DOWN state
		{live(sizerapi.FleetNode{SlurmState: "ALLOCATED", LastReport: now.Add(-time.Minute)}), ""},
		{live(sizerapi.FleetNode{SlurmState: "ALLOCATED", LastReport: now.Add(-11 * time.Minute)}), "agent silent since 11:49"},
		{live(sizerapi.FleetNode{SlurmState: "ALLOCATED"}), "no agent report since launch"},
		{live(sizerapi.FleetNode{SlurmState: "IDLE+POWERED_DOWN", LastReport: now}), "instance live on a node Slurm has powered down"},
	} {
		if got := attention(c.n, now); got != c.want {
			t.Errorf("attention(%+v) = %q, want %q", c.n, got, c.want)
		}
	}
	fc := sizerapi.FleetClass{Nodes: []sizerapi.FleetNode{{SlurmState: "IDLE+POWERED_DOWN"}, {SlurmState: "IDLE+POWERED_DOWN"}, {SlurmState: "DOWN"},
		live(sizerapi.FleetNode{SlurmState: "ALLOCATED", LastReport: now}), {}}}
	summarize(&fc, now)
	if fc.PoweredDown != 2 || fc.Attention != 1 || len(fc.States) != 4 || fc.States[0].State != "DOWN" || fc.States[1].State != "IDLE+POWERED_DOWN" || fc.States[1].Nodes != 2 {
		t.Errorf("summary: powered down %d, attention %d, states %+v", fc.PoweredDown, fc.Attention, fc.States)
	}
}
