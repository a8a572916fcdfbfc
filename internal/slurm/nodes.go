package slurm

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Node is one node as Slurm reports it (22.05 `sinfo --json` or `scontrol
// show node -o`, 23.02+ `scontrol --json show node`), in the same form on
// every supported release.
type Node struct {
	Name           string
	State          string   // base state, upper case: IDLE, ALLOCATED, MIXED, DOWN, ...
	Flags          []string // state flags: CLOUD, POWERED_DOWN, POWERING_UP, DRAIN, ...
	Addr           string   // NodeAddr
	Hostname       string   // NodeHostName
	Features       []string // available features
	ActiveFeatures []string
	GRES           []GRES // configured GRES
	GRESUsed       string // raw gres_used, e.g. "gpu:a10g:1(IDX:0)"
	Reason         string
	Comment        string
	Extra          string
	Partitions     []string
	CPUs           uint32
	RealMemoryMB   uint64
	BootTime       time.Time
	SlurmdStart    time.Time // when the node's slurmd started (on a cloud node: its boot)
	SlurmdVersion  string
	// InstanceID and InstanceType are what slurmd registered with
	// --instance-id/--instance-type (23.11+); "" before.
	InstanceID   string
	InstanceType string
}

// HasFlag reports whether the node's state carries flag (e.g. "POWERED_DOWN").
func (n Node) HasFlag(flag string) bool {
	for _, f := range n.Flags {
		if strings.EqualFold(f, flag) {
			return true
		}
	}
	return false
}

// StateString is scontrol's form of the state: IDLE+CLOUD+POWERED_DOWN.
func (n Node) StateString() string {
	return strings.Join(append([]string{n.State}, n.Flags...), "+")
}

// nodeBaseStates are Slurm's base node states (NODE_STATE_BASE).
var nodeBaseStates = map[string]bool{"UNKNOWN": true, "DOWN": true, "IDLE": true, "ALLOCATED": true,
	"ERROR": true, "MIXED": true, "FUTURE": true}

// nodeState maps a node's state (22.05: "idle" and state_flags; 23.02+: one
// array, base state and flags, upper case) to Node.State and Node.Flags.
func nodeState(state, flags strList) (string, []string, error) {
	base := ""
	var rest []string
	for _, s := range state {
		s = strings.ToUpper(s)
		if base == "" && nodeBaseStates[s] {
			base = s
			continue
		}
		rest = append(rest, s)
	}
	if base == "" {
		return "", nil, fmt.Errorf("%q has no base state (one of IDLE, ALLOCATED, MIXED, DOWN, ...)", []string(state))
	}
	for _, f := range flags {
		rest = append(rest, strings.ToUpper(f))
	}
	return base, rest, nil
}

type rawNode struct {
	Name           string  `json:"name"`
	State          strList `json:"state"`
	StateFlags     strList `json:"state_flags"` // 22.05
	Address        string  `json:"address"`
	Hostname       string  `json:"hostname"`
	Features       strList `json:"features"`
	ActiveFeatures strList `json:"active_features"`
	GRES           string  `json:"gres"`
	GRESUsed       string  `json:"gres_used"`
	Reason         string  `json:"reason"`
	Comment        string  `json:"comment"`
	Extra          string  `json:"extra"`
	Partitions     strList `json:"partitions"`
	CPUs           num     `json:"cpus"`
	RealMemory     num     `json:"real_memory"`
	BootTime       num     `json:"boot_time"`
	SlurmdStart    num     `json:"slurmd_start_time"`
	SlurmdVersion  string  `json:"slurmd_version"` // 22.05
	Version        string  `json:"version"`        // 23.02+
	InstanceID     string  `json:"instance_id"`    // 23.11+
	InstanceType   string  `json:"instance_type"`  // 23.11+
}

// ParseNodesJSON parses node records: 22.05's `sinfo --json` or 23.02+'s
// `scontrol --json show node` (data parsers v0.0.39 to v0.0.45). 23.02+'s
// `sinfo --json` has no per-node records; it is refused, saying so.
func ParseNodesJSON(b []byte) ([]Node, error) {
	var d struct {
		doc
		Nodes *[]rawNode `json:"nodes"`
		Sinfo *[]struct {
			Node struct {
				State strList `json:"state"`
			} `json:"node"`
		} `json:"sinfo"`
	}
	if err := decodeDoc("node JSON", b, &d); err != nil {
		return nil, err
	}
	if err := docErrors("node JSON", d.Meta, d.Errors); err != nil {
		return nil, err
	}
	if d.Nodes == nil {
		if d.Sinfo != nil {
			return nil, fmt.Errorf(`parsing node JSON (%s): this is sinfo --json of Slurm 23.02 or later, which groups nodes and has no per-node "nodes" array; read nodes with scontrol --json show node`, d.Meta)
		}
		return nil, fmt.Errorf(`parsing node JSON (%s): no "nodes" array (is this scontrol --json show node, or 22.05 sinfo --json?)`, d.Meta)
	}
	nodes := make([]Node, 0, len(*d.Nodes))
	for i, r := range *d.Nodes {
		if r.Name == "" {
			return nil, fmt.Errorf("parsing node JSON (%s): nodes[%d]: missing name", d.Meta, i)
		}
		c := conv{where: fmt.Sprintf("parsing node JSON (%s): node %s", d.Meta, r.Name)}
		n := Node{
			Name: r.Name, Addr: r.Address, Hostname: r.Hostname,
			Features: r.Features.split(), ActiveFeatures: r.ActiveFeatures.split(),
			GRESUsed: r.GRESUsed, Reason: r.Reason, Comment: r.Comment, Extra: r.Extra,
			Partitions: r.Partitions.split(), SlurmdVersion: r.SlurmdVersion,
			InstanceID: r.InstanceID, InstanceType: r.InstanceType,
		}
		if n.SlurmdVersion == "" {
			n.SlurmdVersion = r.Version
		}
		var err error
		if n.State, n.Flags, err = nodeState(r.State, r.StateFlags); err != nil {
			c.fail("state", "%v", err)
		}
		n.CPUs = c.u32("cpus", r.CPUs)
		n.RealMemoryMB = c.uint("real_memory", r.RealMemory, math.MaxInt64)
		n.BootTime = c.unix("boot_time", r.BootTime)
		n.SlurmdStart = c.unix("slurmd_start_time", r.SlurmdStart)
		if c.err != nil {
			return nil, c.err
		}
		if n.GRES, err = ParseGRES(r.GRES); err != nil {
			return nil, fmt.Errorf("%s: gres: %w", c.where, err)
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}
