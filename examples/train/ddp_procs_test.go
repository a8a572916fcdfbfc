package train

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/burst-hpc/burst/test/harness"
	"github.com/burst-hpc/burst/test/torchenv"
)

// torchPython is the interpreter with PyTorch on this machine
// (test/torchenv); -short skips the training tests.
func torchPython(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("SKIP: -short: the PyTorch example trains for real (about 15 s)")
	}
	return torchenv.Python(t, "the host", nil, "")
}

// slurmEnv is the environment with no Slurm or torchrun variables of the
// test's own, plus env.
func slurmEnv(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SLURM_") || strings.HasPrefix(k, "BURST_CHECKPOINT") || strings.HasPrefix(k, "DDP_") ||
			k == "RANK" || k == "WORLD_SIZE" || k == "LOCAL_RANK" || k == "MASTER_ADDR" || k == "MASTER_PORT" || k == "GLOO_SOCKET_IFNAME" {
			continue
		}
		out = append(out, kv)
	}
	return append(out, env...)
}

// group is a process group: one "node" of the job (what Slurm signals when
// it signals a step on that node) or a whole batch job.
type group struct {
	cmd  *exec.Cmd
	out  *harness.SyncBuffer
	done chan error
	// stopping: the test signalled it to stop or waits for its end, so an
	// exit is no surprise.
	stopping bool
}

// exitedEarly reports a started group that ended with an error while the
// test still expected it to run.
func exitedEarly() (int, error) {
	for i, g := range started {
		if g.stopping {
			continue
		}
		select {
		case err := <-g.done:
			g.done <- err
			if err != nil {
				return i, err
			}
		default:
		}
	}
	return 0, nil
}

// started lists every group of the running test, for its failure output.
var started []*group

func allOutput() string {
	var b strings.Builder
	for i, g := range started {
		fmt.Fprintf(&b, "--- process group %d (%s):\n%s\n", i, strings.Join(g.cmd.Args, " "), g.out.String())
	}
	return b.String()
}

func startGroup(t *testing.T, env []string, name string, args ...string) *group {
	t.Helper()
	g := &group{cmd: exec.Command(name, args...), out: &harness.SyncBuffer{}, done: make(chan error, 1)}
	g.cmd.Env = env
	g.cmd.Stdout, g.cmd.Stderr = g.out, g.out
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.done <- g.cmd.Wait() }()
	started = append(started, g)
	t.Cleanup(func() {
		started = nil
		syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
		<-g.done
		g.done <- nil
	})
	return g
}

func (g *group) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if sig == syscall.SIGTERM {
		g.stopping = true
	}
	if err := syscall.Kill(-g.cmd.Process.Pid, sig); err != nil {
		t.Fatalf("signalling process group %d with %v: %v", g.cmd.Process.Pid, sig, err)
	}
}

// wait returns the group's exit error once its leader and every process
// left in the group are gone.
func (g *group) wait(t *testing.T, what string) error {
	t.Helper()
	g.stopping = true
	var err error
	giveUp := time.Now().Add(ddpHangGuard)
wait:
	for {
		select {
		case err = <-g.done:
			g.done <- err
			break wait
		case <-time.After(20 * time.Millisecond):
		}
		if i, err := exitedEarly(); err != nil {
			t.Fatalf("waiting for %s to exit: process group %d exited: %v; output:\n%s", what, i, err, allOutput())
		}
		if time.Now().After(giveUp) {
			t.Fatalf("%s did not exit; output:\n%s", what, allOutput())
		}
	}
	waitUntil(t, what+": every process of its group gone", g.out, func() bool {
		return syscall.Kill(-g.cmd.Process.Pid, 0) == syscall.ESRCH
	})
	return err
}

// ddpCluster starts the job's ranks as Slurm would start them on two
// nodes: one ddp-node.sh (torchrun) per node, on 127.0.0.1 with gloo.
func ddpCluster(t *testing.T, py, dir string, restart int, extra ...string) []*group {
	t.Helper()
	port := strconv.Itoa(torchenv.FreePort(t))
	var nodes []*group
	for node := 0; node < 2; node++ {
		env := slurmEnv("SLURM_JOB_ID=42", "SLURM_NNODES=2", "SLURM_NODEID="+strconv.Itoa(node),
			"SLURM_RESTART_COUNT="+strconv.Itoa(restart), "BURST_CHECKPOINT_DIR="+dir,
			"DDP_PYTHON="+py, "DDP_NPROC_PER_NODE=1", "OMP_NUM_THREADS=1")
		nodes = append(nodes, startGroup(t, env, "bash", append([]string{"ddp-node.sh", "127.0.0.1", port}, ddpArgs(extra...)...)...))
	}
	return nodes
}

func waitUntil(t *testing.T, what string, out *harness.SyncBuffer, cond func() bool) {
	t.Helper()
	giveUp := time.Now().Add(ddpHangGuard)
	for !cond() {
		if i, err := exitedEarly(); err != nil {
			t.Fatalf("waiting for %s: process group %d exited: %v; output:\n%s", what, i, err, allOutput())
		}
		if time.Now().After(giveUp) {
			t.Fatalf("gave up waiting for %s; output:\n%s", what, allOutput())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLine waits for a line matching pattern and returns the output.
func waitLine(t *testing.T, out *harness.SyncBuffer, pattern string) string {
	t.Helper()
	re := regexp.MustCompile(pattern)
	waitUntil(t, "a line matching "+pattern, out, func() bool { return re.MatchString(out.String()) })
	return out.String()
}
