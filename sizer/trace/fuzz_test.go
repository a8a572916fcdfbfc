package trace

import (
	"io"
	"strings"
	"testing"
)

// The fuzz targets check that parsers never panic, that a strict parse and
// a skip-bad parse agree on good input, that every returned job is valid,
// and that the simple CSV round-trips.

func checkJobs(t *testing.T, jobs []Job) {
	for i, j := range jobs {
		if j.GPUs < 1 || j.Duration < 0 {
			t.Fatalf("job %d invalid: %+v", i, j)
		}
		if i > 0 && j.Submit.Before(jobs[i-1].Submit) {
			t.Fatalf("job %d out of order", i)
		}
	}
}

func FuzzReadPhilly(f *testing.F) {
	f.Add("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,11cb48\n")
	f.Add("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,1e300,2,2e300,x\n\"a\nb\",1,1,1,1\n")
	f.Fuzz(func(t *testing.T, in string) {
		jobs, _, err := ReadPhilly(strings.NewReader(in), ReadOptions{})
		if err == nil {
			checkJobs(t, jobs)
		}
		skipped, rep, err2 := ReadPhilly(strings.NewReader(in), ReadOptions{SkipBad: true})
		if err2 == nil {
			checkJobs(t, skipped)
			if err == nil && (len(skipped) != len(jobs) || rep.Skipped != 0) {
				t.Fatalf("strict read %d jobs, skip-bad %d with %d skipped", len(jobs), len(skipped), rep.Skipped)
			}
		}
	})
}

func FuzzReadCSV(f *testing.F) {
	f.Add("submit,duration,gpus,gpu_model,metadata\n0,60,1,a100,\"burst: params=7B\"\n")
	f.Add("2026-01-01T00:00:00Z,1h,8\n1e9,0.5,2,h100\n")
	f.Fuzz(func(t *testing.T, in string) {
		jobs, _, err := ReadCSV(strings.NewReader(in), ReadOptions{})
		if err != nil {
			return
		}
		checkJobs(t, jobs)
		back := roundTrip(t, jobs)
		if len(back) != len(jobs) {
			t.Fatalf("round trip: %d jobs, want %d", len(back), len(jobs))
		}
		for i := range jobs {
			if !back[i].Submit.Equal(jobs[i].Submit) || back[i].GPUs != jobs[i].GPUs || back[i].GPUModel != jobs[i].GPUModel || back[i].Metadata != jobs[i].Metadata {
				t.Fatalf("round trip job %d: %+v, want %+v", i, back[i], jobs[i])
			}
			if d := back[i].Duration - jobs[i].Duration; d > 1000 || d < -1000 {
				t.Fatalf("round trip job %d duration %v, want %v", i, back[i].Duration, jobs[i].Duration)
			}
		}
	})
}

func FuzzParseSacct(f *testing.F) {
	f.Add(sacctOut)
	f.Add("JobID|Submit|Elapsed|ReqTRES\n7|2026-03-01T07:00:00|2-00:00:01|gres/gpu:h100=8\n")
	f.Fuzz(func(t *testing.T, in string) {
		jobs, _, err := ParseSacct(strings.NewReader(in), ReadOptions{})
		if err == nil {
			checkJobs(t, jobs)
		}
		_, _, _ = ParseSacct(strings.NewReader(in), ReadOptions{SkipBad: true})
	})
}

func FuzzParseSlurmDuration(f *testing.F) {
	for _, s := range []string{"01:02:03", "2-00:00:01", "05:30", "1-", "-1:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseSlurmDuration(s)
		if err == nil && d < 0 {
			t.Fatalf("ParseSlurmDuration(%q) = %v, negative", s, d)
		}
	})
}

func FuzzReadBamboo(f *testing.F) {
	f.Add("0,add,node1\n3600000,remove,node1\n")
	f.Fuzz(func(t *testing.T, in string) {
		evs, err := ReadBamboo(strings.NewReader(in))
		if err != nil {
			return
		}
		if r, err := RemovalRate(evs); err == nil && (r < 0 || r != r) {
			t.Fatalf("rate %v", r)
		}
	})
}

func FuzzReadOpenB(f *testing.F) {
	f.Add(openBSample)
	f.Add(openBHeader + "p,1,1,1.0,1000,,LS,Running,1e3,2e3,1.5e3\np,1,1,8,1000,,LS,Running,nan,1,\n")
	f.Fuzz(func(t *testing.T, in string) { fuzzAgree(t, in, ReadOpenB) })
}

func FuzzReadDLRM(f *testing.F) {
	f.Add(dlrmSample)
	f.Add(dlrmHeader + "i,HN,a,8,8,1.0,1,25,25,40,40,1,1,2,1e3,1e3,2e3\ni,CN,a,8,8,0,0,1,1,1,1,1,1,-1,,,\n")
	f.Fuzz(func(t *testing.T, in string) { fuzzAgree(t, in, ReadDLRM) })
}

// fuzzAgree: no panic, valid sorted jobs, and a strict read and a skip-bad
// read agree when the strict one succeeds.
func fuzzAgree(t *testing.T, in string, read func(io.Reader, ReadOptions) ([]Job, Report, error)) {
	jobs, _, err := read(strings.NewReader(in), ReadOptions{})
	if err == nil {
		checkJobs(t, jobs)
	}
	skipped, rep, err2 := read(strings.NewReader(in), ReadOptions{SkipBad: true})
	if err2 == nil {
		checkJobs(t, skipped)
		if err == nil && (len(skipped) != len(jobs) || rep.Skipped != 0) {
			t.Fatalf("strict read %d jobs, skip-bad %d with %d skipped", len(jobs), len(skipped), rep.Skipped)
		}
	}
}
