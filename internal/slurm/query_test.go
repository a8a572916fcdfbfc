package slurm

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeTools is a directory of stand-ins for scontrol, squeue and sinfo that
// record their arguments and print what the test put in place: a fake of
// the command-line seam, to check which commands Scontrol runs per release.
// The answers are the real daemons' fixtures.
type fakeTools struct {
	t   *testing.T
	dir string
}

const fakeTool = `#!/bin/sh
n=$(basename "$0")
echo "$n $*" >> "$FAKE_SLURM/calls"
if [ "$n $1" = "scontrol --version" ]; then cat "$FAKE_SLURM/version"; exit 0; fi
o=""; for a in "$@"; do [ "$o" = "-O" ] && o="$a" && break; o="$a"; done
nonce=${o#JobID:0|}; nonce=${nonce%%|*}
# squeue -O with markers (22.05's jobs by ID): @F@ and @E@ become them
sed "s#@F@#|$nonce|#g; s#@E@#|$nonce\$#g" "$FAKE_SLURM/$n.out" 2>/dev/null
[ -f "$FAKE_SLURM/$n.err" ] && cat "$FAKE_SLURM/$n.err" >&2
exit $(cat "$FAKE_SLURM/$n.rc" 2>/dev/null || echo 0)
`

func newFakeTools(t *testing.T, version string) *fakeTools {
	dir := t.TempDir()
	for _, n := range []string{"scontrol", "squeue", "sinfo"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(fakeTool), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("FAKE_SLURM", dir)
	f := &fakeTools{t: t, dir: dir}
	f.write("version", []byte(version))
	return f
}

func (f *fakeTools) write(name string, b []byte) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, name), b, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// answer makes tool print out (and err on stderr) and exit with rc.
func (f *fakeTools) answer(tool string, out []byte, err string, rc int) {
	f.write(tool+".out", out)
	f.write(tool+".err", []byte(err))
	f.write(tool+".rc", []byte(strconv.Itoa(rc)))
}

