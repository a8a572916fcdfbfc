// Package reconcile keeps the cloud and Slurm in agreement: it compares the
// cluster's tagged instances with Slurm's view of burst's nodes and acts on
// every disagreement, so that no instance runs without a node and no job
// waits on an instance that is gone.
//
// Plan is the pure decision function (table-tested); Reconciler.RunOnce
// reads both sides, plans, executes and counts every action in Prometheus.
// burst-sizer serve runs it every sizer.reconcile_interval and
// `burst-sizer reconcile [--dry-run]` runs one pass.
package reconcile

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/slurm"
)

// ActionKind is what the reconciler does.
type ActionKind string

// Action kinds.
const (
	// Terminate terminates instances (InstanceIDs).
	Terminate ActionKind = "terminate"
	// HandBack requeues the node's jobs and powers the node down at once
	// (POWER_DOWN_FORCE) with Detail as its Slurm reason.
	HandBack ActionKind = "hand-back"
)

// Reason labels why an action is taken (the metrics' reason label).
type Reason string

// Reasons.
const (
	// ReasonOrphan: a live instance whose node is powered down (or not a
	// burst node at all), older than the grace period: a crashed resume, a
	// node handed back while its launch was in flight.
	ReasonOrphan Reason = "orphan"
	// ReasonNoNode: a live instance burst cannot name a node for (missing
	// burst:node / burst:nodes tags), older than the grace period.
	ReasonNoNode Reason = "no-node-tag"
	// ReasonDuplicate: a second live instance for one node (double launch).
	ReasonDuplicate Reason = "duplicate"
	// ReasonInstanceGone: Slurm thinks the node is up but its instance is
	// terminated, stopped or missing.
	ReasonInstanceGone Reason = "instance-gone"
	// ReasonStopped: a stopped or stopping instance (burst never stops
	// instances; a stopped node cannot run a job).
	ReasonStopped Reason = "stopped"
	// ReasonResumeTimeout: the node has been powering up longer than the
	// resume timeout.
	ReasonResumeTimeout Reason = "resume-timeout"
)

// Action is one thing to do.
type Action struct {
	Kind        ActionKind `json:"kind"`
	Reason      Reason     `json:"reason"`
	Node        string     `json:"node,omitempty"`         // "" for an instance with no node
	InstanceIDs []string   `json:"instance_ids,omitempty"` // Terminate: the instances; HandBack: the instance that was the node's, if known
	// Detail says why in words; for HandBack it is the Slurm node reason
	// ("burst: instance i-0abc gone").
	Detail string `json:"detail"`
}

// String renders the action for logs and `burst-sizer reconcile`.
func (a Action) String() string {
	who := a.Node
	if who == "" {
		who = "-"
	}
	ids := strings.Join(a.InstanceIDs, ",")
	if ids == "" {
		ids = "-"
	}
	return fmt.Sprintf("%-9s %-15s node=%s instances=%s: %s", a.Kind, a.Reason, who, ids, a.Detail)
}

// PlanOptions tune Plan.
type PlanOptions struct {
	// Grace is how old a live instance must be before it counts as an
	// orphan or a duplicate: EC2 is eventually consistent, and a resume
	// launches before Slurm hears of the instance.
	Grace time.Duration
	// ResumeTimeout: a node powering up longer than this is handed back
	// and what was launched for it terminated (Slurm's ResumeTimeout).
	ResumeTimeout time.Duration
	// Owned says whether a Slurm node is burst's; nil: every node with the
	// CLOUD flag.
	Owned func(node string) bool
	// Memory is what earlier passes saw (powering-up start, last known
	// instance of each node); nil: nothing.
	Memory *Memory
}

// Memory is what the reconciler remembers between passes: when it first saw
// each node powering up with no instance, and each node's last live
// instance (for reasons that name it).
type Memory struct {
	PoweringUpSince map[string]time.Time
	LastInstance    map[string]string
	// HandedBack: nodes this reconciler handed back for a lost instance,
	// and that instance: the passes right after (EC2's state-change
	// events kick them, before Slurm's power-save pass acts on the
	// request) do not hand the node back again for the same instance.
	HandedBack map[string]string
}

// NewMemory returns empty memory.
func NewMemory() *Memory {
	return &Memory{PoweringUpSince: map[string]time.Time{}, LastInstance: map[string]string{}, HandedBack: map[string]string{}}
}

