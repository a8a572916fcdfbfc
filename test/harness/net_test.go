package harness

import (
	"net/netip"
	"testing"
)

// TestAllocIPGoesRound: a released address is given again only after
// every other of the subnet, so a replacement node does not take the
// address of the node just stopped (whose job kills slurmctld may still be
// retrying); when the subnet is full but for it, it is given again.
func TestAllocIPGoesRound(t *testing.T) {
	c := &Cluster{net: Network{Prefix: netip.MustParsePrefix("10.9.8.0/24")}, ips: map[netip.Addr]bool{}, bound: map[netip.Addr]bool{}}
	a, err := c.AllocIP()
	if err != nil || a != netip.MustParseAddr("10.9.8.10") {
		t.Fatalf("first address %s, %v; want 10.9.8.10", a, err)
	}
	c.ReleaseIP(a)
	b, err := c.AllocIP()
	if err != nil || b == a {
		t.Fatalf("after releasing %s the next address is %s (%v); want another", a, b, err)
	}
	var last netip.Addr
	for range lastIP - firstIP - 1 { // every other address
		if last, err = c.AllocIP(); err != nil {
			t.Fatal(err)
		}
	}
	if last != netip.MustParseAddr("10.9.8.250") {
		t.Errorf("the subnet's last address handed out is %s; want 10.9.8.250", last)
	}
	if again, err := c.AllocIP(); err != nil || again != a {
		t.Errorf("with only %s free, AllocIP gave %s, %v", a, again, err)
	}
	if _, err := c.AllocIP(); err == nil {
		t.Error("a full subnet gave an address")
	}
}