// calls returns and forgets the commands run so far.
func (f *fakeTools) calls() []string {
	f.t.Helper()
	b, _ := os.ReadFile(filepath.Join(f.dir, "calls"))
	os.Remove(filepath.Join(f.dir, "calls"))
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestScontrolCommandsPerRelease(t *testing.T) {
	want := map[string]struct{ jobs, jobsAll, nodes, nodesAll string }{
		"22.05": {"squeue -h -t all -j 6,7 -O JobID:0", "squeue --json", "scontrol show node -o -d gpu-2,big-1", "sinfo --json"},
		"24.11": {"squeue --json=v0.0.42 -t all -j 6,7", "squeue --json=v0.0.42 -t all",
			"scontrol --json=v0.0.42 show node gpu-2,big-1", "scontrol --json=v0.0.42 show node"},
		"26.05": {"squeue --json=v0.0.42 -t all -j 6,7", "squeue --json=v0.0.42 -t all",
			"scontrol --json=v0.0.42 show node gpu-2,big-1", "scontrol --json=v0.0.42 show node"},
	}
	for _, rel := range releases {
		t.Run(rel, func(t *testing.T) {
			f := newFakeTools(t, string(readTestdata(t, rel+"/version.txt")))
			ctx := context.Background()
			s := NewScontrol(ScontrolOptions{BinDir: f.dir, Logger: slog.New(slog.DiscardHandler)})
			w := want[rel]

			if rel == "22.05" {
				f.answer("squeue", readTestdata(t, rel+"/squeue-jobs-text.txt"), "", 0)
			} else {
				f.answer("squeue", readTestdata(t, rel+"/squeue-j.json"), "", 0)
			}
			jobs, err := s.Jobs(ctx, 7, 6, 7)
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) != 2 || jobs[0].ID != 6 || jobs[1].ID != 7 {
				t.Errorf("Jobs(7,6,7) = %+v", jobs)
			}
			if c := f.calls(); len(c) != 2 || c[0] != "scontrol --version" || !strings.HasPrefix(c[1], w.jobs) {
				t.Errorf("Jobs ran %q, want scontrol --version then %q...", c, w.jobs)
			}
			f.answer("squeue", readTestdata(t, rel+"/squeue.json"), "", 0)
			if jobs, err := s.Jobs(ctx); err != nil || len(jobs) != 7 {
				t.Errorf("Jobs() = %d jobs, %v", len(jobs), err)
			}
			if c := f.calls(); strings.Join(c, ";") != w.jobsAll {
				t.Errorf("Jobs() ran %q, want %q (the version detected once)", c, w.jobsAll)
			}
			// unknown ids: squeue fails, saying so; no jobs, no error
			f.answer("squeue", nil, "slurm_load_jobs error: Invalid job id specified\n", 1)
			if jobs, err := s.Jobs(ctx, 999999); err != nil || len(jobs) != 0 {
				t.Errorf("Jobs(999999) = %+v, %v", jobs, err)
			}
			f.calls()

			if rel == "22.05" {
				// named nodes: one unknown; scontrol exits 1, printing the others
				f.answer("scontrol", readTestdata(t, rel+"/scontrol-show-node-named.txt"), "", 1)
				f.answer("sinfo", readTestdata(t, rel+"/sinfo.json"), "", 0)
			} else {
				f.answer("scontrol", readTestdata(t, rel+"/scontrol-show-node-named.json"), "", 0)
			}
			nodes, err := s.Nodes(ctx, "gpu-2", "big-1", "nope-1")
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes) != 2 || nodes[0].Name != "gpu-2" || nodes[1].Name != "big-1" || !nodes[1].HasFlag("DRAIN") {
				t.Errorf("Nodes = %+v", nodes)
			}
			if c := f.calls(); len(c) != 1 || c[0] != strings.Replace(w.nodes, "gpu-2,big-1", "gpu-2,big-1,nope-1", 1) {
				t.Errorf("Nodes ran %q, want %q", c, w.nodes)
			}
			if rel != "22.05" {
				f.answer("scontrol", readTestdata(t, rel+"/scontrol-show-node.json"), "", 0)
			}
			if nodes, err := s.Nodes(ctx); err != nil || len(nodes) != 7 {
				t.Errorf("Nodes() = %d nodes, %v", len(nodes), err)
			}
			if c := f.calls(); len(c) != 1 || c[0] != w.nodesAll {
				t.Errorf("Nodes() ran %q, want %q", c, w.nodesAll)
			}

			f.answer("squeue", readTestdata(t, rel+"/squeue-states.txt"), "", 0)
			states, err := s.JobStates(ctx, JobFilter{IDs: []uint32{7, 6}})
			if err != nil || len(states) != 7 {
				t.Errorf("JobStates = %+v, %v", states, err)
			}
			if c := f.calls(); len(c) != 1 || c[0] != "squeue -h -o %A|%T|%D|%N|%r -t all -j 6,7" {
				t.Errorf("JobStates ran %q", c)
			}
			if _, err := s.JobStates(ctx, JobFilter{Nodes: []string{"gpu-3", "gpu-4"}, States: []string{"RUNNING", "CONFIGURING"}}); err != nil {
				t.Error(err)
			}
			if c := f.calls(); len(c) != 1 || c[0] != "squeue -h -o %A|%T|%D|%N|%r -t RUNNING,CONFIGURING -w gpu-[3-4]" {
				t.Errorf("JobStates ran %q", c)
			}
			f.answer("squeue", nil, "squeue: error: Invalid node name nope-9\n", 1)
			if js, err := s.JobStates(ctx, JobFilter{Nodes: []string{"nope-9"}}); err != nil || len(js) != 0 {
				t.Errorf("JobStates(unknown node) = %+v, %v", js, err)
			}
		})
	}
}

func TestScontrolRefusesBadNames(t *testing.T) {
	f := newFakeTools(t, "slurm 24.11.5")
	s := NewScontrol(ScontrolOptions{BinDir: f.dir, Logger: slog.New(slog.DiscardHandler)})
	for _, n := range []string{"-h", "a b", "a,b", "gpu-[1-2]", "", "x\n"} {
		if _, err := s.Nodes(context.Background(), n); err == nil || !strings.Contains(err.Error(), "plain node name") {
			t.Errorf("Nodes(%q) = %v", n, err)
		}
	}
	if _, err := s.JobStates(context.Background(), JobFilter{States: []string{"PENDING,RUNNING"}}); err == nil {
		t.Error("JobStates accepted a state list in one name")
	}
}

// logCount counts log records at error level.
type logCount struct {
	slog.Handler
	buf    *bytes.Buffer
	errors *int
}

func (h logCount) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		*h.errors++
	}
	return h.Handler.Handle(ctx, r)
}