// Observe records a pass's view.
func (m *Memory) Observe(instances []cloud.Instance, nodes []slurm.Node, now time.Time) {
	up := map[string]bool{}
	for _, n := range nodes {
		if n.HasFlag("POWERING_UP") {
			up[n.Name] = true
			if _, ok := m.PoweringUpSince[n.Name]; !ok {
				m.PoweringUpSince[n.Name] = now
			}
		}
	}
	for n := range m.PoweringUpSince {
		if !up[n] {
			delete(m.PoweringUpSince, n)
		}
	}
	newest := map[string]cloud.Instance{}
	for _, in := range instances {
		if in.Node != "" && in.Live() {
			if cur, ok := newest[in.Node]; !ok || in.LaunchTime.After(cur.LaunchTime) {
				newest[in.Node] = in
			}
		}
	}
	for n, in := range newest {
		m.LastInstance[n] = in.ID
	}
	// forget nodes that are powered down and have no instance, and
	// hand-backs once the node is down or has an instance again
	for _, n := range nodes {
		_, live := newest[n.Name]
		if !live && poweredDown(n) {
			delete(m.LastInstance, n.Name)
		}
		if live || poweredDown(n) || n.HasFlag("POWERING_UP") {
			delete(m.HandedBack, n.Name)
		}
	}
}

// poweredDown: Slurm considers the node off (or going off).
func poweredDown(n slurm.Node) bool {
	return (n.HasFlag("POWERED_DOWN") || n.HasFlag("POWERING_DOWN")) && !n.HasFlag("POWERING_UP")
}

// wantsInstance: Slurm counts on the node having an instance: it is powering
// up, or up (idle, allocated, mixed, completing), including nodes with a
// power-down requested but not yet started.
func wantsInstance(n slurm.Node) bool {
	if n.HasFlag("POWERING_UP") {
		return true
	}
	if poweredDown(n) {
		return false
	}
	switch n.State {
	case "DOWN", "FUTURE", "UNKNOWN":
		return false
	}
	return true
}

