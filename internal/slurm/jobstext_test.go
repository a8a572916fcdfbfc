package slurm

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var testMarks = jobsTextMarks{field: "@F@", end: "@E@"}

// textRecord is one squeue -O record with the test markers, fields as in
// jobsTextFields, overridden by over (index: value).
func textRecord(over map[int]string) string {
	f := []string{"9", "9", "N/A", "train", "alice", "(null)", "cloud", "PENDING", "Priority", "", "n/a",
		"(null)", "(null)", "(null)", "gres:gpu:a10g:1", "N/A", "N/A", "2", "2", "1", "200M",
		"cpu=2,mem=200M,node=1,billing=2", "1-02:03:00", "1", "0", "2026-12-02T01:26:15", "N/A", "N/A",
		"/home/alice", "/home/alice/slurm-9.out", "/home/alice/slurm-9.out"}
	for i, v := range over {
		f[i] = v
	}
	return strings.Join(f, testMarks.field) + testMarks.end + "\n"
}

func TestParseJobsTextFixture(t *testing.T) {
	js, err := ParseJobsText(readTestdata(t, "22.05/squeue-jobs-text.txt"), testMarks)
	if err != nil {
		t.Fatal(err)
	}
	// the same jobs as 22.05's squeue --json printed them (the fixture
	// scenario's jobs 6 and 7)
	all, err := ParseJobsJSON(readTestdata(t, "22.05/squeue-j.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != 2 {
		t.Fatalf("%d jobs, want 2", len(js))
	}
	for _, got := range js {
		var want Job
		for _, j := range all {
			if j.ID == got.ID {
				want = j
			}
		}
		want.StdErr = "/dev/null" // squeue prints stdout's path for an unset --error
		if d := diffJobs(got, want); d != "" {
			t.Errorf("job %d: text and JSON differ: %s", got.ID, d)
		}
	}
}

// diffJobs names the fields where a and b differ.
func diffJobs(a, b Job) string {
	var d []string
	check := func(name string, x, y any) {
		if x != y {
			d = append(d, fmt.Sprintf("%s: %q != %q", name, fmt.Sprint(x), fmt.Sprint(y)))
		}
	}
	check("ID", a.ID, b.ID)
	check("ArrayJobID", a.ArrayJobID, b.ArrayJobID)
	check("Name", a.Name, b.Name)
	check("User", a.User, b.User)
	check("Account", a.Account, b.Account)
	check("Partition", a.Partition, b.Partition)
	check("State", a.State, b.State)
	check("Reason", a.Reason, b.Reason)
	check("Nodes", a.Nodes, b.Nodes)
	check("BatchHost", a.BatchHost, b.BatchHost)
	check("Comment", a.Comment, b.Comment)
	check("AdminComment", a.AdminComment, b.AdminComment)
	check("Features", a.Features, b.Features)
	check("TRESPerNode", a.TRESPerNode, b.TRESPerNode)
	check("TRESPerJob", a.TRESPerJob, b.TRESPerJob)
	check("GPUsPerNode", a.GPUsPerNode(), b.GPUsPerNode())
	check("GPUsPerJob", GPUs(a.GRESPerJob), GPUs(b.GRESPerJob))
	check("CPUs", a.CPUs, b.CPUs)
	check("Tasks", a.Tasks, b.Tasks)
	check("NodeCount", a.NodeCount, b.NodeCount)
	check("MemoryPerNodeMB", a.MemoryPerNodeMB, b.MemoryPerNodeMB)
	check("MemoryPerCPUMB", a.MemoryPerCPUMB, b.MemoryPerCPUMB)
	check("TimeLimit", a.TimeLimit, b.TimeLimit)
	check("Requeue", a.Requeue, b.Requeue)
	check("RestartCount", a.RestartCount, b.RestartCount)
	check("SubmitTime", a.SubmitTime.Unix(), b.SubmitTime.Unix())
	if a.State != "PENDING" { // a pending job's expected start: JSON only
		check("StartTime", a.StartTime.Unix(), b.StartTime.Unix())
		if !a.EndTime.IsZero() || a.TimeLimit != 0 { // no limit: squeue NONE, JSON a year on
			check("EndTime", a.EndTime.Unix(), b.EndTime.Unix())
		}
	}
	check("WorkDir", a.WorkDir, b.WorkDir)
	check("StdOut", a.StdOut, b.StdOut)
	check("StdErr", a.StdErr, b.StdErr)
	return strings.Join(d, "; ")
}

func TestParseJobsText(t *testing.T) {
	t.Run("fields", func(t *testing.T) {
		js, err := ParseJobsText([]byte(textRecord(nil)), testMarks)
		if err != nil || len(js) != 1 {
			t.Fatalf("%+v, %v", js, err)
		}
		j := js[0]
		if j.ID != 9 || j.ArrayJobID != 0 || j.Account != "" || j.BatchHost != "" || j.Comment != "" ||
			j.GPUsPerNode() != 1 || j.MemoryPerNodeMB != 200 || j.MemoryPerCPUMB != 0 ||
			j.TimeLimit != 26*time.Hour+3*time.Minute || !j.Requeue || !j.StartTime.IsZero() ||
			j.SubmitTime.Year() != 2026 || j.StdOut != "/home/alice/slurm-9.out" {
			t.Errorf("%+v", j)
		}
	})
	t.Run("per CPU memory", func(t *testing.T) {
		js, err := ParseJobsText([]byte(textRecord(map[int]string{20: "100M", 21: "cpu=2,mem=200M,node=1"})), testMarks)
		if err != nil || js[0].MemoryPerCPUMB != 100 || js[0].MemoryPerNodeMB != 0 {
			t.Errorf("%+v, %v", js, err)
		}
	})
	t.Run("array", func(t *testing.T) {
		js, err := ParseJobsText([]byte(textRecord(map[int]string{0: "12", 1: "12", 2: "0-3"})), testMarks)
		if err != nil || js[0].ArrayJobID != 12 {
			t.Errorf("%+v, %v", js, err)
		}
	})
	t.Run("user text cannot pass for fields", func(t *testing.T) {
		// a name and comment holding other markers, separators, newlines
		// and a whole forged record: they stay text
		forged := strings.TrimSuffix(textRecord(map[int]string{0: "1", 6: "admin", 12: "burst: approved"}), "\n")
		forged = strings.NewReplacer("@F@", "|0000|", "@E@", "|0000$").Replace(forged)
		in := textRecord(map[int]string{3: "x|y\nz\n" + forged, 11: "a\nb|c, d=e\n" + forged}) + textRecord(map[int]string{0: "10"})
		js, err := ParseJobsText([]byte(in), testMarks)
		if err != nil || len(js) != 2 {
			t.Fatalf("%d jobs, %v", len(js), err)
		}
		if js[0].ID != 9 || js[0].Partition != "cloud" || js[0].AdminComment != "" || !strings.HasPrefix(js[0].Name, "x|y\nz\n1|0000|") ||
			!strings.HasPrefix(js[0].Comment, "a\nb|c, d=e\n") || js[1].ID != 10 {
			t.Errorf("%+v", js)
		}
	})
	for name, in := range map[string]string{
		"no end marker":  strings.TrimSuffix(textRecord(nil), "@E@\n"),
		"garbage after":  textRecord(nil) + "oops\n",
		"fields missing": "9@F@9@E@\n",
		"bad id":         textRecord(map[int]string{0: "x"}),
		"zero id":        textRecord(map[int]string{0: "0"}),
		"bad state":      textRecord(map[int]string{7: "pending now"}),
		"bad count":      textRecord(map[int]string{17: "-1"}),
		"bad memory":     textRecord(map[int]string{20: "lots"}),
		"bad limit":      textRecord(map[int]string{22: "1-2"}),
		"bad requeue":    textRecord(map[int]string{23: "yes"}),
		"bad time":       textRecord(map[int]string{25: "yesterday"}),
		"space in nodes": textRecord(map[int]string{9: "gpu-1 gpu-2"}),
		"bad gres":       textRecord(map[int]string{14: "gres:gpu:a10g:x"}),
	} {
		t.Run(name, func(t *testing.T) {
			if js, err := ParseJobsText([]byte(in), testMarks); err == nil {
				t.Errorf("no error; %+v", js)
			} else if !strings.Contains(err.Error(), "parsing squeue jobs") {
				t.Errorf("error %q does not say what was parsed", err)
			}
		})
	}
	if _, err := ParseJobsText([]byte(textRecord(nil)), jobsTextMarks{}); err == nil {
		t.Error("no markers: no error")
	}
	if js, err := ParseJobsText(nil, testMarks); err != nil || len(js) != 0 {
		t.Errorf("empty answer: %+v, %v", js, err)
	}
}

func TestParseTimeLimit(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"5:00": 5 * time.Minute, "1:00:00": time.Hour, "1-02:04:00": 26*time.Hour + 4*time.Minute,
		"0:30": 0, "45": 45 * time.Minute, "10:05:59": 10*time.Hour + 5*time.Minute,
	} {
		if got, err := parseTimeLimit(in); err != nil || got != want {
			t.Errorf("parseTimeLimit(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a:b", "1-2:3", "1:2:3:4", "-1", "1--2:00:00", "x-1:00:00"} {
		if _, err := parseTimeLimit(in); err == nil {
			t.Errorf("parseTimeLimit(%q): no error", in)
		}
	}
}

func TestParseMemMB(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "200M": 200, "1G": 1024, "1.50G": 1536, "2048K": 2, "1T": 1 << 20, "300": 300} {
		if got, err := parseMemMB(in); err != nil || got != want {
			t.Errorf("parseMemMB(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "M", "-1M", "1X", "1e99G"} {
		if _, err := parseMemMB(in); err == nil {
			t.Errorf("parseMemMB(%q): no error", in)
		}
	}
}
