package slurm

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// The fixtures in testdata/<release>/ are what the real daemons of each
// release printed for one scenario (TestCaptureSamples in e2e_test.go with
// -update, per BURST_SLURM release; testdata/README.md):
//
//	jobs   1 train-7b      PENDING (BeginTime), --gres=gpu:a10g:2, --comment "burst: ...", -C a10g, --mem=500, -t 30, --requeue
//	       2 gpus-per-job  PENDING (JobHeldUser), --gpus=2, --mem-per-cpu=100, --no-requeue
//	       3 sweep         PENDING (JobHeldUser), --array=0-3, --gres=gpu:1
//	       4 done          COMPLETED on gpu-1
//	       5 running       RUNNING on gpu-1 (-c 2: the node is ALLOCATED)
//	       6 booting       CONFIGURING on gpu-2 (powering up: nothing starts its slurmd), -t 60
//	       7 multi         CONFIGURING on gpu-[3-4], --extra burst=1 (23.02+)
//	nodes  gpu-1 ALLOCATED+CLOUD (23.11+: instance i-0123456789abcdef0, g5.xlarge)
//	       gpu-2, gpu-3, gpu-4 MIXED+CLOUD+NOT_RESPONDING+POWERING_UP
//	       gpu-5, gpu-6 IDLE+CLOUD+POWERED_DOWN
//	       big-1 IDLE+CLOUD+DRAIN+POWERED_DOWN, reason "capacity test", comment and extra set
var releases = []string{"22.05", "24.11", "26.05"}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fixtureVersion(t testing.TB, rel string) Version {
	t.Helper()
	v, err := ParseVersion(string(readTestdata(t, rel+"/version.txt")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v.String(), rel+".") {
		t.Fatalf("testdata/%s/version.txt is Slurm %s", rel, v)
	}
	return v
}

func byID(jobs []Job) map[uint32]Job {
	m := map[uint32]Job{}
	for _, j := range jobs {
		m[j.ID] = j
	}
	return m
}

func TestJobsFixtures(t *testing.T) {
	for _, rel := range releases {
		t.Run(rel, func(t *testing.T) {
			v := fixtureVersion(t, rel)
			jobs, err := ParseJobsJSON(readTestdata(t, rel+"/squeue.json"))
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) != 7 {
				t.Fatalf("%d jobs, want 7", len(jobs))
			}
			by := byID(jobs)
			gres := func(typ string, n uint64) []GRES { return []GRES{{Name: "gpu", Type: typ, Count: n}} }
			p := by[1]
			if p.Name != "train-7b" || p.State != "PENDING" || p.StateFlags != nil || p.Reason != "BeginTime" ||
				p.Comment != "burst: params=7B ckpt=/fsx/ck" || p.Features != "a10g" || p.MemoryPerNodeMB != 500 ||
				p.MemoryPerCPUMB != 0 || p.TimeLimit != 30*time.Minute || !p.Requeue || p.CPUs != 1 || p.NodeCount != 1 ||
				p.User != "root" || p.Partition != "cloud" || p.Nodes != "" || p.SubmitTime.IsZero() || p.ArrayJobID != 0 ||
				!reflect.DeepEqual(p.GRESPerNode, gres("a10g", 2)) || p.GRESPerJob != nil {
				t.Errorf("pending job: %+v", p)
			}
			g := by[2]
			if g.Name != "gpus-per-job" || g.Reason != "JobHeldUser" || GPUs(g.GRESPerJob) != 2 || g.GRESPerNode != nil ||
				g.MemoryPerCPUMB != 100 || g.MemoryPerNodeMB != 0 || g.TimeLimit != 0 || g.Requeue || !g.StartTime.IsZero() {
				t.Errorf("--gpus job: %+v", g)
			}
			if a := by[3]; a.Name != "sweep" || a.ArrayJobID != 3 || a.State != "PENDING" || a.Reason != "JobHeldUser" ||
				!reflect.DeepEqual(a.GRESPerNode, gres("", 1)) {
				t.Errorf("array job: %+v", a)
			}
			if d := by[4]; d.State != "COMPLETED" || d.Nodes != "gpu-1" || d.BatchHost != "gpu-1" || d.GPUsPerNode() != 1 {
				t.Errorf("completed job: %+v", d)
			}
			if r := by[5]; r.State != "RUNNING" || r.StartTime.IsZero() || r.CPUs != 2 || r.Nodes != "gpu-1" ||
				!reflect.DeepEqual(r.GRESPerNode, gres("a10g", 1)) || r.HasStateFlag("CONFIGURING") {
				t.Errorf("running job: %+v", r)
			}
			b := by[6]
			if b.Name != "booting" || b.State != "CONFIGURING" || b.Nodes != "gpu-2" || b.TimeLimit != time.Hour ||
				!b.HasStateFlag("CONFIGURING") || b.GPUsPerNode() != 2 {
				t.Errorf("booting job: %+v", b)
			}
			// 23.11+ report the state's flags: base state RUNNING, shown as CONFIGURING
			if v.AtLeast(23, 11) && !slices.Equal(b.StateFlags, []string{"CONFIGURING", "POWER_UP_NODE"}) {
				t.Errorf("booting job state flags %q, want CONFIGURING POWER_UP_NODE", b.StateFlags)
			}
			m := by[7]
			if m.State != "CONFIGURING" || m.Nodes != "gpu-[3-4]" || m.NodeCount != 2 || m.CPUs != 2 || m.Tasks != 2 {
				t.Errorf("multi-node job: %+v", m)
			}
			if wantExtra := map[bool]string{true: "burst=1", false: ""}[v.AtLeast(23, 2)]; m.Extra != wantExtra {
				t.Errorf("multi-node job extra %q, want %q", m.Extra, wantExtra)
			}

			// the targeted query: 22.05 ignores -j under --json (all 7 jobs);
			// later releases answer jobs 6 and 7 only (999999 is unknown)
			js, err := ParseJobsJSON(readTestdata(t, rel+"/squeue-j.json"))
			if err != nil {
				t.Fatal(err)
			}
			var ids []uint32
			for _, j := range js {
				ids = append(ids, j.ID)
				if !reflect.DeepEqual(j, by[j.ID]) {
					t.Errorf("squeue -j: job %d differs from the full listing:\n %+v\n %+v", j.ID, j, by[j.ID])
				}
			}
			slices.Sort(ids)
			want := []uint32{6, 7}
			if !v.AtLeast(23, 2) {
				want = []uint32{1, 2, 3, 4, 5, 6, 7}
			}
			if !slices.Equal(ids, want) {
				t.Errorf("squeue --json -j 6,7,999999 gave jobs %v, want %v", ids, want)
			}
			if !v.AtLeast(23, 2) {
				return
			}
			// scontrol --json show job: same shape, same record
			sj, err := ParseJobsJSON(readTestdata(t, rel+"/scontrol-show-job.json"))
			if err != nil {
				t.Fatal(err)
			}
			if len(sj) != 1 || !reflect.DeepEqual(sj[0], by[6]) {
				t.Errorf("scontrol show job 6 = %+v, want the squeue record %+v", sj, by[6])
			}
			// the release's default data parser (26.05: v0.0.45), not pinned:
			// the same jobs (the parser reads either)
			dj, err := ParseJobsJSON(readTestdata(t, rel+"/squeue-default.json"))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(byID(dj), by) {
				t.Errorf("default data parser gives other jobs than the pinned one:\n%+v\n%+v", dj, jobs)
			}
		})
	}
}

