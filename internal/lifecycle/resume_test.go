package lifecycle_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/breaker"
	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/cloud/cloudfake"
	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/config/configtest"
	"github.com/burst-hpc/burst/internal/lifecycle"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
)

// rig is a Resumer wired as burst-resume wires it (the sizing policy of
// the demo burst.yaml as the in-process fallback, the launch breaker, the
// journaling recorder) over the shared fakes of Slurm and the cloud.
type rig struct {
	cfg     *config.Config
	slurm   *slurmfake.Slurm
	cloud   *cloudfake.Provider
	breaker *breaker.Breaker
	r       *lifecycle.Resumer
	journal string
}

// sizer says how the rig's sizer behaves: "none" (no token: in-process
// ranking), "down" (connection refused), "unavailable" (503), or
// "over_budget" (402 for every rank).
func newRig(t *testing.T, sizer string, jobs ...slurm.Job) (*rig, *atomic.Int32) {
	t.Helper()
	cfg := configtest.Demo(t)
	cfg.Slurm.SetNodeAddr = true
	local, err := compose.Policy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	calls := &atomic.Int32{}
	var sc *sizerclient.Client
	if sizer != "none" {
		srv := configtest.Server(t, cfg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			switch sizer {
			case "over_budget":
				w.WriteHeader(http.StatusPaymentRequired)
				json.NewEncoder(w).Encode(sizerapi.ErrorResponse{Code: sizerapi.CodeOverBudget, Message: "account nlp spent $120.00 of its $100.00 monthly budget"})
			default:
				http.Error(w, "sizer restarting", http.StatusServiceUnavailable)
			}
		}))
		if sizer == "down" {
			srv.Close()
		}
		if sc, err = sizerclient.New(srv.URL, "admin-token", sizerclient.WithCAFile(cfg.Sizer.TLS.CAFile)); err != nil {
			t.Fatal(err)
		}
	}
	g := &rig{cfg: cfg, slurm: slurmfake.New(jobs, nil), cloud: cloudfake.New(cfg.Cluster.Name),
		breaker: breaker.New(breaker.Options{Dir: cfg.Sizer.StateDir, Threshold: 1})}
	rec := &lifecycle.JournalRecorder{Dir: cfg.Sizer.StateDir} // no sizer: every event is journaled
	g.journal = filepath.Join(cfg.Sizer.StateDir, "instance-events.jsonl")
	g.r = &lifecycle.Resumer{Cfg: cfg, Slurm: g.slurm, Cloud: g.cloud, Recorder: rec, Breaker: g.breaker,
		Ranker: &lifecycle.FallbackRanker{Sizer: sc, Local: local, Timeout: time.Second},
		UserData: func(nodes []cloud.NodeSpec, issued time.Time) (string, error) {
			return lifecycle.RenderUserData(cfg, nodes, issued)
		}}
	return g, calls
}

