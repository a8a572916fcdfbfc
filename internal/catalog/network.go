package catalog

// Network is an instance type's network cards and Elastic Fabric Adapter
// limits, as EC2's DescribeInstanceTypes reports them in NetworkInfo
// (MaximumNetworkCards, EfaInfo.MaximumEfaInterfaces, each card's baseline
// bandwidth).
type Network struct {
	Cards    int // MaximumNetworkCards
	MaxEFA   int // EfaInfo.MaximumEfaInterfaces; 0: EFA not supported
	CardMbps int // each card's baseline bandwidth, Mbit/s
}

// EFA reports whether the type supports EFA.
func (n Network) EFA() bool { return n.MaxEFA > 0 }

// efaNetworks are the EFA-capable GPU types and their network cards, from
// AWS's public documentation: the EC2 User Guide's "Elastic Fabric
// Adapter: supported instance types" and "Maximize network bandwidth on
// accelerated instances with EFA" (P5 and P5e: 32 network cards, 3,200
// Gbps; G6e: up to 4 cards, 400 Gbps). The card counts of the other
// multi-card types were checked (issue 29, 2026-12-03) against EC2's
// DescribeInstanceTypes as AWS's own generated table records it
// (aws/karpenter-provider-aws, pkg/providers/instancetype/
// zz_generated.vpclimits.go, generated 2026-08-06): p4d.24xlarge and
// p4de.24xlarge 4 cards, p5en.48xlarge 16, p6-b200.48xlarge 8, g6e.24xlarge
// 2, g6e.48xlarge 4, every other type here 1; with its bandwidth table
// (zz_generated.bandwidth.go: 400, 3,200 and 3,200 Gbps) that is 100, 200
// and 400 Gbps a card. The EC2 User Guide's search here gave no page
// listing those counts, and that table has no EFA limit, so one EFA
// interface per card is assumed as for P5. p6-b300.48xlarge (17 cards,
// 6,400 Gbps there) is left out until its EFA layout is confirmed (no EFA
// assumed). burst-resume reads the real figures from DescribeInstanceTypes
// at launch (internal/cloud/ec2 netinfo.go); this table serves the sizer's
// bandwidth model and the EC2 emulator. A card's bandwidth is the type's
// total over its cards. Types missing here are treated as having no EFA
// (TCP over ENA), the pessimistic choice.
var efaNetworks = map[string]Network{
	"p3dn.24xlarge":    {1, 1, 100000},
	"p4d.24xlarge":     {4, 4, 100000},
	"p4de.24xlarge":    {4, 4, 100000},
	"p5.48xlarge":      {32, 32, 100000},
	"p5e.48xlarge":     {32, 32, 100000},
	"p5en.48xlarge":    {16, 16, 200000},
	"p6-b200.48xlarge": {8, 8, 400000},
	"g4dn.8xlarge":     {1, 1, 50000}, "g4dn.12xlarge": {1, 1, 50000}, "g4dn.16xlarge": {1, 1, 50000}, "g4dn.metal": {1, 1, 100000},
	"g5.8xlarge": {1, 1, 25000}, "g5.12xlarge": {1, 1, 40000}, "g5.16xlarge": {1, 1, 25000}, "g5.24xlarge": {1, 1, 50000}, "g5.48xlarge": {1, 1, 100000},
	"g6.8xlarge": {1, 1, 25000}, "g6.12xlarge": {1, 1, 40000}, "g6.16xlarge": {1, 1, 25000}, "g6.24xlarge": {1, 1, 50000}, "g6.48xlarge": {1, 1, 100000},
	"g6e.8xlarge": {1, 1, 25000}, "g6e.12xlarge": {1, 1, 100000}, "g6e.16xlarge": {1, 1, 35000}, "g6e.24xlarge": {2, 2, 100000}, "g6e.48xlarge": {4, 4, 100000},
}

// NetworkOf returns the network cards of the named type: its EFA-capable
// entry, or else one card carrying the catalog's bandwidth and no EFA
// (ok false when the catalog does not know the type).
func (c *Catalog) NetworkOf(name string) (Network, bool) {
	if n, ok := efaNetworks[name]; ok {
		return n, true
	}
	t, ok := c.Lookup(name)
	if !ok {
		return Network{}, false
	}
	return Network{Cards: 1, CardMbps: t.NetworkMbps}, true
}
