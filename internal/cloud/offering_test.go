package cloud

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/capacity"
)

// TestOfferingWire: the one Offering type crosses the sizer's API; its
// wire names are the RankResponse's, and the subnet (burst.yaml's, set at
// launch) is never read from or written to the wire.
func TestOfferingWire(t *testing.T) {
	o := Offering{InstanceType: "g5.xlarge", Zone: "us-east-1a", SubnetID: "subnet-123", Capacity: capacity.Spot, PriceUSD: 0.5, ExpectedUSD: 0.6, Reason: "cheapest"}
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"instance_type":"g5.xlarge","zone":"us-east-1a","capacity":"spot","price_usd":0.5,"expected_usd":0.6,"reason":"cheapest"}`
	if string(b) != want {
		t.Errorf("wire form\n got %s\nwant %s", b, want)
	}
	var back Offering
	if err := json.Unmarshal([]byte(`{"instance_type":"g5.xlarge","SubnetID":"subnet-evil","subnet_id":"subnet-evil"}`), &back); err != nil {
		t.Fatal(err)
	}
	if back.SubnetID != "" || strings.Contains(string(b), "subnet") {
		t.Errorf("the subnet crossed the wire: %+v", back)
	}
}
