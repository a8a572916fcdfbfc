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
// Adapter: supported instance types", "Maximize network bandwidth on
// accelerated instances with EFA" (P5 and P5e: 32 network cards, 3,200
// Gbps; G6e: up to 4 cards, 400 Gbps) and the accelerated computing
// "Network specifications" table (P4d/P4de: 4 cards of 100 Gbps; P5en: 16
// cards of 200 Gbps; P6-B200: 8 cards of 400 Gbps; the G families' EFA
// sizes: one card). p6-b300 is left out until its card layout is
// confirmed (no EFA assumed). A card's
// bandwidth is the type's total over its cards. Types missing here are
// treated as having no EFA (TCP over ENA), the pessimistic choice.
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
