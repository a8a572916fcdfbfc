package slurm

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseResumeFile(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want ResumeFile
	}{
		{"22.05 two jobs (observed)",
			`{"jobs":[{"job_id":2,"nodes":"gpu-[1-2]"},{"job_id":3,"nodes":"gpu-3"}],"all_nodes":"gpu-[1-3]"}`,
			ResumeFile{AllNodes: "gpu-[1-3]", Jobs: []ResumeJob{
				{JobID: 2, Nodes: "gpu-[1-2]", NodesAlloc: "gpu-[1-2]"},
				{JobID: 3, Nodes: "gpu-3", NodesAlloc: "gpu-3"}}}},
		{"22.05 manual power up (observed)", `{"jobs":[],"all_nodes":"gpu-2"}`, ResumeFile{AllNodes: "gpu-2"}},
		{"23.02 superset", `{
			"all_nodes_resume" : "cloud[1-3,7-8]",
			"jobs" : [
			  {"extra" : "An arbitrary string from --extra", "features" : "c1,c2", "job_id" : 140814,
			   "nodes_alloc" : "cloud[1-4]", "nodes_resume" : "cloud[1-3]", "oversubscribe" : "OK",
			   "partition" : "cloud", "reservation" : "resv_1234"},
			  {"job_id" : 140815, "nodes_alloc" : "cloud[1-2]", "nodes_resume" : "cloud[1-2]", "oversubscribe" : "OK",
			   "partition" : "cloud", "reservation" : "", "future_field": {"x": [1,2]}}
			]}`,
			ResumeFile{AllNodes: "cloud[1-3,7-8]", Jobs: []ResumeJob{
				{JobID: 140814, Nodes: "cloud[1-3]", NodesAlloc: "cloud[1-4]", Features: "c1,c2", Partition: "cloud",
					Reservation: "resv_1234", Extra: "An arbitrary string from --extra", Oversubscribe: "OK"},
				{JobID: 140815, Nodes: "cloud[1-2]", NodesAlloc: "cloud[1-2]", Partition: "cloud", Oversubscribe: "OK"}}}},
		{"unknown top-level fields tolerated", `{"jobs":[],"all_nodes":"a1","discovered":[1]}` + "\n", ResumeFile{AllNodes: "a1"}},
	}
	for _, tt := range tests {
		got, err := ParseResumeFile([]byte(tt.in))
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

func TestParseResumeFileErrors(t *testing.T) {
	tests := []struct{ name, in, wantErr string }{
		{"empty", ``, "not a JSON object"},
		{"array", `[]`, "not a JSON object"},
		{"null", `null`, "not a JSON object"},
		{"truncated", `{"jobs":[{"job_id":2,"nodes":"gpu-1"}`, "unexpected EOF"},
		{"trailing data", `{"jobs":[],"all_nodes":"a"} {}`, "data after the JSON object"},
		{"missing job_id", `{"jobs":[{"nodes":"gpu-1"}],"all_nodes":"gpu-1"}`, "jobs[0]: missing job_id"},
		{"job_id string", `{"jobs":[{"job_id":"2","nodes":"gpu-1"}],"all_nodes":"gpu-1"}`, `field "jobs.job_id": got JSON string`},
		{"job_id negative", `{"jobs":[{"job_id":-2,"nodes":"gpu-1"}],"all_nodes":"gpu-1"}`, `field "jobs.job_id"`},
		{"job_id float", `{"jobs":[{"job_id":2.5,"nodes":"gpu-1"}],"all_nodes":"gpu-1"}`, `field "jobs.job_id"`},
		{"job_id zero", `{"jobs":[{"job_id":0,"nodes":"gpu-1"}],"all_nodes":"gpu-1"}`, "out of range"},
		{"job_id huge", `{"jobs":[{"job_id":4294967296,"nodes":"gpu-1"}],"all_nodes":"gpu-1"}`, "out of range"},
		{"jobs object", `{"jobs":{},"all_nodes":"gpu-1"}`, `field "jobs": got JSON object`},
		{"jobs missing", `{"all_nodes":"gpu-1"}`, `missing "jobs" array`},
		{"all_nodes missing", `{"jobs":[]}`, "missing or empty all_nodes"},
		{"all_nodes number", `{"jobs":[],"all_nodes":5}`, `field "all_nodes": got JSON number`},
		{"job without nodes", `{"jobs":[{"job_id":2}],"all_nodes":"gpu-1"}`, "jobs[0] (job 2): missing nodes"},
		{"duplicate job", `{"jobs":[{"job_id":2,"nodes":"a"},{"job_id":2,"nodes":"b"}],"all_nodes":"a,b"}`, "job listed twice"},
		{"hostlist with newline", `{"jobs":[],"all_nodes":"gpu-1\nrm -rf"}`, "space or control character"},
		{"hostlist with space", `{"jobs":[{"job_id":2,"nodes":"gpu-1 gpu-2"}],"all_nodes":"gpu-1"}`, "space or control character"},
		{"invalid utf8", "{\"jobs\":[],\"all_nodes\":\"\xff\"}", "not valid UTF-8"},
		{"huge hostlist", `{"jobs":[],"all_nodes":"` + strings.Repeat("a", maxHostlistLen+1) + `"}`, "more than"},
		{"over size cap", `{"jobs":[],"all_nodes":"a","pad":"` + strings.Repeat("x", MaxResumeFileSize) + `"}`, "more than the"},
	}
	for _, tt := range tests {
		_, err := ParseResumeFile([]byte(tt.in))
		if err == nil {
			t.Errorf("%s: no error, want %q", tt.name, tt.wantErr)
			continue
		}
		if !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: error %q, want it to contain %q", tt.name, err, tt.wantErr)
		}
		if !strings.HasPrefix(err.Error(), "parsing resume file") {
			t.Errorf("%s: error %q lacks context", tt.name, err)
		}
	}
}

