package trace

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/shareddatatest"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestReadPhilly(t *testing.T) {
	in := "timestamp,duration,num_gpus,gpu_time,cluster\n" +
		"2017-10-09 07:01:55,66.0,1,66.0,11cb48\n" +
		"2017-10-09 06:13:03,2951.0,8,23608.0,6214e9\n" +
		"\n"
	jobs, rep, err := ReadPhilly(strings.NewReader(in), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rows != 2 || rep.Jobs != 2 || len(jobs) != 2 {
		t.Fatalf("report %+v, %d jobs", rep, len(jobs))
	}
	// sorted by submit: the 06:13 row (line 3) first
	want := Job{ID: "3", Submit: utc("2017-10-09T06:13:03Z"), Duration: 2951 * time.Second, GPUs: 8, Metadata: "cluster=6214e9"}
	if jobs[0] != want {
		t.Errorf("first job %+v, want %+v", jobs[0], want)
	}
	if jobs[1].Duration != 66*time.Second || jobs[1].ID != "2" {
		t.Errorf("second job %+v", jobs[1])
	}
}

func TestReadPhillyErrors(t *testing.T) {
	h := "timestamp,duration,num_gpus,gpu_time,cluster\n"
	for _, c := range []struct{ name, in, want string }{
		{"empty", "", "empty input"},
		{"header", "time,duration,num_gpus,gpu_time,cluster\n", `header column 1 is "time"`},
		{"fields", h + "2017-10-09 07:01:55,66.0,1,66.0\n", "line 2: has 4 fields"},
		{"timestamp", h + "2017/10/09 07:01:55,66.0,1,66.0,a\n", `line 2: timestamp "2017/10/09 07:01:55"`},
		{"duration", h + "2017-10-09 07:01:55,abc,1,66.0,a\n", `line 2: duration "abc"`},
		{"negative", h + "2017-10-09 07:01:55,-5,1,-5,a\n", "line 2: duration \"-5\": is negative"},
		{"gpus", h + "2017-10-09 07:01:55,66,x,66,a\n", `line 2: num_gpus "x"`},
		{"zero gpus", h + "2017-10-09 07:01:55,66,0,0,a\n", "line 2: gpus is 0"},
		{"shifted", h + "2017-10-09 07:01:55,66,2,66,a\n", "line 2: gpu_time 66 is not duration x num_gpus"},
		{"third line", h + "2017-10-09 07:01:55,66,1,66,a\n2017-10-09 07:01:55,66,1,66,a,extra\n", "line 3: has 6 fields"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := ReadPhilly(strings.NewReader(c.in), ReadOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestReadPhillySkipBad(t *testing.T) {
	in := "timestamp,duration,num_gpus,gpu_time,cluster\n" +
		"2017-10-09 07:01:55,66.0,1,66.0,a\n" +
		"bad,row\n" +
		"2017-10-09 07:01:56,1,x,1,a\n" +
		"2017-10-09 07:01:57,1,1,1,a\n"
	jobs, rep, err := ReadPhilly(strings.NewReader(in), ReadOptions{SkipBad: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || rep.Skipped != 2 || rep.Rows != 4 || len(rep.Problems) != 2 || !strings.HasPrefix(rep.Problems[0], "line 3:") {
		t.Errorf("jobs %d, report %+v", len(jobs), rep)
	}
}

func TestReadCSV(t *testing.T) {
	in := "submit,duration,gpus,gpu_model,metadata\n" +
		"# a comment\n" +
		"3600,1h30m,8,A100,\"burst: params=7B, workload=train\"\n" +
		"0,60,1\n" +
		"2026-01-01T00:00:30Z,2.5,2,h100\n"
	jobs, rep, err := ReadCSV(strings.NewReader(in), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rows != 3 || len(jobs) != 3 {
		t.Fatalf("report %+v", rep)
	}
	want := []Job{
		{ID: "4", Submit: time.Unix(0, 0).UTC(), Duration: time.Minute, GPUs: 1},
		{ID: "3", Submit: time.Unix(3600, 0).UTC(), Duration: 90 * time.Minute, GPUs: 8, GPUModel: "a100", Metadata: "burst: params=7B, workload=train"},
		{ID: "5", Submit: utc("2026-01-01T00:00:30Z"), Duration: 2500 * time.Millisecond, GPUs: 2, GPUModel: "h100"},
	}
	for i := range want {
		if !jobs[i].Submit.Equal(want[i].Submit) {
			t.Errorf("job %d submit %v, want %v", i, jobs[i].Submit, want[i].Submit)
		}
		jobs[i].Submit = want[i].Submit
		if jobs[i] != want[i] {
			t.Errorf("job %d = %+v, want %+v", i, jobs[i], want[i])
		}
	}
	// no header
	jobs, _, err = ReadCSV(strings.NewReader("10,5,1\n"), ReadOptions{})
	if err != nil || len(jobs) != 1 || jobs[0].Duration != 5*time.Second {
		t.Errorf("headerless: %+v, %v", jobs, err)
	}
}

func TestReadCSVErrors(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"header order", "duration,submit,gpus\n", `line 1: header column 1 is "duration"`},
		{"fields", "0,1\n", "line 1: has 2 fields"},
		{"submit", "yesterday,1,1\n", `line 1: submit "yesterday"`},
		{"duration", "0,soon,1\n", `line 1: duration "soon"`},
		{"negative duration", "0,-1,1\n", "is negative"},
		{"negative go duration", "0,-1h,1\n", "is negative"},
		{"gpus", "0,1,one\n", `line 1: gpus "one"`},
		{"zero gpus", "0,1,0\n", "line 1: gpus is 0"},
		{"model", "0,1,1,gpu:a100\n", `line 1: gpu_model "gpu:a100"`},
		{"too many", "0,1,1,a100,m,extra\n", "line 1: has 6 fields"},
		{"quote", "0,1,1,a100,\"open\n", "line 1:"},
		{"line two", "submit,duration,gpus\n0,1,1\n0,x,1\n", "line 3:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := ReadCSV(strings.NewReader(c.in), ReadOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestCSVRoundTrip(t *testing.T) {
	jobs := []Job{
		{Submit: utc("2026-01-01T00:00:00Z"), Duration: 1500 * time.Millisecond, GPUs: 1},
		{Submit: utc("2026-01-01T01:00:00Z"), Duration: time.Hour, GPUs: 16, GPUModel: "h100", Metadata: "burst: params=70B, checkpoint=30m"},
	}
	back := roundTrip(t, jobs)
	for i := range jobs {
		back[i].ID = ""
		if !back[i].Submit.Equal(jobs[i].Submit) {
			t.Errorf("job %d submit %v, want %v", i, back[i].Submit, jobs[i].Submit)
		}
		back[i].Submit = jobs[i].Submit
		if back[i] != jobs[i] {
			t.Errorf("job %d = %+v, want %+v", i, back[i], jobs[i])
		}
	}
}

const sacctOut = `JobID|Submit|Start|End|Elapsed|AllocTRES|ReqTRES|Comment
101|2026-03-01T10:00:00|2026-03-01T10:02:00|2026-03-01T11:02:00|01:00:00|billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1|billing=8,cpu=8,gres/gpu=2,mem=64G,node=1|burst: params=7B
102|2026-03-01T09:00:00|2026-03-01T09:00:05|Unknown|00:10:00|billing=1,cpu=1,gres/gpu=1,node=1|cpu=1,gres/gpu=1|
103|2026-03-01T09:30:00|None|Unknown|00:00:00||cpu=1,gres/gpu=4,node=1|
104|2026-03-01T08:00:00|2026-03-01T08:00:00|2026-03-01T08:30:00|00:30:00|billing=4,cpu=4,mem=8G,node=1|cpu=4,mem=8G|
105|2026-03-01T07:00:00|2026-03-01T07:01:00|2026-03-02T09:01:00|1-02:00:00|cpu=16,gres/gpu=16,node=2|cpu=16,gres/gpu=16,node=2|
105.batch|2026-03-01T07:00:00|2026-03-01T07:01:00|2026-03-02T09:01:00|1-02:00:00|cpu=8,gres/gpu=8|cpu=8|
`

func TestParseSacct(t *testing.T) {
	jobs, rep, err := ParseSacct(strings.NewReader(sacctOut), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rows != 6 || rep.Jobs != 2 || rep.Ignored != 4 {
		t.Errorf("report %+v", rep)
	}
	want := []Job{
		{ID: "105", Submit: utc("2026-03-01T07:00:00Z"), Duration: 26 * time.Hour, GPUs: 16},
		{ID: "101", Submit: utc("2026-03-01T10:00:00Z"), Duration: time.Hour, GPUs: 2, GPUModel: "a100", Metadata: "burst: params=7B"},
	}
	if len(jobs) != len(want) {
		t.Fatalf("jobs %+v", jobs)
	}
	for i := range want {
		if jobs[i] != want[i] {
			t.Errorf("job %d = %+v, want %+v", i, jobs[i], want[i])
		}
	}
	// Elapsed only
	jobs, _, err = ParseSacct(strings.NewReader("JobID|Submit|Elapsed|ReqTRES\n7|2026-03-01T07:00:00|2-00:00:01|gres/gpu:h100=8\n"), ReadOptions{})
	if err != nil || len(jobs) != 1 || jobs[0].Duration != 48*time.Hour+time.Second || jobs[0].GPUModel != "h100" || jobs[0].GPUs != 8 {
		t.Errorf("elapsed-only: %+v, %v", jobs, err)
	}
	var b bytes.Buffer
	if _, err := ConvertSacct(strings.NewReader(sacctOut), &b, ReadOptions{}); err != nil {
		t.Fatal(err)
	}
	wantCSV := "submit,duration,gpus,gpu_model,metadata\n2026-03-01T07:00:00Z,93600,16,,\n2026-03-01T10:00:00Z,3600,2,a100,burst: params=7B\n"
	if b.String() != wantCSV {
		t.Errorf("converted:\n%s\nwant:\n%s", b.String(), wantCSV)
	}
}

func TestParseSacctErrors(t *testing.T) {
	h := "JobID|Submit|Start|End|AllocTRES\n"
	for _, c := range []struct{ name, in, want string }{
		{"empty", "", "empty input"},
		{"no submit", "JobID|Start|End|AllocTRES\n", "lacks submit"},
		{"no tres", "JobID|Submit|Elapsed\n", "lacks alloctres or reqtres"},
		{"dup", "JobID|JobID|Submit|Elapsed|ReqTRES\n", "twice"},
		{"fields", h + "1|2026-03-01T07:00:00|x\n", "line 2: has 3 fields"},
		{"submit", h + "1|yesterday|2026-03-01T07:00:00|2026-03-01T07:00:00|gres/gpu=1\n", `line 2: Submit "yesterday"`},
		{"unknown submit", h + "1|Unknown|2026-03-01T07:00:00|2026-03-01T07:00:00|gres/gpu=1\n", "line 2: Submit is"},
		{"end before start", h + "1|2026-03-01T07:00:00|2026-03-01T08:00:00|2026-03-01T07:00:00|gres/gpu=1\n", "line 2: End"},
		{"tres", h + "1|2026-03-01T07:00:00|2026-03-01T07:00:00|2026-03-01T08:00:00|gres/gpu=two\n", "line 2: AllocTRES"},
		{"tres kv", h + "1|2026-03-01T07:00:00|2026-03-01T07:00:00|2026-03-01T08:00:00|gpu\n", `entry "gpu" is not name=value`},
		{"elapsed", "JobID|Submit|Elapsed|ReqTRES\n1|2026-03-01T07:00:00|1:99:00|gres/gpu=1\n", `line 2: Elapsed "1:99:00"`},
		{"jobid", h + "|2026-03-01T07:00:00|2026-03-01T07:00:00|2026-03-01T08:00:00|gres/gpu=1\n", "line 2: JobID is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := ParseSacct(strings.NewReader(c.in), ReadOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestParseTRESGPUs(t *testing.T) {
	for _, c := range []struct {
		in    string
		gpus  int
		model string
	}{
		{"billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1", 2, "a100"},
		{"cpu=1,gres/gpu=3", 3, ""},
		{"gres/gpu:a100=2,gres/gpu:h100=2", 4, ""},
		{"gres/gpu:H100=8", 8, "h100"},
		{"cpu=4,mem=8G", 0, ""},
		{"", 0, ""},
	} {
		g, m, err := ParseTRESGPUs(c.in)
		if err != nil || g != c.gpus || m != c.model {
			t.Errorf("ParseTRESGPUs(%q) = %d, %q, %v; want %d, %q", c.in, g, m, err, c.gpus, c.model)
		}
	}
}

func TestParseSlurmDuration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"00:00:00", 0, true}, {"01:02:03", time.Hour + 2*time.Minute + 3*time.Second, true},
		{"2-00:00:01", 48*time.Hour + time.Second, true}, {"05:30", 5*time.Minute + 30*time.Second, true},
		{"100:00:00", 100 * time.Hour, true}, {"00:00:01.500", 1500 * time.Millisecond, true},
		{"", 0, false}, {"1", 0, false}, {"1:60:00", 0, false}, {"x-01:00:00", 0, false}, {"1:2:3:4", 0, false}, {"00:00:60", 0, false},
	} {
		got, err := ParseSlurmDuration(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseSlurmDuration(%q) = %v, %v; want %v ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestReadBamboo(t *testing.T) {
	// Two nodes for an hour, one removed at 1 h, the other at 2 h:
	// 2 removals over 3 node-hours.
	in := "0,add,node1\n0,add,node2\n3600000,remove,node1\n7200000,remove,node2\n"
	evs, err := ReadBamboo(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4 || !evs[2].Remove || evs[2].At != time.Hour || evs[2].Node != "node1" {
		t.Errorf("events %+v", evs)
	}
	r, err := RemovalRate(evs)
	if err != nil || r != 2.0/3 {
		t.Errorf("rate %v, %v; want 2/3", r, err)
	}
	for _, bad := range []string{"x,add,n\n", "0,added,n\n", "0,add\n", "10,add,a\n5,add,b\n"} {
		if _, err := ReadBamboo(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line ") {
			t.Errorf("ReadBamboo(%q) error %v, want a line number", bad, err)
		}
	}
	if _, err := RemovalRate(nil); err == nil {
		t.Error("RemovalRate of nothing: no error")
	}
}

func TestDetectAndReadAny(t *testing.T) {
	for _, c := range []struct{ in, format string }{
		{"timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,a\n", FormatPhilly},
		{sacctOut, FormatSacct},
		{"0,60,1\n", FormatCSV},
	} {
		if f := DetectFormat(strings.SplitN(c.in, "\n", 2)[0]); f != c.format {
			t.Errorf("DetectFormat = %s, want %s", f, c.format)
		}
		jobs, _, err := ReadAny(strings.NewReader(c.in), FormatAuto, ReadOptions{})
		if err != nil || len(jobs) == 0 {
			t.Errorf("ReadAny(%s): %d jobs, %v", c.format, len(jobs), err)
		}
	}
	if _, _, err := ReadAny(strings.NewReader(""), "xml", ReadOptions{}); err == nil {
		t.Error("unknown format: no error")
	}
	// a UTF-8 BOM (a spreadsheet's export) before the header is ignored
	philly := "\ufefftimestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,a\n"
	for _, f := range []string{FormatAuto, FormatPhilly} {
		if jobs, _, err := ReadAny(strings.NewReader(philly), f, ReadOptions{}); err != nil || len(jobs) != 1 {
			t.Errorf("BOM-prefixed Philly trace (%s): %d jobs, %v", f, len(jobs), err)
		}
	}
}

// TestRealData reads the shared data sets (internal/shareddatatest) and checks
// the figures their README states.
func TestRealData(t *testing.T) {
	f, err := os.Open(shareddatatest.Require(t, "traces/philly.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	jobs, rep, err := ReadPhilly(f, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	one := 0
	for i, j := range jobs {
		if j.GPUs == 1 {
			one++
		}
		if i > 0 && j.Submit.Before(jobs[i-1].Submit) {
			t.Fatalf("job %d not sorted", i)
		}
	}
	if rep.Jobs != 82247 || one != 76627 {
		t.Errorf("philly: %d jobs, %d one-GPU; README says 82,247 and 76,627", rep.Jobs, one)
	}
	for name, want := range map[string]float64{"p3": 0.61, "g4dn": 0.55} {
		b, err := os.Open(shareddatatest.Require(t, "spot/bamboo/"+name+"-trace.csv"))
		if err != nil {
			t.Fatal(err)
		}
		evs, err := ReadBamboo(b)
		b.Close()
		if err != nil {
			t.Fatal(err)
		}
		r, err := RemovalRate(evs)
		if err != nil || r < want-0.01 || r > want+0.01 {
			t.Errorf("bamboo %s: %.3f removals/node-h, README says %.2f (%v)", name, r, want, err)
		}
	}
}

// roundTrip writes jobs with WriteCSV and reads them back with ReadCSV.
func roundTrip(t *testing.T, jobs []Job) []Job {
	t.Helper()
	var b bytes.Buffer
	if err := WriteCSV(&b, jobs); err != nil {
		t.Fatal(err)
	}
	back, _, err := ReadCSV(&b, ReadOptions{})
	if err != nil {
		t.Fatalf("reading back %q: %v", b.String(), err)
	}
	return back
}
