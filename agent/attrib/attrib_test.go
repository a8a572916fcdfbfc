package attrib

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func TestParseCgroup(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     uint32
		noJob    bool
		bad      bool
	}{
		{name: "v2 slurmstepd scope", in: "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n", want: 42},
		{name: "v2 batch step", in: "0::/system.slice/slurmstepd.scope/job_4294967/step_batch/user/task_0\n", want: 4294967},
		{name: "v1 several controllers", in: "12:pids:/slurm/uid_1000/job_77/step_0/task_1\n5:memory:/slurm/uid_1000/job_77/step_0/task_1\n1:name=systemd:/system.slice/slurmd.service\n", want: 77},
		{name: "v1 multiple-slurmd node dir", in: "4:devices:/slurm_gpu-1/uid_0/job_9/step_extern\n", want: 9},
		{name: "not slurm", in: "0::/user.slice/user-0.slice/session-1.scope\n", noJob: true},
		{name: "empty", in: "", noJob: true},
		{name: "job_ is a prefix of another name", in: "0::/job_x/y\n", bad: true},
		{name: "zero job", in: "0::/slurm/job_0/step_0\n", bad: true},
		{name: "overflow", in: "0::/slurm/job_99999999999/step_0\n", bad: true},
		{name: "two jobs", in: "1:a:/slurm/job_1\n2:b:/slurm/job_2\n", bad: true},
		{name: "garbage", in: "hello", bad: true},
		{name: "relative path", in: "0::slurm/job_1\n", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCgroup([]byte(tc.in))
			switch {
			case tc.noJob:
				if !errors.Is(err, ErrNoJob) {
					t.Fatalf("got %d, %v; want ErrNoJob", got, err)
				}
			case tc.bad:
				if err == nil || errors.Is(err, ErrNoJob) {
					t.Fatalf("got %d, %v; want a parse error", got, err)
				}
			default:
				if err != nil || got != tc.want {
					t.Fatalf("got %d, %v; want %d", got, err, tc.want)
				}
			}
		})
	}
}

func TestParseEnviron(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  uint32
		noJob bool
	}{
		{in: "PATH=/bin\x00SLURM_JOB_ID=123\x00HOME=/root\x00", want: 123},
		{in: "SLURM_JOB_ID=5", want: 5},
		{in: "PATH=/bin\x00XSLURM_JOB_ID=9\x00", noJob: true},
		{in: "", noJob: true},
		{in: "SLURM_JOB_ID=abc\x00"},
		{in: "SLURM_JOB_ID=\x00"},
	} {
		got, err := ParseEnviron([]byte(tc.in))
		switch {
		case tc.noJob:
			if !errors.Is(err, ErrNoJob) {
				t.Errorf("%q: got %d, %v; want ErrNoJob", tc.in, got, err)
			}
		case tc.want == 0:
			if err == nil || errors.Is(err, ErrNoJob) {
				t.Errorf("%q: got %d, %v; want a parse error", tc.in, got, err)
			}
		default:
			if err != nil || got != tc.want {
				t.Errorf("%q: got %d, %v; want %d", tc.in, got, err, tc.want)
			}
		}
	}
}

func FuzzParseCgroup(f *testing.F) {
	f.Add([]byte("0::/system.slice/slurmstepd.scope/job_42/step_0\n"))
	f.Add([]byte("5:memory:/slurm/uid_0/job_1/step_batch\n1:name=systemd:/\n"))
	f.Add([]byte("x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := ParseCgroup(b)
		if err == nil && id == 0 {
			t.Fatalf("%q: job 0 without error", b)
		}
		if err != nil && id != 0 {
			t.Fatalf("%q: id %d with error %v", b, id, err)
		}
	})
}

func FuzzParseEnviron(f *testing.F) {
	f.Add([]byte("SLURM_JOB_ID=123\x00"))
	f.Add([]byte("A=B\x00SLURM_JOB_ID=0\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := ParseEnviron(b)
		if (err == nil) == (id == 0) {
			t.Fatalf("%q: id %d, err %v", b, id, err)
		}
	})
}

// TestResolverRealProcess: a real child process claiming SLURM_JOB_ID in
// its environment, in no job cgroup (this machine's cgroup names none), is
// no job's by default (the claim is forgeable: an attack on the usage
// figures of another user's job) and that job's only with AllowEnviron.
func TestResolverRealProcess(t *testing.T) {
	// The child says when it runs and then blocks reading its stdin, with
	// no further exec: until a forked child's exec, its environ is the
	// test's own, and during an exec it reads empty (both flaked under load).
	cmd := exec.Command("sh", "-c", "echo ready; read x")
	cmd.Env = append(os.Environ(), "SLURM_JOB_ID=4242")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("waiting for the child to start: %v", err)
	}
	var strict Resolver
	if got, err := strict.JobOf(cmd.Process.Pid); !errors.Is(err, ErrNoJob) {
		t.Fatalf("cgroup only: JobOf(child claiming job 4242) = %d, %v; want ErrNoJob", got, err)
	}
	r := Resolver{AllowEnviron: true}
	got, err := r.JobOf(cmd.Process.Pid)
	if err != nil || got != 4242 {
		t.Fatalf("JobOf(child) = %d, %v; want 4242", got, err)
	}
	if _, err := r.JobOf(os.Getpid()); !errors.Is(err, ErrNoJob) && os.Getenv("SLURM_JOB_ID") == "" {
		t.Fatalf("JobOf(self) err = %v, want ErrNoJob", err)
	}
	if _, err := r.JobOf(1 << 30); err == nil {
		t.Fatal("JobOf(nonexistent pid) succeeded")
	}
	// Cached until forgotten.
	if _, ok := r.cache[cmd.Process.Pid]; !ok {
		t.Fatal("child not cached")
	}
	r.Forget(map[int]bool{})
	if len(r.cache) != 0 {
		t.Fatal("Forget left entries")
	}
}

// TestResolverCgroupWins uses a fake proc tree where cgroup and environ
// disagree: the cgroup (set by slurmstepd, not forgeable by the job) wins.
func TestResolverCgroupWins(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, strconv.Itoa(77))
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "cgroup"), []byte("0::/system.slice/slurmstepd.scope/job_11/step_0/user/task_0\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "environ"), []byte("SLURM_JOB_ID=12\x00"), 0o644)
	r := Resolver{ProcRoot: root}
	if got, err := r.JobOf(77); err != nil || got != 11 {
		t.Fatalf("JobOf = %d, %v; want 11 from cgroup", got, err)
	}
}
