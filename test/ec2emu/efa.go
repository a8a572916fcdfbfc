package ec2emu

import (
	"encoding/xml"
	"fmt"
	"sort"
	"strconv"
)

// ---- EFA network interfaces, network info, cluster placement groups ----
//
// The network cards and EFA limits of each type come from
// internal/catalog's NetworkOf (AWS's documentation of accelerated
// instances' network cards and EFA support; the source is named there).
// The emulator serves them in DescribeInstanceTypes' NetworkInfo and holds
// launches to EC2's rules for EFA interfaces: only on a type that supports
// EFA, at most EfaInfo.MaximumEfaInterfaces of them, each on a network card
// the type has, one interface per (card, device index), the primary
// (card 0, device 0) present, and security groups on the interfaces or on
// the instance, never both. A launch that breaks one is refused with
// InvalidParameterCombination (in a fleet: that override's error).

// NetworkInterface is one network interface of an emulated instance, as its
// launch (template) asked for it.
type NetworkInterface struct {
	Card, Device int
	Type         string // "efa", "efa-only" or "interface"
	SubnetID     string
	Groups       []string
}

// placementGroup is a placement group made by CreatePlacementGroup.
type placementGroup struct {
	ID, Name, Strategy string
	Tags               map[string]string
}

type xNetworkCard struct {
	NetworkCardIndex         int     `xml:"networkCardIndex"`
	NetworkPerformance       string  `xml:"networkPerformance"`
	MaximumNetworkInterfaces int     `xml:"maximumNetworkInterfaces"`
	BaselineBandwidthInGbps  float64 `xml:"baselineBandwidthInGbps"`
	PeakBandwidthInGbps      float64 `xml:"peakBandwidthInGbps"`
}

type xNetworkInfo struct {
	NetworkPerformance       string               `xml:"networkPerformance"`
	MaximumNetworkInterfaces int                  `xml:"maximumNetworkInterfaces"`
	MaximumNetworkCards      int                  `xml:"maximumNetworkCards"`
	DefaultNetworkCardIndex  int                  `xml:"defaultNetworkCardIndex"`
	NetworkCards             xItems[xNetworkCard] `xml:"networkCards"`
	EnaSupport               string               `xml:"enaSupport"`
	EfaSupported             bool                 `xml:"efaSupported"`
	EfaInfo                  *struct {
		MaximumEfaInterfaces int `xml:"maximumEfaInterfaces"`
	} `xml:"efaInfo,omitempty"`
}

// networkInfo is the NetworkInfo of a catalog type.
func (s *Server) networkInfo(name string) *xNetworkInfo {
	n, ok := s.opts.Catalog.NetworkOf(name)
	if !ok {
		return nil
	}
	gbps := float64(n.CardMbps) / 1000
	x := &xNetworkInfo{NetworkPerformance: perf(gbps * float64(n.Cards)), MaximumNetworkInterfaces: 2 * n.Cards,
		MaximumNetworkCards: n.Cards, EnaSupport: "required", EfaSupported: n.EFA()}
	for i := range n.Cards {
		x.NetworkCards.Items = append(x.NetworkCards.Items, xNetworkCard{i, perf(gbps), 2, gbps, gbps})
	}
	if n.EFA() {
		x.EfaInfo = &struct {
			MaximumEfaInterfaces int `xml:"maximumEfaInterfaces"`
		}{n.MaxEFA}
	}
	return x
}

func perf(gbps float64) string { return strconv.FormatFloat(gbps, 'f', -1, 64) + " Gigabit" }

// parseNICs reads a launch template's (or RunInstances') network interfaces.
func parseNICs(q query, key string) []NetworkInterface {
	var out []NetworkInterface
	for _, n := range q.list(key) {
		card, _ := n.int("NetworkCardIndex", 0)
		dev, _ := n.int("DeviceIndex", -1)
		t := n.get("InterfaceType")
		if t == "" {
			t = "interface"
		}
		out = append(out, NetworkInterface{Card: card, Device: dev, Type: t, SubnetID: n.get("SubnetId"), Groups: n.strings("SecurityGroupId")})
	}
	return out
}

// checkNICs holds a launch of typ with nics (and instance-level security
// groups sgs) to EC2's rules; nil when it may go ahead.
func (s *Server) checkNICs(typ string, nics []NetworkInterface, sgs []string) *apiError {
	if len(nics) == 0 {
		return nil
	}
	bad := func(format string, a ...any) *apiError {
		return errf(400, "InvalidParameterCombination", format, a...)
	}
	if len(sgs) > 0 {
		return bad("Network interfaces and an instance-level security groups may not be specified on the same request")
	}
	n, _ := s.opts.Catalog.NetworkOf(typ)
	seen := map[[2]int]bool{}
	efa := 0
	for _, ni := range nics {
		switch ni.Type {
		case "efa", "efa-only":
			efa++
		case "interface":
		default:
			return invalid("The value '%s' is not valid for InterfaceType; valid values are interface, efa, efa-only.", ni.Type)
		}
		if ni.Device < 0 {
			return errf(400, "MissingParameter", "each network interface needs a DeviceIndex")
		}
		if ni.Card < 0 || ni.Card >= n.Cards {
			return bad("Network card index %d is not valid for instance type %s, which has %d network card(s).", ni.Card, typ, n.Cards)
		}
		k := [2]int{ni.Card, ni.Device}
		if seen[k] {
			return bad("Each network interface requires a unique device index on its network card (card %d, device %d twice).", ni.Card, ni.Device)
		}
		seen[k] = true
	}
	if !seen[[2]int{0, 0}] {
		return bad("The primary network interface (network card index 0, device index 0) is missing.")
	}
	for _, ni := range nics {
		if ni.Card == 0 && ni.Device == 0 && ni.Type == "efa-only" {
			return bad("An EFA-only network interface cannot be the primary network interface.")
		}
	}
	switch {
	case efa > 0 && !n.EFA():
		return bad("The instance type %s does not support Elastic Fabric Adapter (EFA) interfaces.", typ)
	case efa > n.MaxEFA:
		return bad("You can attach up to %d EFA interfaces to a %s instance; the request has %d.", n.MaxEFA, typ, efa)
	}
	return nil
}

