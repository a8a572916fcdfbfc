package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/burst-hpc/burst/test/torchenv"

	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/interruption/interruptiontest"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/harness"
	"github.com/burst-hpc/burst/test/stack"
)

// The PyTorch example's size here: 1,024 samples over 2 ranks in batches
// of 16 is 32 steps an epoch, 160 in 5 epochs; a checkpoint every 10.
const (
	torchEvery = 10
	torchTotal = 160
)

func torchArgs() []string {
	return []string{"--seed", "20240531", "--samples", "1024", "--batch-size", "16", "--epochs", "5",
		"--features", "16", "--hidden", "32", "--classes", "10", "--checkpoint-every", strconv.Itoa(torchEvery),
		"--keep", "100", // every checkpoint stays, for the test to read
		"--timeout", "120"}
}

// referenceRun trains the example uninterrupted with the same seed, on two
// local "nodes" (two torchruns on 127.0.0.1, gloo), as examples/train's
// own tests do, where the cluster's jobs run (the same torch); wait returns
// its output once both ended.
func referenceRun(t *testing.T, s *stack.Stack, py, here, dir string) (wait func() string) {
	t.Helper()
	port := strconv.Itoa(torchenv.FreePort(t))
	out := &harness.SyncBuffer{}
	var cmds []*exec.Cmd
	for node := 0; node < 2; node++ {
		var env []string
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			if strings.HasPrefix(k, "SLURM_") || strings.HasPrefix(k, "BURST_") || strings.HasPrefix(k, "DDP_") || k == "OMP_NUM_THREADS" ||
				k == "RANK" || k == "WORLD_SIZE" || k == "LOCAL_RANK" || k == "MASTER_ADDR" || k == "MASTER_PORT" || k == "GLOO_SOCKET_IFNAME" {
				continue
			}
			env = append(env, kv)
		}
		env = append(env, "SLURM_JOB_ID=42", "SLURM_NNODES=2", "SLURM_NODEID="+strconv.Itoa(node), "SLURM_RESTART_COUNT=0",
			"BURST_CHECKPOINT_DIR="+dir, "DDP_PYTHON="+py, "DDP_NPROC_PER_NODE=1", "OMP_NUM_THREADS=1")
		cmd := s.Cluster.RootEnv().Command(context.Background(), "", dir, append([]string{"/bin/bash", filepath.Join(here, "ddp-node.sh"), "127.0.0.1", port}, torchArgs()...)...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	}
	return func() string {
		for i, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Fatalf("reference node %d: %v\n%s", i, err, out.String())
			}
		}
		return out.String()
	}
}

