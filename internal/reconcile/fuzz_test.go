package reconcile

import (
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/slurm"
)

var (
	fuzzStates = []string{"pending", "running", "shutting-down", "stopping", "stopped", "terminated", ""}
	fuzzBase   = []string{"IDLE", "ALLOCATED", "MIXED", "DOWN", "FUTURE", "COMPLETING"}
	fuzzFlags  = []string{"POWERED_DOWN", "POWERING_UP", "POWER_DOWN", "POWERING_DOWN", "NOT_RESPONDING", "DRAIN"}
	fuzzNames  = []string{"gpu-1", "gpu-2", "gpu-3", ""}
)

// FuzzPlan builds arbitrary clusters from the bytes and checks Plan's
// safety rules: it never terminates a live instance younger than the grace
// period unless its node is stuck powering up, never terminates the only
// live instance of a node Slurm counts on, never hands back a node that is
// powered down, and names only instances and nodes it was given.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{0, 1, 0, 5, 1, 0, 1, 0})
	f.Add([]byte{1, 1, 3, 9, 0, 2, 0, 1, 1, 0, 2, 0, 6, 1})
	f.Add([]byte{2, 0, 2, 200, 2, 1, 1, 3, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		next := func() int {
			if len(b) == 0 {
				return 0
			}
			v := int(b[0])
			b = b[1:]
			return v
		}
		var insts []cloud.Instance
		for i, n := 0, next()%6; i < n; i++ {
			insts = append(insts, cloud.Instance{ID: "i-" + string(rune('a'+i)), Node: fuzzNames[next()%len(fuzzNames)],
				State: fuzzStates[next()%len(fuzzStates)], LaunchTime: t0.Add(-time.Duration(next()) * 10 * time.Second),
				PrivateIP: "10.0.0." + string(rune('1'+next()%3))})
		}
		var nodes []slurm.Node
		for i, n := 0, next()%4; i < n; i++ {
			nd := slurm.Node{Name: fuzzNames[i%3], State: fuzzBase[next()%len(fuzzBase)], Flags: []string{"CLOUD"}, Addr: "10.0.0." + string(rune('1'+next()%3))}
			for m := next(); m != 0; m >>= 1 {
				if m&1 == 1 && len(nd.Flags) <= len(fuzzFlags) {
					nd.Flags = append(nd.Flags, fuzzFlags[(len(nd.Flags)-1)%len(fuzzFlags)])
				}
			}
			nodes = append(nodes, nd)
		}
		opts := PlanOptions{Grace: time.Minute, ResumeTimeout: 10 * time.Minute}
		acts := Plan(insts, nodes, t0, opts)
		byID := map[string]cloud.Instance{}
		live := map[string]int{}
		for _, in := range insts {
			byID[in.ID] = in
			if in.Live() && in.Node != "" {
				live[in.Node]++
			}
		}
		byNode := map[string]slurm.Node{}
		for _, n := range nodes {
			byNode[n.Name] = n
		}
		terminated := map[string]bool{}
		for _, a := range acts {
			for _, id := range a.InstanceIDs {
				in, ok := byID[id]
				if !ok && a.Kind == Terminate {
					t.Fatalf("terminates unknown instance %s: %+v", id, a)
				}
				if a.Kind != Terminate {
					continue
				}
				terminated[id] = true
				if in.Live() && t0.Sub(in.LaunchTime) < opts.Grace && a.Reason != ReasonResumeTimeout {
					t.Fatalf("terminates %s, launched %s ago (grace %s): %+v", id, t0.Sub(in.LaunchTime), opts.Grace, a)
				}
			}
			if a.Kind == HandBack {
				n, ok := byNode[a.Node]
				if !ok || poweredDown(n) {
					t.Fatalf("hands back a node that is unknown or powered down: %+v (%+v)", a, n)
				}
			}
		}
		for name, n := range byNode {
			if !wantsInstance(n) || n.HasFlag("POWERING_UP") || live[name] == 0 {
				continue
			}
			left := 0
			for _, in := range insts {
				if in.Node == name && in.Live() && !terminated[in.ID] {
					left++
				}
			}
			if left == 0 {
				t.Fatalf("terminates every live instance of %s, which Slurm counts on (%s): %v", name, n.StateString(), acts)
			}
		}
	})
}