// resume runs one ResumeProgram call for hostlist with a resume file
// document (parsed by the real parser; "" for none).
func (g *rig) resume(t *testing.T, hostlist, resumeFile string) lifecycle.Outcome {
	t.Helper()
	var rf *slurm.ResumeFile
	if resumeFile != "" {
		parsed, err := slurm.ParseResumeFile([]byte(resumeFile))
		if err != nil {
			t.Fatal(err)
		}
		rf = &parsed
	}
	out, err := g.r.Resume(context.Background(), hostlist, rf)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// launched lists an outcome's nodes, sorted.
func launched(out lifecycle.Outcome) []string {
	var ns []string
	for n := range out.Launched {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// journaled is the launch events the recorder wrote.
func (g *rig) journaled(t *testing.T) []sizerapi.InstanceEvent {
	t.Helper()
	b, err := os.ReadFile(g.journal)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var evs []sizerapi.InstanceEvent
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct {
			Kind  string
			Event sizerapi.InstanceEvent
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		if e.Kind == "launch" || e.Kind == "terminate" {
			evs = append(evs, e.Event)
		}
	}
	return evs
}

// capacityAll sets every pool of the class's candidates to n free instances.
func (g *rig) capacityAll(class string, n int) {
	cl, _ := g.cfg.Class(class)
	for _, typ := range cl.InstanceTypes {
		for _, z := range cl.Zones {
			for _, c := range []capacity.Type{capacity.Spot, capacity.OnDemand} {
				g.cloud.SetCapacity(cloud.Offering{InstanceType: typ, Zone: z, Capacity: c}, n)
			}
		}
	}
}

func l4Job(id uint32, nodes string, n uint32) slurm.Job {
	gres, _ := slurm.ParseGRES("gpu:l4:1")
	return slurm.Job{ID: id, Name: "ft", User: "ada", Account: "nlp", Partition: "gpu", State: "CONFIGURING", Nodes: nodes,
		NodeCount: n, CPUs: 4 * n, GRESPerNode: gres, Requeue: true, Comment: "burst: params=1B workload=finetune", TimeLimit: time.Hour}
}

func TestResumer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		sizer      string
		jobs       []slurm.Job
		hostlist   string
		resumeFile string
		setup      func(t *testing.T, g *rig)
		check      func(t *testing.T, g *rig, out lifecycle.Outcome, sizerCalls int32)
	}{{
		name: "one node: cheapest spot offering, recorded, address set", sizer: "none",
		jobs: []slurm.Job{l4Job(1, "l4-1", 1)}, hostlist: "l4-1",
		resumeFile: `{"jobs":[{"job_id":1,"nodes":"l4-1"}],"all_nodes":"l4-1"}`,
		check: func(t *testing.T, g *rig, out lifecycle.Outcome, _ int32) {
			in, ok := out.Launched["l4-1"]
			if !ok || len(out.Failed) != 0 || in.InstanceType != "g6.xlarge" || in.Capacity != capacity.Spot || in.JobID != 1 {
				t.Fatalf("outcome %+v", out)
			}
			reqs := g.cloud.Launches()
			if len(reqs) != 1 || reqs[0].AllOrNothing || reqs[0].Attempt != 1 || reqs[0].Nodes[0].Account != "nlp" || reqs[0].UserData == "" {
				t.Fatalf("launch requests %+v", reqs)
			}
			evs := g.journaled(t)
			if len(evs) != 1 || evs[0].InstanceID != in.ID || evs[0].Job == nil || evs[0].Job.JobID != "1" || evs[0].Job.User != "ada" ||
				evs[0].PriceUSD != reqs[0].Offerings[0].PriceUSD || evs[0].PriceUSD <= 0 {
				t.Fatalf("recorded %+v", evs)
			}
			if ups := g.slurm.Updates(); len(ups) != 1 || ups[0].Addr != in.PrivateIP || ups[0].Hostname != "l4-1" {
				t.Fatalf("node address update %+v", ups)
			}
		},
	}, {
		name: "insufficient capacity: the next ranked offering", sizer: "none",
		jobs: []slurm.Job{l4Job(2, "l4-2", 1)}, hostlist: "l4-2",
		resumeFile: `{"jobs":[{"job_id":2,"nodes":"l4-2"}],"all_nodes":"l4-2"}`,
		setup: func(t *testing.T, g *rig) {
			cl, _ := g.cfg.Class("l4")
			for _, z := range cl.Zones {
				g.cloud.SetCapacity(cloud.Offering{InstanceType: "g6.xlarge", Zone: z, Capacity: capacity.Spot}, 0)
			}
		},
		check: func(t *testing.T, g *rig, out lifecycle.Outcome, _ int32) {
			in, ok := out.Launched["l4-2"]
			if !ok || in.InstanceType == "g6.xlarge" && in.Capacity == capacity.Spot {
				t.Fatalf("outcome %+v: want an offering other than the dry g6.xlarge spot pools", out)
			}
			offs := g.cloud.Launches()[0].Offerings
			next := slices.IndexFunc(offs, func(o cloud.Offering) bool { return !(o.InstanceType == "g6.xlarge" && o.Capacity == capacity.Spot) })
			if want := offs[next]; in.InstanceType != want.InstanceType || in.Zone != want.Zone || in.Capacity != want.Capacity {
				t.Fatalf("launched on %s/%s/%s, want the next ranked offering %s", in.InstanceType, in.Zone, in.Capacity, want.Key())
			}
			if evs := g.journaled(t); len(evs) != 1 || evs[0].PriceUSD != offs[next].PriceUSD {
				t.Fatalf("recorded price %+v, want %v", evs, offs[next].PriceUSD)
			}
		},
	}, {
		name: "all-or-nothing: a two-node job gets one pool for both", sizer: "none",
		jobs: []slurm.Job{l4Job(3, "l4-[1-2]", 2)}, hostlist: "l4-[1-2]",
		resumeFile: `{"jobs":[{"job_id":3,"nodes":"l4-[1-2]"}],"all_nodes":"l4-[1-2]"}`,
		check: func(t *testing.T, g *rig, out lifecycle.Outcome, _ int32) {
			a, b := out.Launched["l4-1"], out.Launched["l4-2"]
			if len(out.Launched) != 2 || a.Zone != b.Zone || a.InstanceType != b.InstanceType || a.Capacity != b.Capacity {
				t.Fatalf("outcome %+v", out)
			}
			if reqs := g.cloud.Launches(); len(reqs) != 1 || !reqs[0].AllOrNothing || len(reqs[0].Nodes) != 2 {
				t.Fatalf("launch requests %+v", reqs)
			}
		},
	}, {
		name: "all-or-nothing: room for one node only launches none", sizer: "none",
		jobs: []slurm.Job{l4Job(4, "l4-[1-2]", 2)}, hostlist: "l4-[1-2]",
		resumeFile: `{"jobs":[{"job_id":4,"nodes":"l4-[1-2]"}],"all_nodes":"l4-[1-2]"}`,
		setup:      func(t *testing.T, g *rig) { g.capacityAll("l4", 1) },
		check: func(t *testing.T, g *rig, out lifecycle.Outcome, _ int32) {
			if len(out.Launched) != 0 || len(g.cloud.Live()) != 0 {
				t.Fatalf("launched %v, live %v", out.Launched, g.cloud.Live())
			}
			if r := out.Failed["l4-1"]; r == "" || r != out.Failed["l4-2"] || !strings.Contains(r, "InsufficientInstanceCapacity") {
				t.Fatalf("failed %v", out.Failed)
			}
			ups := g.slurm.Updates()
			if len(ups) != 1 || ups[0].State != "POWER_DOWN_FORCE" || strings.Join(ups[0].Names, ",") != "l4-1,l4-2" || ups[0].Reason != out.Failed["l4-1"] {
				t.Fatalf("hand-back %+v", ups)
			}
		},
	}, {
		name: "manual power-ups launch each node on its own", sizer: "none",
		hostlist: "l4-[3-4]",
		check: func(t *testing.T, g *rig, out lifecycle.Outcome, _ int32) {
			reqs := g.cloud.Launches()
			if len(out.Launched) != 2 || len(reqs) != 2 || reqs[0].AllOrNothing || reqs[1].AllOrNothing || reqs[0].Nodes[0].JobID != 0 {
				t.Fatalf("outcome %+v requests %+v", out, reqs)
			}
		},
	}, {
		name: "breaker open: nothing launched, nodes handed back with the reason", sizer: "none",
		jobs: []slurm.Job{l4Job(5, "l4-1", 1)}, hostlist: "l4-1",
		resumeFile: `{"jobs":[{"job_id":5,"nodes":"l4-1"}],"all_nodes":"l4-1"}`,
		setup:      func(t *testing.T, g *rig) { g.breaker.Failure("l4", "InsufficientInstanceCapacity for g6.xlarge spot") },
		check: func(t *testing.T, g *rig, out lifecycle.Outcome, _ int32) {
			if len(out.Launched) != 0 || len(g.cloud.Launches()) != 0 {
				t.Fatalf("launched through an open breaker: %+v", g.cloud.Launches())
			}
			if r := out.Failed["l4-1"]; !strings.Contains(r, "launches for class l4 paused") || !strings.Contains(r, "InsufficientInstanceCapacity") {
				t.Fatalf("reason %q", r)
			}
		},
	}, {
		name: "a failed launch trips the breaker for the next resume", sizer: "none",
		hostlist: "l4-1",
		setup:    func(t *testing.T, g *rig) { g.capacityAll("l4", 0) },
		check: func(t *testing.T, g *rig, out lifecycle.Outcome, _ int32) {
			if len(out.Launched) != 0 || !strings.Contains(out.Failed["l4-1"], "InsufficientInstanceCapacity") {
				t.Fatalf("outcome %+v", out)
			}
			again := g.resume(t, "l4-2", "")
			if len(g.cloud.Launches()) != 1 || !strings.Contains(again.Failed["l4-2"], "paused") {
				t.Fatalf("second resume: launches %d, outcome %+v", len(g.cloud.Launches()), again)
			}
		},
	}, {
		name: "sizer unavailable: ranked in-process", sizer: "unavailable",
		jobs: []slurm.Job{l4Job(6, "l4-1", 1)}, hostlist: "l4-1",
		resumeFile: `{"jobs":[{"job_id":6,"nodes":"l4-1"}],"all_nodes":"l4-1"}`,
		check: func(t *testing.T, g *rig, out lifecycle.Outcome, calls int32) {
			if calls != 1 || out.Launched["l4-1"].InstanceType != "g6.xlarge" {
				t.Fatalf("sizer calls %d, outcome %+v", calls, out)
			}
		},
	}, {
		name: "sizer down: ranked in-process", sizer: "down",
		jobs: []slurm.Job{l4Job(7, "l4-1", 1)}, hostlist: "l4-1",
		resumeFile: `{"jobs":[{"job_id":7,"nodes":"l4-1"}],"all_nodes":"l4-1"}`,
		check: func(t *testing.T, g *rig, out lifecycle.Outcome, _ int32) {
			if _, ok := out.Launched["l4-1"]; !ok || len(out.Failed) != 0 {
				t.Fatalf("outcome %+v", out)
			}
		},
	}, {
		name: "over budget: job held, nodes handed back, nothing launched", sizer: "over_budget",
		jobs: []slurm.Job{l4Job(8, "l4-1", 1)}, hostlist: "l4-1",
		resumeFile: `{"jobs":[{"job_id":8,"nodes":"l4-1"}],"all_nodes":"l4-1"}`,
		check: func(t *testing.T, g *rig, out lifecycle.Outcome, _ int32) {
			const reason = "burst: held: account nlp is over its monthly GPU budget"
			if len(g.cloud.Launches()) != 0 || out.Failed["l4-1"] != reason {
				t.Fatalf("outcome %+v launches %d", out, len(g.cloud.Launches()))
			}
			if j, _ := g.slurm.Job(8); j.Reason != "JobHeldAdmin" || j.AdminComment != reason {
				t.Fatalf("job not held with the reason: %+v", j)
			}
			if ups := g.slurm.Updates(); len(ups) != 1 || ups[0].State != "POWER_DOWN_FORCE" || ups[0].Reason != reason {
				t.Fatalf("hand-back %+v", ups)
			}
		},
	}, {
		name: "partial resume: only nodes_resume launch, beside the running node", sizer: "none",
		jobs: []slurm.Job{l4Job(9, "l4-[1-3]", 3)}, hostlist: "l4-[2-3]",
		resumeFile: `{"all_nodes_resume":"l4-[2-3]","jobs":[{"job_id":9,"nodes_alloc":"l4-[1-3]","nodes_resume":"l4-[2-3]","partition":"gpu"}]}`,
		setup: func(t *testing.T, g *rig) {
			g.cloud.Add(cloud.Instance{ID: "i-up", Node: "l4-1", InstanceType: "g6.xlarge", Zone: "us-east-1b", State: "running", Capacity: capacity.Spot, JobID: 9})
		},
		check: func(t *testing.T, g *rig, out lifecycle.Outcome, _ int32) {
			if got := launched(out); strings.Join(got, ",") != "l4-2,l4-3" || out.Launched["l4-2"].JobID != 9 {
				t.Fatalf("launched %v", got)
			}
			reqs := g.cloud.Launches()
			if len(reqs) != 1 || !reqs[0].AllOrNothing || len(reqs[0].Nodes) != 2 || reqs[0].Nodes[0].Node != "l4-2" {
				t.Fatalf("launch requests %+v", reqs)
			}
			if live := g.cloud.Live(); len(live) != 3 || slices.Contains(g.cloud.Terminated(), "i-up") {
				t.Fatalf("live %+v", live)
			}
		},
	}, {
		name: "a node in no class is handed back, the rest launch", sizer: "none",
		hostlist: "l4-1,x-1",
		check: func(t *testing.T, g *rig, out lifecycle.Outcome, _ int32) {
			if _, ok := out.Launched["l4-1"]; !ok || !strings.Contains(out.Failed["x-1"], "node x-1 is in no class") {
				t.Fatalf("outcome %+v", out)
			}
		},
	}, {
		name: "squeue fails: sized from the node class alone", sizer: "none",
		jobs: []slurm.Job{l4Job(10, "l4-1", 1)}, hostlist: "l4-1",
		resumeFile: `{"jobs":[{"job_id":10,"nodes":"l4-1"}],"all_nodes":"l4-1"}`,
		setup:      func(t *testing.T, g *rig) { g.slurm.JobsErr = context.DeadlineExceeded },
		check: func(t *testing.T, g *rig, out lifecycle.Outcome, _ int32) {
			in, ok := out.Launched["l4-1"]
			if !ok || in.JobID != 10 || g.cloud.Launches()[0].Nodes[0].Account != "" {
				t.Fatalf("outcome %+v", out)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g, calls := newRig(t, tc.sizer, tc.jobs...)
			if tc.setup != nil {
				tc.setup(t, g)
			}
			out := g.resume(t, tc.hostlist, tc.resumeFile)
			tc.check(t, g, out, calls.Load())
		})
	}
}

// node is a Slurm node record in the given base state with flags.
func node(name, state string, flags ...string) slurm.Node {
	return slurm.Node{Name: name, State: state, Flags: append([]string{"CLOUD"}, flags...)}
}

// TestPartialResume: Slurm resumes a multi-node job's nodes in several
// calls (24.05+ ResumeRate token bucket; 22.05 with ResumeRate too). The
// first call launches the whole allocation as one all-or-nothing fleet;
// later calls for the job's other nodes find the instances and launch
// nothing; a node of the job already up keeps its instance; a launch that
// fails hands every node of the allocation back.
func TestPartialResume(t *testing.T) {
	const rf24 = `{"all_nodes_resume":"%[1]s","jobs":[{"job_id":11,"nodes_alloc":"l4-[1-3]","nodes_resume":"%[1]s","partition":"gpu"}]}`
	resume24 := func(n string) string { return strings.ReplaceAll(rf24, "%[1]s", n) }
	t.Run("whole allocation at the first call, nothing at the later ones", func(t *testing.T) {
		g, _ := newRig(t, "none", l4Job(11, "l4-[1-3]", 3))
		g.slurm.SetNodes(node("l4-1", "ALLOCATED", "POWERING_UP"), node("l4-2", "ALLOCATED", "POWERED_DOWN"), node("l4-3", "ALLOCATED", "POWERED_DOWN"))
		out := g.resume(t, "l4-1", resume24("l4-1"))
		if got := launched(out); strings.Join(got, ",") != "l4-1,l4-2,l4-3" || len(out.Failed) != 0 {
			t.Fatalf("first call launched %v (failed %v), want the whole allocation l4-[1-3]", got, out.Failed)
		}
		reqs := g.cloud.Launches()
		if len(reqs) != 1 || !reqs[0].AllOrNothing || len(reqs[0].Nodes) != 3 || reqs[0].Nodes[0].Node != "l4-1" || reqs[0].Nodes[2].Node != "l4-3" {
			t.Fatalf("launch requests %+v, want one all-or-nothing request for l4-1,l4-2,l4-3 in allocation order", reqs)
		}
		a, b, c := out.Launched["l4-1"], out.Launched["l4-2"], out.Launched["l4-3"]
		if a.Zone != b.Zone || b.Zone != c.Zone || a.InstanceType != c.InstanceType || a.Capacity != c.Capacity {
			t.Fatalf("the job spans pools: %+v", out.Launched)
		}
		// Slurm's next token: l4-2, still booting
		g.slurm.SetNodes(node("l4-1", "ALLOCATED", "POWERING_UP"), node("l4-2", "ALLOCATED", "POWERING_UP"), node("l4-3", "ALLOCATED", "POWERED_DOWN"))
		out = g.resume(t, "l4-2", resume24("l4-2"))
		if len(out.Failed) != 0 || out.Launched["l4-2"].ID != b.ID {
			t.Fatalf("second call: %+v, want l4-2's instance %s reused", out, b.ID)
		}
		// the last one, when the others are up
		g.slurm.SetNodes(node("l4-1", "ALLOCATED"), node("l4-2", "ALLOCATED"), node("l4-3", "ALLOCATED", "POWERING_UP"))
		out = g.resume(t, "l4-3", resume24("l4-3"))
		if len(out.Failed) != 0 || out.Launched["l4-3"].ID != c.ID {
			t.Fatalf("third call: %+v, want l4-3's instance %s reused", out, c.ID)
		}
		if live := g.cloud.Live(); len(live) != 3 {
			t.Fatalf("%d live instances, want 3 (no duplicate): %+v", len(live), live)
		}
		if evs := g.journaled(t); len(evs) != 3 {
			t.Fatalf("%d launch events recorded, want 3", len(evs))
		}
	})
	t.Run("22.05: the allocation from squeue", func(t *testing.T) {
		g, _ := newRig(t, "none", l4Job(12, "l4-[1-2]", 2))
		g.slurm.SetNodes(node("l4-1", "ALLOCATED", "POWERING_UP"), node("l4-2", "ALLOCATED", "POWERED_DOWN"))
		out := g.resume(t, "l4-1", `{"jobs":[{"job_id":12,"nodes":"l4-1"}],"all_nodes":"l4-1"}`)
		reqs := g.cloud.Launches()
		if got := launched(out); strings.Join(got, ",") != "l4-1,l4-2" || len(reqs) != 1 || !reqs[0].AllOrNothing {
			t.Fatalf("launched %v with %+v, want l4-[1-2] in one all-or-nothing request", got, reqs)
		}
	})
	t.Run("a node of the job already up keeps its instance", func(t *testing.T) {
		g, _ := newRig(t, "none", l4Job(11, "l4-[1-3]", 3))
		g.cloud.Add(cloud.Instance{ID: "i-warm", Node: "l4-2", InstanceType: "g6.xlarge", Zone: "us-east-1a", State: "running", Capacity: capacity.Spot})
		g.slurm.SetNodes(node("l4-1", "ALLOCATED", "POWERING_UP"), node("l4-2", "ALLOCATED"), node("l4-3", "ALLOCATED", "POWERED_DOWN"))
		out := g.resume(t, "l4-1", resume24("l4-1"))
		reqs := g.cloud.Launches()
		if got := launched(out); strings.Join(got, ",") != "l4-1,l4-3" || len(reqs) != 1 || len(reqs[0].Nodes) != 2 {
			t.Fatalf("launched %v with %+v, want l4-1 and l4-3 (l4-2 runs)", got, reqs)
		}
		if live := g.cloud.Live(); len(live) != 3 {
			t.Fatalf("%d live instances, want 3", len(live))
		}
	})
	t.Run("no capacity: the whole allocation goes back", func(t *testing.T) {
		g, _ := newRig(t, "none", l4Job(11, "l4-[1-3]", 3))
		g.capacityAll("l4", 2)
		g.slurm.SetNodes(node("l4-1", "ALLOCATED", "POWERING_UP"), node("l4-2", "ALLOCATED", "POWERED_DOWN"), node("l4-3", "ALLOCATED", "POWERED_DOWN"))
		out := g.resume(t, "l4-1", resume24("l4-1"))
		if len(out.Launched) != 0 || len(g.cloud.Live()) != 0 {
			t.Fatalf("launched %v", out.Launched)
		}
		ups := g.slurm.Updates()
		if len(ups) != 1 || ups[0].State != "POWER_DOWN_FORCE" || strings.Join(ups[0].Names, ",") != "l4-1,l4-2,l4-3" {
			t.Fatalf("hand-back %+v, want l4-1,l4-2,l4-3 powered down with the reason", ups)
		}
	})
	t.Run("node states unreadable: only this call's nodes", func(t *testing.T) {
		g, _ := newRig(t, "none", l4Job(11, "l4-[1-3]", 3))
		g.slurm.NodesErr = context.DeadlineExceeded
		out := g.resume(t, "l4-1", resume24("l4-1"))
		if got := launched(out); strings.Join(got, ",") != "l4-1" {
			t.Fatalf("launched %v, want l4-1 only", got)
		}
	})
}

// TestResumeHandsBackAfterItsDeadline: launches that ran the resume's
// context out (a long throttled burst) still end with the failed nodes
// handed back to Slurm, not left for ResumeTimeout.
func TestResumeHandsBackAfterItsDeadline(t *testing.T) {
	g, _ := newRig(t, "none")
	g.capacityAll("l4", 0)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	out, err := g.r.Resume(ctx, "l4-1", nil)
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if _, ok := out.Failed["l4-1"]; !ok {
		t.Fatalf("outcome %+v, want l4-1 failed (no capacity)", out)
	}
	ups := g.slurm.Updates()
	if len(ups) != 1 || ups[0].State != "POWER_DOWN_FORCE" || strings.Join(ups[0].Names, ",") != "l4-1" {
		t.Fatalf("updates %+v, want l4-1 handed back (POWER_DOWN_FORCE)", ups)
	}
}