// TestSpotMultiNodeTorch: the PyTorch template (real torch, DDP over gloo)
// trains on two burst nodes. Mid-epoch EC2 sends a spot interruption notice
// to the node that does not run the batch shell. That node's agent drains
// it and signals the batch shell through slurmctld (scancel --batch, from
// the other node); the batch shell hands the request to rank 0, both ranks
// checkpoint at the same step, rank 0 writes the marker; the agent notes
// the lost node on the job and requeues it as a whole. The requeue's epilog
// holds the surviving node (and its instance) for the relaunch, so Slurm
// powers up one node only and the job resumes on two nodes: the survivor
// and the replacement. The sizer, which gets the same notice through
// EventBridge, leaves it to the agent: one requeue. The final weights equal
// those of an uninterrupted run with the same seed, bit for bit, and at
// most one checkpoint interval of steps is redone.
func TestSpotMultiNodeTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: -short: the PyTorch example trains for real")
	}
	s := start(t, stack.Options{Emulator: ec2emu.Options{NoticePeriod: time.Minute}})
	py := torchPython(t, s)
	here := jobFiles(t, s, "train-ddp.sbatch", "ddp-node.sh", "ddp.py")
	ref := filepath.Join(s.Cluster.Dir(), "work", "reference")
	if err := os.MkdirAll(ref, 0o755); err != nil {
		t.Fatal(err)
	}
	waitRef := referenceRun(t, s, py, here, ref)

	ctx := context.Background()
	work := filepath.Join(s.Cluster.Dir(), "work")
	cmd := s.Cluster.UserCommand(ctx, s.Cluster.User(), "sbatch", append([]string{"--parsable", "--nodes=2", "--gres=gpu:1", "--constraint=a10g", "--account=demo",
		"--chdir=" + work, filepath.Join(here, "train-ddp.sbatch")}, append(torchArgs(), "--step-sleep", "0.1")...)...)
	cmd.Env = append(cmd.Env, "DDP_DIR="+here, "DDP_PYTHON="+py, "DDP_NPROC_PER_NODE=1", "OMP_NUM_THREADS=1",
		"BURST_CHECKPOINT_ROOT="+filepath.Join(s.Cfg.FSx.MountPoint, s.Cfg.FSx.CheckpointDir))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sbatch: %v", err)
	}
	id := strings.TrimSpace(string(out))
	logPath := filepath.Join(work, "ddp-"+id+".out")
	defer func() {
		if t.Failed() {
			t.Logf("job output:\n%s", readFile(logPath))
		}
	}()
	ckpt := filepath.Join(s.Cfg.FSx.LocalDir, s.Cfg.FSx.CheckpointDir, id) // the file system behind every node's mount
	waitJob(t, s, id, 2*time.Minute, "RUNNING")
	j := jobNow(t, s, id)
	nodes, err := hostlist.Expand(j.Nodes)
	if err != nil || len(nodes) != 2 || !slices.Contains(nodes, j.BatchHost) {
		t.Fatalf("job %s runs on %q (batch host %s): want two nodes", id, j.Nodes, j.BatchHost)
	}
	survivor, victim := j.BatchHost, nodes[0]
	if victim == survivor {
		victim = nodes[1]
	}
	lastStep := func(restart int) int {
		n := 0
		for _, m := range regexp.MustCompile(`restart=`+strconv.Itoa(restart)+` rank=0 step (\d+) done`).FindAllStringSubmatch(readFile(logPath), -1) {
			v, _ := strconv.Atoi(m[1])
			n = max(n, v)
		}
		return n
	}
	// mid-epoch: epochs are 32 steps
	eventually(t, 3*time.Minute, "step 45 (mid-epoch 2)", func() bool { return lastStep(0) >= 45 })
	survivorInst, victimInst := nodeInstance(s, survivor), nodeInstance(s, victim)
	if survivorInst.ID == "" || victimInst.ID == "" {
		t.Fatalf("no live instances for %s and %s", survivor, victim)
	}
	if err := s.Emu.Interrupt(victimInst.ID); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	atNotice := lastStep(0)
	marker := filepath.Join(ckpt, ".checkpointed-0")
	eventually(t, 90*time.Second, "the job's marker", func() bool { _, err := os.Stat(marker); return err == nil })
	tMarker := time.Since(t0)
	b, _ := os.ReadFile(marker)
	at0, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(string(b), "step=")))
	if err != nil {
		t.Fatalf("marker %q", b)
	}
	// every rank's part of the interrupt checkpoint, at one step
	m := readDDPManifest(t, ckpt, at0)
	var parts []string
	for f := range m.Files {
		parts = append(parts, f)
	}
	slices.Sort(parts)
	if m.WorldSize != 2 || m.Reason != "interrupt" || m.Step != at0 || strings.Join(parts, " ") != "model.pt rank-00000.pt rank-00001.pt" {
		t.Fatalf("interrupt checkpoint of step %d: %+v, parts %v", at0, m, parts)
	}
	eventually(t, 60*time.Second, "the job requeued", func() bool { return jobNow(t, s, id).RestartCount == 1 })
	tRequeue := time.Since(t0)
	reached0 := 0
	var nodes1 []string
	eventually(t, 3*time.Minute, "the job running again on two nodes", func() bool {
		j := jobNow(t, s, id)
		if j.State == "RUNNING" && j.RestartCount == 1 {
			nodes1, _ = hostlist.Expand(j.Nodes)
			return true
		}
		return false
	})
	tRunning := time.Since(t0)
	reached0 = lastStep(0)
	if len(nodes1) != 2 || !slices.Contains(nodes1, survivor) {
		t.Errorf("relaunched on %v: want two nodes, the survivor %s among them", nodes1, survivor)
	}
	if in := nodeInstance(s, survivor); in.ID != survivorInst.ID {
		t.Errorf("the survivor %s has instance %q, want its own %s kept", survivor, in.ID, survivorInst.ID)
	}
	var replacement string
	for _, n := range nodes1 {
		if n != survivor {
			replacement = n
		}
	}
	waitJob(t, s, id, 4*time.Minute, "COMPLETED")
	tDone := time.Since(t0)
	jobLog := readFile(logPath)
	refLog := waitRef()

	// the same weights, bit for bit
	wr, wj := torchenv.TensorData(t, filepath.Join(ref, "final.pt")), torchenv.TensorData(t, filepath.Join(ckpt, "final.pt"))
	if len(wr) == 0 || len(wr) != len(wj) {
		t.Fatalf("final weights: %d and %d storages", len(wr), len(wj))
	}
	for k, v := range wr {
		if !bytes.Equal(v, wj[k]) {
			t.Errorf("final weights differ from the uninterrupted run's in storage %s", k)
		}
	}
	sha := regexp.MustCompile(`rank=0 done: \d+ steps; .* weights sha256 ([0-9a-f]{64})`)
	hr, hj := sha.FindStringSubmatch(refLog), sha.FindStringSubmatch(jobLog)
	if hr == nil || hj == nil || hr[1] != hj[1] {
		t.Fatalf("weights sha256: uninterrupted %v, interrupted job %v", hr, hj)
	}
	// at most one checkpoint interval redone
	rm := regexp.MustCompile(`restart=1 rank=0 resumed from checkpoint at step (\d+) `).FindStringSubmatch(jobLog)
	if rm == nil {
		t.Fatal("the relaunched job did not resume from a checkpoint")
	}
	resume1, _ := strconv.Atoi(rm[1])
	redone := reached0 - resume1
	if resume1 < at0 || redone < 0 || redone > torchEvery {
		t.Errorf("marker at step %d, restart 0 reached %d, restart 1 resumed at %d: %d steps redone, want at most %d", at0, reached0, resume1, redone, torchEvery)
	}
	if !strings.Contains(jobLog, fmt.Sprintf("restart=1 rank=0 done: %d steps", torchTotal)) ||
		!strings.Contains(jobLog, "restart=0 batch checkpoint requested (interrupt)") ||
		!strings.Contains(jobLog, fmt.Sprintf("restart=0 rank=1 wrote its checkpoint part for step %d (interrupt)", at0)) {
		t.Error("the job's output lacks the batch shell's request, rank 1's part or the end of training")
	}

	// one requeue, by the agent, noting the lost node; the sizer left it
	// to the agent; one new instance, for the replacement
	j = jobNow(t, s, id)
	note, heldNote, ok := interruptiontest.ParseConsumed(j.AdminComment)
	if j.RestartCount != 1 || !ok || note.By != "agent" || !slices.Equal(note.Lost, []string{victim}) || note.Instance != victimInst.ID ||
		!slices.Equal(heldNote, []string{survivor}) {
		t.Errorf("job %s: %d restarts, admin comment %q: want the agent's note, used by the epilog to hold %s", id, j.RestartCount, j.AdminComment, survivor)
	}
	var held []string
	for _, l := range strings.Split(readFile(s.LogPath()), "\n") {
		var e struct {
			Msg   string   `json:"msg"`
			Nodes []string `json:"nodes"`
		}
		if json.Unmarshal([]byte(l), &e) == nil && e.Msg == "holding the surviving nodes for the requeued job's relaunch" {
			held = append(held, e.Nodes...)
		}
	}
	if !slices.Equal(held, []string{survivor}) {
		t.Errorf("the epilog held %v, want the survivor %s", held, survivor)
	}
	if !strings.Contains(readFile(filepath.Join(s.Dir, "sizer.log")), "spot interruption handled by the node's agent") {
		t.Error("the sizer's log does not say it left the EventBridge notice to the agent")
	}
	var launched []string
	for _, in := range s.Emu.Instances() {
		if in.LaunchTime.After(t0) {
			launched = append(launched, in.ID)
		}
	}
	if len(launched) != 1 {
		t.Errorf("instances launched after the notice: %v, want one (the replacement %s)", launched, replacement)
	}
	t.Logf("notice at step %d; marker (step %d, both ranks) %.1f s after the notice, requeued %.1f s, running again on %v %.1f s, done %.1f s; "+
		"restart 0 reached step %d, restart 1 resumed at %d: %d steps redone (interval %d); final weights sha256 %s equal",
		atNotice, at0, tMarker.Seconds(), tRequeue.Seconds(), nodes1, tRunning.Seconds(), tDone.Seconds(), reached0, resume1, redone, torchEvery, hj[1])
}
