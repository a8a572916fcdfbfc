package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
	"github.com/burst-hpc/burst/test/torchenv"
)

// jobNow is job id as Slurm shows it now.
func jobNow(t *testing.T, s *stack.Stack, id string) slurm.Job {
	t.Helper()
	n, err := strconv.ParseUint(id, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	js, err := slurmClient(s).Jobs(context.Background(), uint32(n))
	if err != nil || len(js) != 1 {
		t.Fatalf("job %s: %v %v", id, js, err)
	}
	return js[0]
}

// training is the example training job running on a burst node.
type training struct {
	id, log, node string
	instance      ec2emu.Instance
}

// trainingRunning submits the example training job (steps, a checkpoint
// every every steps) as the ordinary user and waits until 7 steps are done
// on a live instance.
func trainingRunning(t *testing.T, s *stack.Stack, steps, every int) training {
	t.Helper()
	tr := training{id: sbatchTrain(t, s, steps, every)}
	waitJob(t, s, tr.id, 90*time.Second, "RUNNING")
	tr.log = filepath.Join(s.Cluster.Dir(), "work", "train-"+tr.id+".out")
	eventually(t, 60*time.Second, "7 training steps", func() bool { return strings.Contains(readFile(tr.log), "step 7 done") })
	tr.node = jobNow(t, s, tr.id).Nodes
	if tr.instance = nodeInstance(s, tr.node); tr.instance.ID == "" {
		t.Fatalf("no live instance for node %s", tr.node)
	}
	return tr
}

// nodeInstance is node's live instance ("" when it has none).
func nodeInstance(s *stack.Stack, node string) ec2emu.Instance {
	for _, in := range liveInstances(s) {
		if ec2p.NodeOf(in.Tags) == node {
			return in
		}
	}
	return ec2emu.Instance{}
}

// stopAgent kills the node's burst-agent (started by the bootstrap, pid
// in the node's run directory): a dead agent.
func stopAgent(t *testing.T, s *stack.Stack, node string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Dir, "run", node, "agent.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		t.Fatalf("agent pid %q", b)
	}
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if !strings.Contains(string(cmd), "burst-agent") {
		t.Fatalf("pid %d is not burst-agent: %q", pid, cmd)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the agent gone", func() bool {
		c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		return !strings.Contains(string(c), "burst-agent")
	})
}

// metric reads one sample of the sizer's /metrics (-1 when absent).
func metric(t *testing.T, s *stack.Stack, sample string) float64 {
	t.Helper()
	b, err := s.Metrics()
	if err != nil {
		t.Logf("reading metrics: %v", err)
		return -1
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` ([0-9.e+]+)$`).FindStringSubmatch(b)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// torchPython is the interpreter with PyTorch where the cluster's Slurm
// runs, as jobs see it (test/torchenv): the host's; the Debian roots carry
// Slurm, not PyTorch (1.3 GB more per root and a sid package that may not
// install on a given day), so the torch tests skip there and run on the
// host's Slurm 22.05.
func torchPython(t *testing.T, s *stack.Stack) string {
	t.Helper()
	where, skip := "the host", ""
	if !s.Cluster.Slurm().Host() {
		where = "the Debian root " + s.Cluster.Slurm().Root
		skip = "SKIP: no PyTorch in " + where + " (the torch tests run on the host's Slurm)"
	}
	run := func(ctx context.Context, name string, args ...string) *exec.Cmd {
		return s.Cluster.RootEnv().Command(ctx, "", "/", append([]string{name}, args...)...)
	}
	return torchenv.Python(t, where, run, skip)
}

// jobFiles copies files of examples/train where users keep their job
// scripts, the cluster's shared directory (a Debian root's Slurm sees the
// run directory, not this tree), and returns that directory.
func jobFiles(t *testing.T, s *stack.Stack, names ...string) string {
	t.Helper()
	dir := filepath.Join(s.Cluster.Dir(), "work", "train")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("..", "..", "examples", "train", n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// ddpManifest is examples/train's step-N/manifest.json.
type ddpManifest struct {
	Step      int    `json:"step"`
	WorldSize int    `json:"world_size"`
	Reason    string `json:"reason"`
	Files     map[string]struct {
		Size int64 `json:"size"`
	} `json:"files"`
}

func readDDPManifest(t *testing.T, dir string, step int) ddpManifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("step-%09d", step), "manifest.json"))
	if err != nil {
		t.Fatalf("the checkpoint of step %d: %v", step, err)
	}
	var m ddpManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for name, f := range m.Files {
		fi, err := os.Stat(filepath.Join(dir, fmt.Sprintf("step-%09d", step), name))
		if err != nil {
			t.Fatalf("checkpoint of step %d: part %s: %v", step, name, err)
		}
		if fi.Size() != f.Size {
			t.Fatalf("checkpoint of step %d: part %s is %d bytes, its manifest says %d", step, name, fi.Size(), f.Size)
		}
	}
	return m
}

// sbatchTrain submits examples/train/train.sh as the cluster's ordinary
// user, on one a10g GPU of account demo, with args before the script:
// steps one-second steps, a checkpoint every `every` steps into the FSx
// checkpoint root, as a researcher's training job would; the script is
// where users keep theirs, on the cluster's shared file system (a Debian
// root's Slurm sees the run dir, not this tree). It returns the job's id.
func sbatchTrain(t *testing.T, s *stack.Stack, steps, every int, args ...string) string {
	t.Helper()
	script := filepath.Join(jobFiles(t, s, "train.sh"), "train.sh")
	argv := append(append([]string{"--parsable", "--gres=gpu:1", "--constraint=a10g", "--account=demo"}, args...), script)
	cmd := s.Cluster.UserCommand(context.Background(), s.Cluster.User(), "sbatch", argv...)
	cmd.Env = append(cmd.Env, "TRAIN_STEPS="+strconv.Itoa(steps), "TRAIN_STEP_SECONDS=1", "TRAIN_CHECKPOINT_EVERY="+strconv.Itoa(every),
		"BURST_CHECKPOINT_ROOT="+filepath.Join(s.Cfg.FSx.MountPoint, s.Cfg.FSx.CheckpointDir))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sbatch %v train.sh: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}