// nicsOn are the interfaces an instance in subnet gets from nics: the
// interface's own subnet, or the launch's.
func nicsOn(nics []NetworkInterface, subnet string) []NetworkInterface {
	if len(nics) == 0 {
		return nil
	}
	out := make([]NetworkInterface, len(nics))
	for i, ni := range nics {
		if ni.SubnetID == "" {
			ni.SubnetID = subnet
		}
		ni.Groups = append([]string(nil), ni.Groups...)
		out[i] = ni
	}
	return out
}

// checkPlacementGroup refuses a launch into a group that does not exist.
func (s *Server) checkPlacementGroup(name string) *apiError {
	if name == "" || s.pgs[name] != nil {
		return nil
	}
	return errf(400, "InvalidPlacementGroup.Unknown", "The Placement Group '%s' is unknown.", name)
}

func (s *Server) createPlacementGroup(q query, _ string) (any, *apiError) {
	name, strategy := q.get("GroupName"), q.get("Strategy")
	if name == "" || len(name) > 255 {
		return nil, errf(400, "MissingParameter", "The request must contain the parameter GroupName (1-255 characters)")
	}
	switch strategy {
	case "cluster", "spread", "partition":
	default:
		return nil, invalid("The value '%s' is not valid for Strategy; valid values are cluster, spread, partition.", strategy)
	}
	if s.pgs[name] != nil {
		return nil, errf(400, "InvalidPlacementGroup.Duplicate", "The Placement Group '%s' already exists.", name)
	}
	if s.pgs == nil {
		s.pgs = map[string]*placementGroup{}
	}
	g := &placementGroup{ID: s.newID("pg-"), Name: name, Strategy: strategy, Tags: q.tagSpecs("TagSpecification")["placement-group"]}
	s.pgs[name] = g
	return struct {
		XMLName        xml.Name        `xml:"x"`
		PlacementGroup xPlacementGroup `xml:"placementGroup"`
	}{PlacementGroup: g.xml()}, nil
}

type xPlacementGroup struct {
	GroupName string        `xml:"groupName"`
	GroupID   string        `xml:"groupId"`
	State     string        `xml:"state"`
	Strategy  string        `xml:"strategy"`
	TagSet    *xItems[xTag] `xml:"tagSet,omitempty"`
}

func (g *placementGroup) xml() xPlacementGroup {
	x := xPlacementGroup{GroupName: g.Name, GroupID: g.ID, State: "available", Strategy: g.Strategy}
	if len(g.Tags) > 0 {
		x.TagSet = &xItems[xTag]{Items: sortedTags(g.Tags)}
	}
	return x
}

func (s *Server) describePlacementGroups(q query, _ string) (any, *apiError) {
	var out []xPlacementGroup
	names := q.strings("GroupName")
	for _, n := range names {
		g := s.pgs[n]
		if g == nil {
			return nil, errf(400, "InvalidPlacementGroup.Unknown", "The Placement Group '%s' is unknown.", n)
		}
		out = append(out, g.xml())
	}
	if len(names) == 0 {
		for _, g := range s.pgs {
			out = append(out, g.xml())
		}
		sort.Slice(out, func(i, j int) bool { return out[i].GroupName < out[j].GroupName })
	}
	return struct {
		XMLName           xml.Name                `xml:"x"`
		PlacementGroupSet xItems[xPlacementGroup] `xml:"placementGroupSet"`
	}{PlacementGroupSet: xItems[xPlacementGroup]{out}}, nil
}

// PlacementGroup reports a placement group's strategy and tags (tests).
func (s *Server) PlacementGroup(name string) (strategy string, tags map[string]string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.pgs[name]
	if g == nil {
		return "", nil, false
	}
	return g.Strategy, merge(g.Tags), true
}

// String describes an interface as the tests print it.
func (ni NetworkInterface) String() string {
	return fmt.Sprintf("card %d device %d %s", ni.Card, ni.Device, ni.Type)
}

// launchRuleError is why an override of a fleet cannot launch at all:
// its placement group or its template's network interfaces.
func (s *Server) launchRuleError(ov *override) *apiError {
	if e := s.checkPlacementGroup(ov.group); e != nil {
		return e
	}
	return s.checkNICs(ov.typ, ov.lt.NICs, ov.lt.SGs)
}