func TestReadResumeFile(t *testing.T) {
	if _, _, err := ReadResumeFile(""); err == nil || !strings.Contains(err.Error(), "SLURM_RESUME_FILE is not set") {
		t.Errorf("ReadResumeFile(\"\") = %v", err)
	}
	p := filepath.Join(t.TempDir(), "resume")
	if err := os.WriteFile(p, []byte(`{"jobs":[{"job_id":7,"nodes":"gpu-1"}],"all_nodes":"gpu-1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	rf, raw, err := ReadResumeFile(p)
	if err != nil || len(rf.Jobs) != 1 || rf.Jobs[0].JobID != 7 || !strings.Contains(string(raw), `"job_id":7`) {
		t.Errorf("ReadResumeFile = %+v, %q, %v", rf, raw, err)
	}
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, []byte(strings.Repeat(" ", MaxResumeFileSize+10)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, raw, err := ReadResumeFile(big); err == nil || !strings.Contains(err.Error(), "more than the") || !strings.Contains(err.Error(), big) || len(raw) != MaxResumeFileSize+1 {
		t.Errorf("ReadResumeFile(big) = %d bytes, %v; want the bounded read and a size error naming the file", len(raw), err)
	}
}

func FuzzParseResumeFile(f *testing.F) {
	seedFixtures(f, "resume-*.json")
	for _, s := range []string{
		`{"jobs":[{"job_id":2,"nodes":"gpu-[1-2]"},{"job_id":3,"nodes":"gpu-3"}],"all_nodes":"gpu-[1-3]"}`,
		`{"jobs":[],"all_nodes":"gpu-2"}`,
		`{"all_nodes_resume":"c[1-3]","jobs":[{"job_id":1,"nodes_alloc":"c[1-4]","nodes_resume":"c[1-3]","features":"a","extra":"x"}]}`,
		`{"jobs":[{"job_id":"2"}]}`, `[]`, `{`, `{"jobs":null,"all_nodes":"a"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rf, err := ParseResumeFile(b)
		if err != nil {
			return
		}
		if rf.AllNodes == "" {
			t.Fatalf("accepted %q with empty AllNodes", b)
		}
		seen := map[uint32]bool{}
		for _, j := range rf.Jobs {
			if j.JobID == 0 || j.Nodes == "" || j.NodesAlloc == "" || seen[j.JobID] {
				t.Fatalf("accepted %q with invalid job %+v", b, j)
			}
			seen[j.JobID] = true
			if strings.ContainsAny(j.Nodes+j.NodesAlloc+rf.AllNodes, " \n\t\x00") {
				t.Fatalf("accepted control characters in hostlists: %q", b)
			}
		}
	})
}
