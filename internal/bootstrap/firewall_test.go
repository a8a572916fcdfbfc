package bootstrap

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFirewallRules: EC2's IMDS addresses on every port and each given
// endpoint's address and port, closed to every uid but 0; the rules read
// back from nft's JSON.
func TestFirewallRules(t *testing.T) {
	eps, err := FirewallEndpoints("http://10.64.3.1:41234", "", "http://169.254.169.254", "http://[fd00:ec2::254]:80")
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(eps)
	if got != "[10.64.3.1:41234 169.254.169.254 fd00:ec2::254]" {
		t.Fatalf("endpoints %s", got)
	}
	rules := FirewallRules(eps)
	for _, w := range []string{"table inet burst_imds\ndelete table inet burst_imds\n", "type filter hook output priority 0; policy accept;",
		"ip daddr 10.64.3.1 tcp dport 41234 meta skuid != 0 counter reject", "ip daddr 169.254.169.254 meta skuid != 0 counter reject",
		"ip6 daddr fd00:ec2::254 meta skuid != 0 counter reject"} {
		if !strings.Contains(rules, w) {
			t.Errorf("rules lack %q:\n%s", w, rules)
		}
	}
	js, err := os.ReadFile(filepath.Join("testdata", "nft-list.json"))
	if err != nil {
		t.Fatal(err)
	}
	have, err := ParseFirewall(js)
	if err != nil {
		t.Fatal(err)
	}
	if miss := missingEndpoints(eps, have); len(miss) != 0 {
		t.Errorf("nft's listing of these rules misses %v (have %v)", miss, have)
	}
	if miss := missingEndpoints([]Endpoint{{Addr: IMDSv4, Port: 80}, {Addr: netip.MustParseAddr("10.0.0.9"), Port: 1}}, have); len(miss) != 1 {
		t.Errorf("missing = %v, want only 10.0.0.9:1", miss)
	}
	if _, err := ParseFirewall([]byte(`{"nftables":[]}`)); err == nil {
		t.Error("an empty listing verified")
	}
	if _, err := FirewallEndpoints("::nope"); err == nil {
		t.Error("a bad endpoint URL accepted")
	}
}

func FuzzParseFirewall(f *testing.F) {
	js, _ := os.ReadFile(filepath.Join("testdata", "nft-list.json"))
	f.Add(js)
	f.Add([]byte(`{"nftables":[{"chain":{"table":"burst_imds","hook":"output","type":"filter"}},{"rule":{"table":"burst_imds","expr":[{"reject":null}]}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		eps, err := ParseFirewall(b)
		if err != nil {
			return
		}
		for _, e := range eps {
			if !e.Addr.IsValid() || e.Port < 0 {
				t.Fatalf("parsed endpoint %+v", e)
			}
		}
	})
}