func TestScontrolOldSlurm(t *testing.T) {
	f := newFakeTools(t, "slurm 21.08.8\n")
	var buf bytes.Buffer
	n := 0
	log := slog.New(logCount{slog.NewTextHandler(&buf, nil), &buf, &n})
	for range 2 {
		s := NewScontrol(ScontrolOptions{BinDir: f.dir, Logger: log})
		for _, call := range []func() error{
			func() error { _, err := s.Jobs(context.Background(), 1); return err },
			func() error { _, err := s.Nodes(context.Background(), "gpu-1"); return err },
		} {
			err := call()
			var ve *VersionError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), "Slurm 21.08.8 ("+filepath.Join(f.dir, "scontrol")+" --version) is older than 22.05") {
				t.Errorf("error %v, want the version, the command and the minimum", err)
			}
		}
	}
	if c := f.calls(); len(c) != 1 {
		t.Errorf("ran %q: want one scontrol --version for the process", c)
	}
	if n != 1 {
		t.Errorf("%d error logs, want 1:\n%s", n, buf.String())
	}
}

func TestScontrolBadJSON(t *testing.T) {
	f := newFakeTools(t, "slurm 24.11.5\n")
	var buf bytes.Buffer
	n := 0
	s := NewScontrol(ScontrolOptions{BinDir: f.dir, Logger: slog.New(logCount{slog.NewTextHandler(&buf, nil), &buf, &n})})
	f.answer("squeue", []byte(`{"meta":{"plugin":{"data_parser":"data_parser/v0.0.42"},"slurm":{"release":"24.11.5"}},"jobs":[{"job_id":1,"job_state":["PENDING"],"cpus":"two"}]}`), "", 0)
	for range 3 {
		_, err := s.Jobs(context.Background(), 1)
		for _, want := range []string{"reading jobs 1", filepath.Join(f.dir, "squeue") + " --json=v0.0.42 -t all -j 1", "on Slurm 24.11.5",
			`field "jobs.cpus": got JSON string`} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v, want it to contain %q", err, want)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d error logs for 3 failures, want 1:\n%s", n, buf.String())
	}
}

// TestScontrolJobStatesMax: with Max, squeue is asked for the highest
// priority first and burst stops reading after Max lines, so a long queue
// costs what a short one does; squeue's broken pipe is no error.
func TestScontrolJobStatesMax(t *testing.T) {
	f := newFakeTools(t, "slurm 24.11.5\n")
	var long bytes.Buffer
	for i := 1; i <= 50000; i++ {
		long.WriteString(strconv.Itoa(i) + "|PENDING|1||JobHeldUser\n")
	}
	f.answer("squeue", long.Bytes(), "", 0)
	var read int
	s := NewScontrol(ScontrolOptions{BinDir: f.dir, Logger: slog.New(slog.DiscardHandler), Observe: func(c Call) { read += c.Stdout }})
	ctx := context.Background()
	js, err := s.JobStates(ctx, JobFilter{States: []string{"PENDING"}, Max: 3})
	if err != nil || len(js) != 3 || js[0].ID != 1 || js[2].ID != 3 {
		t.Fatalf("JobStates(Max 3) = %d jobs, %v", len(js), err)
	}
	if read <= 0 || read > long.Len()/4 {
		t.Errorf("read %d bytes of squeue's %d: want it to stop early", read, long.Len())
	}
	if c := f.calls(); len(c) != 1 || c[0] != "squeue -h -o %A|%T|%D|%N|%r -t PENDING --sort=-p,i" {
		t.Errorf("JobStates ran %q", c)
	}
	// fewer jobs than Max: all of them, squeue's own exit status judged
	f.answer("squeue", []byte("7|PENDING|1||Priority\n"), "", 0)
	if js, err := s.JobStates(ctx, JobFilter{States: []string{"PENDING"}, Max: 3}); err != nil || len(js) != 1 || js[0].Reason != "Priority" {
		t.Errorf("JobStates(short) = %+v, %v", js, err)
	}
	f.answer("squeue", []byte("7|PENDING|1||Priority\n"), "squeue: error: slurm_load_jobs: Unable to contact slurm controller\n", 1)
	if _, err := s.JobStates(ctx, JobFilter{Max: 3}); err == nil {
		t.Error("JobStates(Max) of a failed squeue: no error")
	}
	if _, err := s.JobStates(ctx, JobFilter{Max: -1}); err == nil || !strings.Contains(err.Error(), "max -1") {
		t.Errorf("JobStates(Max -1) = %v, want an error naming max", err)
	}
}