func nodesFixture(t *testing.T, rel string) []Node {
	t.Helper()
	name := rel + "/scontrol-show-node.json"
	if rel == "22.05" {
		name = rel + "/sinfo.json"
	}
	nodes, err := ParseNodesJSON(readTestdata(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

func nodeMap(nodes []Node) map[string]Node {
	m := map[string]Node{}
	for _, n := range nodes {
		m[n.Name] = n
	}
	return m
}

func TestNodesFixtures(t *testing.T) {
	for _, rel := range releases {
		t.Run(rel, func(t *testing.T) {
			v := fixtureVersion(t, rel)
			by := nodeMap(nodesFixture(t, rel))
			if len(by) != 7 {
				t.Fatalf("nodes %v, want big-1 gpu-[1-6]", by)
			}
			b := by["big-1"]
			if b.StateString() != "IDLE+CLOUD+DRAIN+POWERED_DOWN" || b.Reason != "capacity test" || b.Comment != "i-0abc" ||
				b.Extra != `{"instance_id":"i-0abc"}` || GPUs(b.GRES) != 8 || b.GRES[0].Type != "a100" || b.CPUs != 2 ||
				b.RealMemoryMB != 1000 || !b.BootTime.IsZero() || !b.SlurmdStart.IsZero() || b.GRESUsed != "gpu:a100:0(IDX:N/A)" ||
				!slices.Equal(b.Features, []string{"p4d.24xlarge", "a100"}) || !slices.Equal(b.Partitions, []string{"cloud"}) {
				t.Errorf("big-1: %+v", b)
			}
			u := by["gpu-1"]
			if u.StateString() != "ALLOCATED+CLOUD" || u.HasFlag("POWERED_DOWN") || !u.HasFlag("cloud") || u.Addr == "" || u.Addr == "gpu-1" ||
				u.GRESUsed != "gpu:a10g:1(IDX:0)" || u.BootTime.IsZero() || u.SlurmdStart.IsZero() || u.SlurmdStart.Before(u.BootTime) ||
				u.SlurmdVersion != v.String() {
				t.Errorf("gpu-1: %+v", u)
			}
			// 23.11+ record the node's instance (set with scontrol update
			// nodename=gpu-1 instanceid=... instancetype=...)
			if v.AtLeast(23, 11) && (u.InstanceID != "i-0123456789abcdef0" || u.InstanceType != "g5.xlarge") {
				t.Errorf("gpu-1 instance %q %q, want i-0123456789abcdef0 g5.xlarge", u.InstanceID, u.InstanceType)
			}
			for _, name := range []string{"gpu-2", "gpu-3", "gpu-4"} {
				if n := by[name]; n.StateString() != "MIXED+CLOUD+NOT_RESPONDING+POWERING_UP" || !n.BootTime.IsZero() {
					t.Errorf("%s (powering up): %s", name, n.StateString())
				}
			}
			for _, name := range []string{"gpu-5", "gpu-6"} {
				if n := by[name]; n.StateString() != "IDLE+CLOUD+POWERED_DOWN" || n.Reason != "" || n.InstanceID != "" {
					t.Errorf("%s (idle~): %+v", name, n)
				}
			}
			if v.AtLeast(23, 2) {
				named, err := ParseNodesJSON(readTestdata(t, rel+"/scontrol-show-node-named.json"))
				if err != nil {
					t.Fatal(err)
				}
				if len(named) != 2 || !reflect.DeepEqual(named[0], by[named[0].Name]) || !reflect.DeepEqual(named[1], by[named[1].Name]) {
					t.Errorf("scontrol show node gpu-2,big-1,nope-1 = %+v", named)
				}
				// 23.02+ sinfo --json has no node records: refused, saying why
				_, err = ParseNodesJSON(readTestdata(t, rel+"/sinfo.json"))
				if err == nil || !strings.Contains(err.Error(), "sinfo --json of Slurm 23.02 or later") || !strings.Contains(err.Error(), "Slurm "+v.String()) {
					t.Errorf("sinfo --json of %s: %v", rel, err)
				}
			}
		})
	}
}

// 22.05 answers named nodes with scontrol's text (its sinfo --json ignores
// -n): both captures of the same moment must give the same nodes.
func TestScontrolNodesMatchSinfoJSON(t *testing.T) {
	loc := time.Local
	time.Local = time.UTC // the fixtures were captured with TZ=UTC
	defer func() { time.Local = loc }()
	js := nodeMap(nodesFixture(t, "22.05"))
	text, err := ParseScontrolNodes(readTestdata(t, "22.05/scontrol-show-node.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(text) != len(js) {
		t.Fatalf("text gives %d nodes, JSON %d", len(text), len(js))
	}
	for _, n := range text {
		j := js[n.Name]
		if !n.BootTime.Equal(j.BootTime) {
			t.Errorf("node %s: boot time %v (text), %v (JSON)", n.Name, n.BootTime, j.BootTime)
		}
		if !n.SlurmdStart.Equal(j.SlurmdStart) {
			t.Errorf("node %s: slurmd start %v (text), %v (JSON)", n.Name, n.SlurmdStart, j.SlurmdStart)
		}
		n.BootTime, j.BootTime = time.Time{}, time.Time{}
		n.SlurmdStart, j.SlurmdStart = time.Time{}, time.Time{}
		if !reflect.DeepEqual(n, j) {
			t.Errorf("node %s:\ntext %+v\njson %+v", n.Name, n, j)
		}
	}
	named, err := ParseScontrolNodes(readTestdata(t, "22.05/scontrol-show-node-named.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(named) != 2 || named[0].Name != "gpu-2" || named[1].Name != "big-1" {
		t.Errorf("scontrol show node -o gpu-2,big-1,nope-1 = %+v", named)
	}
}

// squeue's job-state lines and its JSON, captured at the same moment, agree.
func TestJobStatesFixtures(t *testing.T) {
	for _, rel := range releases {
		t.Run(rel, func(t *testing.T) {
			states, err := ParseJobStates(readTestdata(t, rel+"/squeue-states.txt"))
			if err != nil {
				t.Fatal(err)
			}
			jobs, err := ParseJobsJSON(readTestdata(t, rel+"/squeue.json"))
			if err != nil {
				t.Fatal(err)
			}
			by := byID(jobs)
			if len(states) != len(jobs) {
				t.Fatalf("%d state lines, %d jobs", len(states), len(jobs))
			}
			for _, s := range states {
				j := by[s.ID]
				if s.State != j.State || s.Reason != j.Reason || s.Nodes != j.Nodes || s.NodeCount != j.NodeCount {
					t.Errorf("job %d: text %+v, JSON state %s reason %s nodes %q count %d", s.ID, s, j.State, j.Reason, j.Nodes, j.NodeCount)
				}
			}
		})
	}
}

func TestResumeFileFixtures(t *testing.T) {
	for _, rel := range releases {
		t.Run(rel, func(t *testing.T) {
			v := fixtureVersion(t, rel)
			var jobs []ResumeJob
			var all []string
			for i := 1; ; i++ {
				b, err := os.ReadFile(filepath.Join("testdata", rel, "resume-"+string(rune('0'+i))+".json"))
				if os.IsNotExist(err) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				rf, err := ParseResumeFile(b)
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, rf.AllNodes)
				jobs = append(jobs, rf.Jobs...)
			}
			// gpu-1 powered up by hand (no job), then jobs 6 and 7 (in one
			// call, or in two: 24.05+ rate limiting may split them)
			if len(all) < 2 || all[0] != "gpu-1" || len(jobs) != 2 {
				t.Fatalf("resume files: all_nodes %q, jobs %+v", all, jobs)
			}
			want := []ResumeJob{{JobID: 6, Nodes: "gpu-2", NodesAlloc: "gpu-2"}, {JobID: 7, Nodes: "gpu-[3-4]", NodesAlloc: "gpu-[3-4]"}}
			if v.AtLeast(23, 2) {
				want[1].Extra = "burst=1"
				for i := range want {
					want[i].Partition, want[i].Oversubscribe = "cloud", "OK"
				}
			}
			if v.AtLeast(26, 5) {
				for i := range want {
					want[i].Oversubscribe, want[i].Exclusive, want[i].Priority = "NO", "NO", 1
				}
			}
			if !reflect.DeepEqual(jobs, want) {
				t.Errorf("resume jobs\n got %+v\nwant %+v", jobs, want)
			}
		})
	}
}