// Plan decides what to do about the disagreements between the cluster's
// instances (cloud.Provider.List: not terminated) and Slurm's nodes at now.
// It is pure: the same input gives the same actions, in a stable order.
//
//   - a live instance whose node is powered down, unknown to Slurm or not
//     burst's, or that has no node tag, older than Grace: terminate (orphan);
//   - two or more live instances for one node: keep the one at Slurm's
//     NodeAddr, else the newest; terminate the others once older than Grace;
//   - a stopped or stopping instance: terminate;
//   - a node Slurm thinks is up whose instance is gone (none live): hand it
//     back (requeue its jobs, POWER_DOWN_FORCE) with the reason;
//   - a node powering up longer than ResumeTimeout (by its instance's launch
//     time, or by Memory when it has none): terminate its instances and hand
//     it back;
//   - anything younger than Grace, or pending without an address, waits for
//     the next pass (EC2's eventual consistency).
func Plan(instances []cloud.Instance, nodes []slurm.Node, now time.Time, opts PlanOptions) []Action {
	owned := opts.Owned
	if owned == nil {
		owned = func(string) bool { return true }
	}
	mem := opts.Memory
	if mem == nil {
		mem = NewMemory()
	}
	byName := map[string]slurm.Node{}
	for _, n := range nodes {
		if owned(n.Name) && (opts.Owned != nil || n.HasFlag("CLOUD")) {
			byName[n.Name] = n
		}
	}
	old := func(in cloud.Instance) bool { return !in.LaunchTime.IsZero() && now.Sub(in.LaunchTime) >= opts.Grace }
	age := func(in cloud.Instance) string {
		if in.LaunchTime.IsZero() {
			return "unknown age"
		}
		return "launched " + now.Sub(in.LaunchTime).Truncate(time.Second).String() + " ago"
	}
	var acts []Action
	live := map[string][]cloud.Instance{}
	dead := map[string]cloud.Instance{} // node -> a stopped/shutting-down instance, for reasons
	for _, in := range instances {
		switch {
		case in.State == "stopped" || in.State == "stopping":
			acts = append(acts, Action{Kind: Terminate, Reason: ReasonStopped, Node: in.Node, InstanceIDs: []string{in.ID},
				Detail: fmt.Sprintf("instance is %s; burst never stops instances and a stopped node runs no job", in.State)})
			if in.Node != "" {
				dead[in.Node] = in
			}
		case !in.Live():
			if in.Node != "" {
				dead[in.Node] = in
			}
		case in.Node == "":
			if old(in) {
				acts = append(acts, Action{Kind: Terminate, Reason: ReasonNoNode, InstanceIDs: []string{in.ID},
					Detail: fmt.Sprintf("instance has no burst:node or burst:nodes tag naming its node (%s)", age(in))})
			}
		default:
			live[in.Node] = append(live[in.Node], in)
		}
	}
	names := make([]string, 0, len(live))
	for n := range live {
		names = append(names, n)
	}
	sort.Strings(names)
	handled := map[string]bool{}
	for _, name := range names {
		ins := live[name]
		sort.Slice(ins, func(i, j int) bool {
			if !ins[i].LaunchTime.Equal(ins[j].LaunchTime) {
				return ins[i].LaunchTime.After(ins[j].LaunchTime) // newest first
			}
			return ins[i].ID < ins[j].ID
		})
		n, known := byName[name]
		if !known || !wantsInstance(n) {
			if known && n.State == "DOWN" && !poweredDown(n) {
				continue // a DOWN node is the admin's or the agent's dead-man switch's
			}
			why := "node is powered down in Slurm"
			if !known {
				why = "Slurm has no burst node of that name"
			}
			for _, in := range ins {
				if old(in) {
					acts = append(acts, Action{Kind: Terminate, Reason: ReasonOrphan, Node: name, InstanceIDs: []string{in.ID},
						Detail: fmt.Sprintf("%s (%s, state %s)", why, age(in), in.State)})
				}
			}
			continue
		}
		// stuck powering up: the node's newest instance is older than the
		// resume timeout and the node still has not registered
		if n.HasFlag("POWERING_UP") && opts.ResumeTimeout > 0 && !ins[0].LaunchTime.IsZero() && now.Sub(ins[0].LaunchTime) >= opts.ResumeTimeout {
			ids := make([]string, len(ins))
			for i, in := range ins {
				ids[i] = in.ID
			}
			acts = append(acts,
				Action{Kind: Terminate, Reason: ReasonResumeTimeout, Node: name, InstanceIDs: ids,
					Detail: fmt.Sprintf("node still powering up %s after launch (resume timeout %s)", now.Sub(ins[0].LaunchTime).Truncate(time.Second), opts.ResumeTimeout)},
				Action{Kind: HandBack, Reason: ReasonResumeTimeout, Node: name, InstanceIDs: ids,
					Detail: fmt.Sprintf("burst: instance %s did not register within %s", ins[0].ID, opts.ResumeTimeout)})
			handled[name] = true
			continue
		}
		if len(ins) < 2 {
			continue
		}
		keep := ins[0] // newest
		if a, err := netip.ParseAddr(n.Addr); err == nil {
			for _, in := range ins {
				if in.PrivateIP == a.String() {
					keep = in
					break
				}
			}
		}
		for _, in := range ins {
			if in.ID == keep.ID || !old(in) {
				continue
			}
			acts = append(acts, Action{Kind: Terminate, Reason: ReasonDuplicate, Node: name, InstanceIDs: []string{in.ID},
				Detail: fmt.Sprintf("node has %d live instances; keeping %s (address %s, Slurm NodeAddr %s), this one %s", len(ins), keep.ID, orDash(keep.PrivateIP), orDash(n.Addr), age(in))})
		}
	}
	// nodes Slurm counts on that have no live instance
	nodeNames := make([]string, 0, len(byName))
	for name := range byName {
		nodeNames = append(nodeNames, name)
	}
	sort.Strings(nodeNames)
	for _, name := range nodeNames {
		n := byName[name]
		if handled[name] || len(live[name]) > 0 || !wantsInstance(n) {
			continue
		}
		if n.HasFlag("POWERING_UP") {
			// a resume may still be launching; only a node stuck past the
			// resume timeout (as this reconciler has watched it) goes back
			since, ok := mem.PoweringUpSince[name]
			if ok && opts.ResumeTimeout > 0 && now.Sub(since) >= opts.ResumeTimeout {
				acts = append(acts, Action{Kind: HandBack, Reason: ReasonResumeTimeout, Node: name,
					Detail: fmt.Sprintf("burst: no instance after %s powering up", now.Sub(since).Truncate(time.Second))})
			}
			continue
		}
		id := ""
		if in, ok := dead[name]; ok {
			id = in.ID
		} else if last := mem.LastInstance[name]; last != "" {
			id = last
		}
		if id != "" && mem.HandedBack[name] == id {
			continue // handed back for this instance already; Slurm is on it
		}
		a := Action{Kind: HandBack, Reason: ReasonInstanceGone, Node: name,
			Detail: "burst: instance gone (none running for the node)"}
		if id != "" {
			a.InstanceIDs = []string{id}
			a.Detail = "burst: instance " + id + " gone"
			if in, ok := dead[name]; ok {
				a.Detail += " (" + in.State + ")"
			}
		}
		acts = append(acts, a)
	}
	// terminations first, in a stable order; hand-backs after
	sort.SliceStable(acts, func(i, j int) bool {
		if acts[i].Kind != acts[j].Kind {
			return acts[i].Kind == Terminate
		}
		if acts[i].Node != acts[j].Node {
			return acts[i].Node < acts[j].Node
		}
		return slices.Compare(acts[i].InstanceIDs, acts[j].InstanceIDs) < 0
	})
	return acts
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
