package slurm

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNum(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantErr string
	}{
		{`{"x":10}`, 10, ""},
		{`{"x":null}`, 0, ""},
		{`{}`, 0, ""},
		{`{"x":{"set":true,"infinite":false,"number":10}}`, 10, ""},
		{`{"x":{"set":false,"infinite":false,"number":10}}`, 0, ""},
		{`{"x":{"set":true,"infinite":true,"number":0}}`, 0, ""},
		{`{"x":{"set":false,"infinite":true,"number":0}}`, 0, ""},
		{`{"x":{"number":7}}`, 7, ""},
		{`{"x":{"set":true,"infinite":false,"number":4294967295}}`, 4294967295, ""},
		{`{"x":{"set":true,"infinite":false,"number":4294967296}}`, 0, "out of range"},
		{`{"x":-1}`, 0, "negative"},
		{`{"x":1.5}`, 0, "not a whole number"},
		{`{"x":"10"}`, 0, `field "x": got JSON string, want a number, null or {"set"`},
		{`{"x":[10]}`, 0, `got JSON array`},
		{`{"x":true}`, 0, `got JSON bool`},
		{`{"x":{"set":true,"number":"10"}}`, 0, `object whose number is not a number`},
		{`{"x":{"set":"yes","number":1}}`, 0, `malformed set/infinite/number`},
	}
	for _, tt := range tests {
		var v struct {
			X num `json:"x"`
		}
		err := decodeDoc("test", []byte(tt.in), &v)
		var got uint64
		if err == nil {
			c := conv{where: "test"}
			got = uint64(c.u32("x", v.X))
			err = c.err
		}
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.in, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: error %v, want %q", tt.in, err, tt.wantErr)
		case got != tt.want:
			t.Errorf("%s = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestJobState(t *testing.T) {
	tests := []struct {
		in        strList
		state     string
		flags     []string
		wantError bool
	}{
		{strList{"PENDING"}, "PENDING", nil, false},
		{strList{"CONFIGURING"}, "CONFIGURING", nil, false}, // 22.05's string
		{strList{"RUNNING", "CONFIGURING", "POWER_UP_NODE"}, "CONFIGURING", []string{"CONFIGURING", "POWER_UP_NODE"}, false},
		{strList{"RUNNING", "COMPLETING", "CONFIGURING"}, "COMPLETING", []string{"COMPLETING", "CONFIGURING"}, false},
		{strList{"PENDING", "REQUEUED"}, "REQUEUED", []string{"REQUEUED"}, false},
		{strList{"RUNNING", "POWER_UP_NODE"}, "RUNNING", []string{"POWER_UP_NODE"}, false},
		{strList{"COMPLETED", "STAGE_OUT"}, "STAGE_OUT", []string{"STAGE_OUT"}, false},
		{strList{"POWER_UP_NODE", "CONFIGURING"}, "", nil, true},
		{nil, "", nil, true},
	}
	for _, tt := range tests {
		st, fl, err := jobState(tt.in)
		if (err != nil) != tt.wantError || st != tt.state || strings.Join(fl, ",") != strings.Join(tt.flags, ",") {
			t.Errorf("jobState(%q) = %q %q %v", tt.in, st, fl, err)
		}
	}
}

func TestParseJobsJSONErrors(t *testing.T) {
	meta := `"meta":{"plugin":{"data_parser":"data_parser/v0.0.42"},"slurm":{"version":{"major":"24"},"release":"24.11.5"}}`
	tests := []struct{ name, in, wantErr string }{
		{"not json", "squeue: error: foo", "not a JSON object"},
		{"no jobs", `{` + meta + `}`, `(Slurm 24.11.5, data_parser/v0.0.42): no "jobs" array`},
		{"errors reported", `{"errors":[{"error":"Unable to query jobs","error_number":1}],"jobs":[]}`, "reported errors: Unable to query jobs"},
		{"job_id missing", `{"jobs":[{"name":"x"}]}`, "jobs[0]: job_id: missing or 0"},
		{"cpus wrong type", `{"jobs":[{"job_id":1,"cpus":"one"}]}`, `field "jobs.cpus": got JSON string, want a number`},
		{"cpus bad object", `{"jobs":[{"job_id":1,"cpus":{"set":true,"number":"x"}}]}`, `field "jobs.cpus": got JSON object whose number`},
		{"negative count", `{` + meta + `,"jobs":[{"job_id":1,"job_state":["PENDING"],"node_count":-3}]}`, "(Slurm 24.11.5, data_parser/v0.0.42): job 1: node_count: -3 is negative"},
		{"state number", `{"jobs":[{"job_id":1,"job_state":3}]}`, `field "jobs.job_state": got JSON number or object, want a string or an array of strings`},
		{"state empty", `{"jobs":[{"job_id":1,"job_state":[]}]}`, `job 1: job_state: empty`},
		{"state without base", `{"jobs":[{"job_id":1,"job_state":["CONFIGURING","POWER_UP_NODE"]}]}`, `job_state: ["CONFIGURING" "POWER_UP_NODE"] has no base state`},
		{"bad gres", `{"jobs":[{"job_id":4,"job_state":"PENDING","tres_per_node":"gres:gpu:a10g:x"}]}`, "job 4: tres_per_node: parsing GRES"},
		{"22.05 meta", `{"meta":{"plugin":{"type":"openapi/v0.0.38"},"Slurm":{"version":{"major":22},"release":"22.05.8"}},"jobs":[{"job_id":1}]}`, "(Slurm 22.05.8, openapi/v0.0.38): job 1: job_state: empty"},
	}
	for _, tt := range tests {
		_, err := ParseJobsJSON([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: error %v, want it to contain %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestParseNodesJSONErrors(t *testing.T) {
	tests := []struct{ name, in, wantErr string }{
		{"no nodes", `{"meta":{}}`, `no "nodes" array`},
		{"23.02+ sinfo", `{"sinfo":[{"node":{"state":["IDLE"]}}],"meta":{"slurm":{"release":"24.11.5"}}}`, "sinfo --json of Slurm 23.02 or later"},
		{"node without name", `{"nodes":[{"state":"idle"}]}`, "nodes[0]: missing name"},
		{"node bad gres", `{"nodes":[{"name":"n1","state":"idle","gres":"gpu:a:b:c"}]}`, "node n1: gres"},
		{"flags wrong type", `{"nodes":[{"name":"n1","state_flags":{"a":1}}]}`, `field "nodes.state_flags"`},
		{"no base state", `{"nodes":[{"name":"n1","state":["CLOUD","POWERED_DOWN"]}]}`, `node n1: state: ["CLOUD" "POWERED_DOWN"] has no base state`},
		{"boot_time string", `{"nodes":[{"name":"n1","state":["IDLE"],"boot_time":"yesterday"}]}`, `field "nodes.boot_time": got JSON string`},
		{"cpus huge", `{"nodes":[{"name":"n1","state":["IDLE"],"cpus":{"set":true,"number":99999999999}}]}`, `node n1: cpus: 99999999999 is out of range`},
	}
	for _, tt := range tests {
		_, err := ParseNodesJSON([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: error %v, want it to contain %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestParseNodesJSONShapes(t *testing.T) {
	// 22.05: base state lower case plus state_flags, features a string
	old := `{"nodes":[{"name":"n1","state":"idle","state_flags":["CLOUD","POWERED_DOWN"],"features":"a,b","boot_time":0}]}`
	// 23.02+: one state array, features an array, numbers as objects
	now := `{"nodes":[{"name":"n1","state":["IDLE","CLOUD","POWERED_DOWN"],"features":["a","b"],"boot_time":{"set":true,"infinite":false,"number":0}}]}`
	for _, in := range []string{old, now} {
		ns, err := ParseNodesJSON([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if n := ns[0]; n.StateString() != "IDLE+CLOUD+POWERED_DOWN" || strings.Join(n.Features, ",") != "a,b" || !n.BootTime.IsZero() {
			t.Errorf("%s: %+v", in, n)
		}
	}
}

func TestParseScontrolNodes(t *testing.T) {
	line := "NodeName=gpu-7 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUTot=4 AvailableFeatures=(null) ActiveFeatures=(null) " +
		"Gres=gpu:a10g:1(S:0) NodeAddr=10.0.0.7 NodeHostName=ip-10-0-0-7 Version=22.05.8 OS=Linux 6.1 #1 SMP x=y  RealMemory=15000 " +
		"State=DOWN+CLOUD+DRAIN Partitions=a,b  BootTime=None Reason=burst: spot notice i=1 [root@2026-01-02T03:04:05] " +
		"Comment=burst 2026: requeued jobs [5] Extra={\"instance_id\":\"i-1\"}"
	ns, err := ParseScontrolNodes([]byte("Node nope not found\n" + line + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 1 {
		t.Fatalf("%d nodes", len(ns))
	}
	n := ns[0]
	if n.Name != "gpu-7" || n.StateString() != "DOWN+CLOUD+DRAIN" || n.Addr != "10.0.0.7" || n.Hostname != "ip-10-0-0-7" ||
		n.Features != nil || n.CPUs != 4 || n.RealMemoryMB != 15000 || GPUs(n.GRES) != 1 || n.GRES[0].Detail != "S:0" ||
		n.Reason != "burst: spot notice i=1" || n.Comment != "burst 2026: requeued jobs [5]" || n.Extra != `{"instance_id":"i-1"}` ||
		strings.Join(n.Partitions, ",") != "a,b" || !n.BootTime.IsZero() || n.SlurmdVersion != "22.05.8" {
		t.Errorf("parsed %+v", n)
	}
	for _, bad := range []struct{ in, wantErr string }{
		{"squeue: error: x\n", "is not a node record"},
		{"NodeName=a State=\n", "no State"},
		{"NodeName=a State=CLOUD+DRAIN\n", "has no base state"},
		{"NodeName=a State=IDLE CPUTot=x\n", "CPUTot"},
		{"NodeName=a State=IDLE BootTime=yesterday\n", "BootTime"},
		{"NodeName=a State=IDLE Gres=gpu:a:b:c\n", "Gres"},
		{"NodeName= State=IDLE\n", "NodeName"},
	} {
		if _, err := ParseScontrolNodes([]byte(bad.in)); err == nil || !strings.Contains(err.Error(), bad.wantErr) {
			t.Errorf("%q: error %v, want %q", bad.in, err, bad.wantErr)
		}
	}
}

func TestParseJobStates(t *testing.T) {
	in := "12|PENDING|2||ReqNodeNotAvail, UnavailableNodes:gpu-[1-2]\n13|RUNNING|1|gpu-3|None\n"
	js, err := ParseJobStates([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []JobState{{ID: 12, State: "PENDING", NodeCount: 2, Reason: "ReqNodeNotAvail, UnavailableNodes:gpu-[1-2]"},
		{ID: 13, State: "RUNNING", NodeCount: 1, Nodes: "gpu-3", Reason: "None"}}
	if len(js) != 2 || js[0] != want[0] || js[1] != want[1] {
		t.Errorf("got %+v", js)
	}
	for _, bad := range []struct{ in, wantErr string }{
		{"12|PENDING|1|\n", "want 5 fields"},
		{"x|PENDING|1||None\n", "job id"},
		{"0|PENDING|1||None\n", "job id"},
		{"1|pending now|1||None\n", "not a state name"},
		{"1|PENDING|one||None\n", "node count"},
		{"1|RUNNING|1|a b|None\n", "space in nodes"},
	} {
		if _, err := ParseJobStates([]byte(bad.in)); err == nil || !strings.Contains(err.Error(), bad.wantErr) {
			t.Errorf("%q: error %v, want %q", bad.in, err, bad.wantErr)
		}
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]Version{
		"slurm 24.11.5\n":     {24, 11, 5},
		"slurm-wlm 22.05.8\n": {22, 5, 8},
		"26.05.5":             {26, 5, 5},
		"slurm 25.05.0-0rc1":  {25, 5, 0},
		"slurm 23.02":         {23, 2, 0},
	} {
		if got, err := ParseVersion(in); err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "slurm", "slurm 24", "slurm 24.x.1", "slurm 1.2.3.4"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) accepted", bad)
		}
	}
}

func TestDialectFor(t *testing.T) {
	tests := []struct {
		v                   Version
		json                string
		nodeJSON, jobFilter bool
	}{
		{Version{22, 5, 8}, "--json", false, false},
		{Version{23, 2, 7}, "--json=v0.0.39", true, true},
		{Version{23, 11, 4}, "--json=v0.0.40", true, true},
		{Version{24, 5, 8}, "--json=v0.0.41", true, true},
		{Version{24, 11, 5}, "--json=v0.0.42", true, true},
		{Version{25, 11, 2}, "--json=v0.0.42", true, true},
		{Version{26, 5, 5}, "--json=v0.0.42", true, true},
		{Version{27, 5, 0}, "--json=v0.0.42", true, true},
	}
	for _, tt := range tests {
		d, err := dialectFor(tt.v)
		if err != nil || d.jsonFlag() != tt.json || d.nodeJSON != tt.nodeJSON || d.jobFilter != tt.jobFilter {
			t.Errorf("dialectFor(%v) = %+v %s, %v", tt.v, d, d.jsonFlag(), err)
		}
	}
	_, err := dialectFor(Version{21, 8, 8})
	var ve *VersionError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "Slurm 21.08.8") || !strings.Contains(err.Error(), "older than 22.05") {
		t.Errorf("21.08: %v", err)
	}
}

func TestMinutes(t *testing.T) {
	c := conv{where: "x"}
	if d := c.minutes("t", num{set: true, n: "4294967295"}); d != 0 {
		t.Errorf("22.05 INFINITE = %v", d)
	}
	if d := c.minutes("t", num{set: true, n: "90"}); d != 90*time.Minute || c.err != nil {
		t.Errorf("90 = %v %v", d, c.err)
	}
}
