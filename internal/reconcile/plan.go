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
	"maps"
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
	// PoweringDownSince: when this reconciler first saw each node powering
	// down (Slurm running burst-suspend for it). Its instance is
	// suspend's to terminate until Grace has passed since then.
	PoweringDownSince map[string]time.Time
}

// NewMemory returns empty memory.
func NewMemory() *Memory {
	return &Memory{PoweringUpSince: map[string]time.Time{}, LastInstance: map[string]string{}, HandedBack: map[string]string{},
		PoweringDownSince: map[string]time.Time{}}
}

// Observe records a pass's view.
func (m *Memory) Observe(instances []cloud.Instance, nodes []slurm.Node, now time.Time) {
	up, down := map[string]bool{}, map[string]bool{}
	for _, n := range nodes {
		up[n.Name] = n.HasFlag("POWERING_UP")
		down[n.Name] = poweringDown(n)
	}
	firstSeen(m.PoweringUpSince, up, now)
	firstSeen(m.PoweringDownSince, down, now)
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

// firstSeen keeps since[name] at the first pass that saw name in a state
// (is[name]) and forgets the names no longer in it.
func firstSeen(since map[string]time.Time, is map[string]bool, now time.Time) {
	for n, in := range is {
		if _, ok := since[n]; in && !ok {
			since[n] = now
		}
	}
	for n := range since {
		if !is[n] {
			delete(since, n)
		}
	}
}

// poweringDown: Slurm is running the suspend program for the node (it is
// not yet counted powered down).
func poweringDown(n slurm.Node) bool {
	return n.HasFlag("POWERING_DOWN") && !n.HasFlag("POWERED_DOWN") && !n.HasFlag("POWERING_UP")
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
//     while the node is powering down its instance is burst-suspend's, and
//     an orphan only once Memory has seen it powering down for Grace;
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
	p := newPlanner(nodes, now, opts)
	p.sortInstances(instances)
	for _, name := range slices.Sorted(maps.Keys(p.live)) {
		p.planLive(name)
	}
	// nodes Slurm counts on that have no live instance
	for _, name := range slices.Sorted(maps.Keys(p.byName)) {
		p.planMissing(name)
	}
	acts := p.acts
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

// planner is one Plan: what it has read and the actions so far.
type planner struct {
	now     time.Time
	opts    PlanOptions
	mem     *Memory
	byName  map[string]slurm.Node       // burst nodes Slurm reports
	live    map[string][]cloud.Instance // node -> its live instances
	dead    map[string]cloud.Instance   // node -> a stopped/shutting-down instance, for reasons
	handled map[string]bool
	acts    []Action
}

func newPlanner(nodes []slurm.Node, now time.Time, opts PlanOptions) *planner {
	owned := opts.Owned
	if owned == nil {
		owned = func(string) bool { return true }
	}
	mem := opts.Memory
	if mem == nil {
		mem = NewMemory()
	}
	p := &planner{now: now, opts: opts, mem: mem, byName: map[string]slurm.Node{}, live: map[string][]cloud.Instance{},
		dead: map[string]cloud.Instance{}, handled: map[string]bool{}}
	for _, n := range nodes {
		if owned(n.Name) && (opts.Owned != nil || n.HasFlag("CLOUD")) {
			p.byName[n.Name] = n
		}
	}
	return p
}

func (p *planner) old(in cloud.Instance) bool {
	return !in.LaunchTime.IsZero() && p.now.Sub(in.LaunchTime) >= p.opts.Grace
}

func (p *planner) age(in cloud.Instance) string {
	if in.LaunchTime.IsZero() {
		return "unknown age"
	}
	return "launched " + p.now.Sub(in.LaunchTime).Truncate(time.Second).String() + " ago"
}

// sortInstances terminates the stopped instances and those without a node
// tag, and files the rest by node: live or dead.
func (p *planner) sortInstances(instances []cloud.Instance) {
	for _, in := range instances {
		switch {
		case in.State == "stopped" || in.State == "stopping":
			p.acts = append(p.acts, Action{Kind: Terminate, Reason: ReasonStopped, Node: in.Node, InstanceIDs: []string{in.ID},
				Detail: fmt.Sprintf("instance is %s; burst never stops instances and a stopped node runs no job", in.State)})
			if in.Node != "" {
				p.dead[in.Node] = in
			}
		case !in.Live():
			if in.Node != "" {
				p.dead[in.Node] = in
			}
		case in.Node == "":
			if p.old(in) {
				p.acts = append(p.acts, Action{Kind: Terminate, Reason: ReasonNoNode, InstanceIDs: []string{in.ID},
					Detail: fmt.Sprintf("instance has no burst:node or burst:nodes tag naming its node (%s)", p.age(in))})
			}
		default:
			p.live[in.Node] = append(p.live[in.Node], in)
		}
	}
}

// planLive plans a node's live instances: orphans, a node stuck powering
// up, duplicates.
func (p *planner) planLive(name string) {
	ins := p.live[name]
	sort.Slice(ins, func(i, j int) bool {
		if !ins[i].LaunchTime.Equal(ins[j].LaunchTime) {
			return ins[i].LaunchTime.After(ins[j].LaunchTime) // newest first
		}
		return ins[i].ID < ins[j].ID
	})
	n, known := p.byName[name]
	if !known || !wantsInstance(n) {
		if known && n.State == "DOWN" && !poweredDown(n) {
			return // a DOWN node is the admin's or the agent's dead-man switch's
		}
		why := "node is powered down in Slurm"
		if known && poweringDown(n) {
			// burst-suspend is terminating it: a second terminate would race
			// it (one instance ended by two owners); Slurm counts the node
			// powered down after SuspendTimeout even if suspend failed
			since, seen := p.mem.PoweringDownSince[name]
			if !seen || p.now.Sub(since) < p.opts.Grace {
				return
			}
			why = fmt.Sprintf("node has been powering down for %s (burst-suspend did not terminate it)", p.now.Sub(since).Truncate(time.Second))
		}
		if !known {
			why = "Slurm has no burst node of that name"
		}
		for _, in := range ins {
			if p.old(in) {
				p.acts = append(p.acts, Action{Kind: Terminate, Reason: ReasonOrphan, Node: name, InstanceIDs: []string{in.ID},
					Detail: fmt.Sprintf("%s (%s, state %s)", why, p.age(in), in.State)})
			}
		}
		return
	}
	// stuck powering up: the node's newest instance is older than the
	// resume timeout and the node still has not registered
	if n.HasFlag("POWERING_UP") && p.opts.ResumeTimeout > 0 && !ins[0].LaunchTime.IsZero() && p.now.Sub(ins[0].LaunchTime) >= p.opts.ResumeTimeout {
		ids := make([]string, len(ins))
		for i, in := range ins {
			ids[i] = in.ID
		}
		p.acts = append(p.acts,
			Action{Kind: Terminate, Reason: ReasonResumeTimeout, Node: name, InstanceIDs: ids,
				Detail: fmt.Sprintf("node still powering up %s after launch (resume timeout %s)", p.now.Sub(ins[0].LaunchTime).Truncate(time.Second), p.opts.ResumeTimeout)},
			Action{Kind: HandBack, Reason: ReasonResumeTimeout, Node: name, InstanceIDs: ids,
				Detail: fmt.Sprintf("burst: instance %s did not register within %s", ins[0].ID, p.opts.ResumeTimeout)})
		p.handled[name] = true
		return
	}
	if len(ins) >= 2 {
		p.planDuplicates(n, ins)
	}
}

// planDuplicates keeps the instance at the node's Slurm address (else the
// newest) and terminates the others.
func (p *planner) planDuplicates(n slurm.Node, ins []cloud.Instance) {
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
		if in.ID == keep.ID || !p.old(in) {
			continue
		}
		p.acts = append(p.acts, Action{Kind: Terminate, Reason: ReasonDuplicate, Node: n.Name, InstanceIDs: []string{in.ID},
			Detail: fmt.Sprintf("node has %d live instances; keeping %s (address %s, Slurm NodeAddr %s), this one %s", len(ins), keep.ID, orDash(keep.PrivateIP), orDash(n.Addr), p.age(in))})
	}
}

// planMissing hands back a node Slurm counts on that has no live instance
// (once per instance gone; a node powering up only past the resume
// timeout).
func (p *planner) planMissing(name string) {
	n := p.byName[name]
	if p.handled[name] || len(p.live[name]) > 0 || !wantsInstance(n) {
		return
	}
	if n.HasFlag("POWERING_UP") {
		// a resume may still be launching; only a node stuck past the
		// resume timeout (as this reconciler has watched it) goes back
		since, ok := p.mem.PoweringUpSince[name]
		if ok && p.opts.ResumeTimeout > 0 && p.now.Sub(since) >= p.opts.ResumeTimeout {
			p.acts = append(p.acts, Action{Kind: HandBack, Reason: ReasonResumeTimeout, Node: name,
				Detail: fmt.Sprintf("burst: no instance after %s powering up", p.now.Sub(since).Truncate(time.Second))})
		}
		return
	}
	id := ""
	if in, ok := p.dead[name]; ok {
		id = in.ID
	} else if last := p.mem.LastInstance[name]; last != "" {
		id = last
	}
	if id != "" && p.mem.HandedBack[name] == id {
		return // handed back for this instance already; Slurm is on it
	}
	a := Action{Kind: HandBack, Reason: ReasonInstanceGone, Node: name,
		Detail: "burst: instance gone (none running for the node)"}
	if id != "" {
		a.InstanceIDs = []string{id}
		a.Detail = "burst: instance " + id + " gone"
		if in, ok := p.dead[name]; ok {
			a.Detail += " (" + in.State + ")"
		}
	}
	p.acts = append(p.acts, a)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
