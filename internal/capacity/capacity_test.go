package capacity

import "testing"

func TestLaunchable(t *testing.T) {
	for c, want := range map[Type]bool{Spot: true, OnDemand: true, Reserved: true, SpotThenOnDemand: false, Any: false, "Reserved": false, "Spot": false} {
		if got := c.Launchable(); got != want {
			t.Errorf("Type(%q).Launchable() = %v, want %v", c, got, want)
		}
	}
	if Spot != "spot" || OnDemand != "on-demand" || SpotThenOnDemand != "spot-then-on-demand" {
		t.Error("the capacity strings are burst.yaml's, the job metadata's and EC2's words; they must not change")
	}
}
