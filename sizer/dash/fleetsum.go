package dash

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// agentSilentAfter is how long a live instance's agent may go without a
// report before its node needs attention (agents report every few
// seconds; a boot takes minutes).
const agentSilentAfter = 10 * time.Minute

// attentionFlags are the Slurm states and flags that need an operator.
var attentionFlags = []string{"DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "INVALID_REG", "REBOOT_ISSUED", "MAINTENANCE"}

// attention says why n needs an operator, "" when it does not.
func attention(n sizerapi.FleetNode, now time.Time) string {
	parts := strings.Split(n.SlurmState, "+")
	for _, f := range attentionFlags {
		for _, p := range parts {
			if p == f || strings.HasPrefix(p, f) && f == "DRAIN" { // DRAINED, DRAINING
				return "Slurm: " + n.SlurmState
			}
		}
	}
	if n.InstanceID == "" {
		return ""
	}
	if slices.Contains(parts, "POWERED_DOWN") {
		return "instance live on a node Slurm has powered down"
	}
	last := n.LastReport
	if last.IsZero() {
		last = n.UpSince
	}
	if !last.IsZero() && now.Sub(last) > agentSilentAfter {
		if n.LastReport.IsZero() {
			return "no agent report since launch"
		}
		return "agent silent since " + n.LastReport.UTC().Format("15:04")
	}
	return ""
}

// summarize sets each node's Attention and the class's counts: by state
// (those needing attention first, then the most common), the nodes
// needing attention and the powered-down ones with nothing to show.
func summarize(fc *sizerapi.FleetClass, now time.Time) {
	byState := map[string]*sizerapi.FleetStateCount{}
	for i := range fc.Nodes {
		n := &fc.Nodes[i]
		n.Attention = attention(*n, now)
		st := n.SlurmState
		if st == "" {
			st = "unknown"
		}
		c, ok := byState[st]
		if !ok {
			c = &sizerapi.FleetStateCount{State: st}
			byState[st] = c
		}
		c.Nodes++
		if n.Attention != "" {
			fc.Attention++
			if strings.HasPrefix(n.Attention, "Slurm: ") {
				c.Attention = true
			}
		} else if n.InstanceID == "" && slices.Contains(strings.Split(n.SlurmState, "+"), "POWERED_DOWN") {
			fc.PoweredDown++
		}
	}
	fc.States = make([]sizerapi.FleetStateCount, 0, len(byState))
	for _, c := range byState {
		fc.States = append(fc.States, *c)
	}
	slices.SortFunc(fc.States, func(a, b sizerapi.FleetStateCount) int {
		if a.Attention != b.Attention {
			if a.Attention {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(b.Nodes, a.Nodes), cmp.Compare(a.State, b.State))
	})
}
