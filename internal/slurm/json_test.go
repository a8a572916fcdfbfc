package slurm

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testdata/squeue-22.05.json was captured from the real harness cluster
// (go test -run TestCaptureSamples -update): a pending --gres job with
// burst metadata, a held --gpus job, a completed and a running job.
func TestParseSqueueJSONSample(t *testing.T) {
	jobs, err := ParseSqueueJSON(readTestdata(t, "squeue-22.05.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 4 {
		t.Fatalf("got %d jobs, want 4", len(jobs))
	}
	byName := map[string]Job{}
	for _, j := range jobs {
		byName[j.Name] = j
	}
	p := byName["train-7b"]
	if p.ID != 1 || p.State != "PENDING" || p.Reason != "BeginTime" || p.Comment != "burst: params=7B ckpt=/fsx/ck" ||
		p.Features != "a10g" || p.TRESPerNode != "gres:gpu:a10g:2" || p.MemoryPerNodeMB != 500 || p.MemoryPerCPUMB != 0 ||
		p.TimeLimit != 30*time.Minute || !p.Requeue || p.CPUs != 1 || p.NodeCount != 1 || p.User != "root" ||
		p.Partition != "cloud" || p.Nodes != "" || p.GPUsPerNode() != 2 || p.SubmitTime.IsZero() {
		t.Errorf("pending job: %+v", p)
	}
	if want := []GRES{{Name: "gpu", Type: "a10g", Count: 2}}; !reflect.DeepEqual(p.GRESPerNode, want) {
		t.Errorf("pending job GRES %+v, want %+v", p.GRESPerNode, want)
	}
	g := byName["gpus-per-job"]
	if g.Reason != "JobHeldUser" || g.TRESPerJob != "gres:gpu:2" || GPUs(g.GRESPerJob) != 2 || g.GRESPerNode != nil ||
		g.MemoryPerCPUMB != 100 || g.MemoryPerNodeMB != 0 || g.TimeLimit != 0 || g.Requeue {
		t.Errorf("--gpus job: %+v", g)
	}
	if d := byName["done"]; d.State != "COMPLETED" || d.Nodes != "gpu-2" || d.BatchHost != "gpu-2" || d.GPUsPerNode() != 1 {
		t.Errorf("completed job: %+v", d)
	}
	if r := byName["running"]; r.State != "RUNNING" || r.StartTime.IsZero() || r.GRESPerNode[0].Type != "a10g" {
		t.Errorf("running job: %+v", r)
	}
}

func TestParseSinfoJSONSample(t *testing.T) {
	nodes, err := ParseSinfoJSON(readTestdata(t, "sinfo-22.05.json"))
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Node{}
	for _, n := range nodes {
		by[n.Name] = n
	}
	if len(by) != 3 {
		t.Fatalf("nodes %v, want big-1 gpu-1 gpu-2", nodes)
	}
	b := by["big-1"]
	if b.StateString() != "IDLE+CLOUD+DRAIN+POWERED_DOWN" || b.Reason != "capacity test" || b.Comment != "i-0abc" ||
		b.Extra != `{"instance_id":"i-0abc"}` || GPUs(b.GRES) != 8 || b.CPUs != 1 || b.RealMemoryMB != 1000 ||
		!reflect.DeepEqual(b.Features, []string{"p4d.24xlarge", "a100"}) || !reflect.DeepEqual(b.Partitions, []string{"cloud"}) {
		t.Errorf("big-1: %+v", b)
	}
	u := by["gpu-2"]
	if u.State != "ALLOCATED" || u.HasFlag("POWERED_DOWN") || !u.HasFlag("cloud") || !strings.HasPrefix(u.Addr, "10.") ||
		u.Hostname != "vm" || u.GRESUsed != "gpu:a10g:1(IDX:0)" || u.BootTime.IsZero() || u.SlurmdVersion != "22.05.8" ||
		!u.SlurmdStart.Equal(time.Unix(1795963484, 0)) || !b.SlurmdStart.IsZero() {
		t.Errorf("gpu-2: %+v", u)
	}
}

func TestParseSlurmJSONErrors(t *testing.T) {
	tests := []struct {
		name, in, wantErr string
		sinfo             bool
	}{
		{"not json", "squeue: error: foo", "not a JSON object", false},
		{"no jobs", `{"meta":{}}`, `no "jobs" array`, false},
		{"errors reported", `{"errors":[{"error":"Unable to query jobs","error_number":1}],"jobs":[]}`, "reported errors: Unable to query jobs", false},
		{"job_id missing", `{"jobs":[{"name":"x"}]}`, "jobs[0]: missing or invalid job_id", false},
		{"cpus wrong type", `{"jobs":[{"job_id":1,"cpus":"one"}]}`, `field "jobs.cpus": got JSON string`, false},
		{"negative count", `{"jobs":[{"job_id":1,"node_count":-3}]}`, "node_count -3 out of range", false},
		{"bad gres", `{"jobs":[{"job_id":4,"tres_per_node":"gres:gpu:a10g:x"}]}`, "job 4: tres_per_node: parsing GRES", false},
		{"no nodes", `{"meta":{}}`, `no "nodes" array`, true},
		{"node without name", `{"nodes":[{"state":"idle"}]}`, "nodes[0]: missing name", true},
		{"node bad gres", `{"nodes":[{"name":"n1","gres":"gpu:a:b:c"}]}`, "node n1: gres", true},
		{"flags wrong type", `{"nodes":[{"name":"n1","state_flags":"CLOUD"}]}`, `field "nodes.state_flags"`, true},
	}
	for _, tt := range tests {
		var err error
		if tt.sinfo {
			_, err = ParseSinfoJSON([]byte(tt.in))
		} else {
			_, err = ParseSqueueJSON([]byte(tt.in))
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: error %v, want it to contain %q", tt.name, err, tt.wantErr)
		}
	}
}

func FuzzParseSqueueJSON(f *testing.F) {
	f.Add(readTestdata(f, "squeue-22.05.json"))
	f.Add([]byte(`{"jobs":[{"job_id":1,"tres_per_node":"gres:gpu:2","cpus":1,"time_limit":null}]}`))
	f.Add([]byte(`{"jobs":[{"job_id":"1"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		jobs, err := ParseSqueueJSON(b)
		if err != nil {
			return
		}
		for _, j := range jobs {
			if j.ID == 0 {
				t.Fatalf("accepted job with id 0 from %q", b)
			}
		}
	})
}

func FuzzParseSinfoJSON(f *testing.F) {
	f.Add(readTestdata(f, "sinfo-22.05.json"))
	f.Add([]byte(`{"nodes":[{"name":"n1","gres":"gpu:2","state":"idle","state_flags":["CLOUD"]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		nodes, err := ParseSinfoJSON(b)
		if err != nil {
			return
		}
		for _, n := range nodes {
			if n.Name == "" {
				t.Fatalf("accepted node without name from %q", b)
			}
		}
	})
}
