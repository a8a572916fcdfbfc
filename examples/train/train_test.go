package train

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/burst-hpc/burst/test/harness"
)

func readStep(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(string(b), "step=")))
	if err != nil {
		t.Fatalf("%s: %q is not step=N", path, b)
	}
	return n
}

// waitFor polls cond; the minute is a hang guard, not a performance bound.
func waitFor(t *testing.T, what string, out *harness.SyncBuffer, cond func() bool) {
	t.Helper()
	giveUp := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(giveUp) {
			t.Fatalf("gave up waiting for %s; output:\n%s", what, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func start(t *testing.T, dir string, restart int, out *harness.SyncBuffer) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("bash", "train.sh")
	cmd.Env = append(os.Environ(), "SLURM_JOB_ID=42", "SLURM_RESTART_COUNT="+strconv.Itoa(restart), "BURST_CHECKPOINT_DIR="+dir,
		"TRAIN_STEPS=30", "TRAIN_STEP_SECONDS=0.05", "TRAIN_CHECKPOINT_EVERY=5")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// TestCheckpointOnSignalAndResume runs train.sh like Slurm would: the agent
// sends SIGUSR1, the job checkpoints and writes its marker, Slurm kills it
// (SIGTERM) on requeue, and the requeued run resumes from the checkpoint.
func TestCheckpointOnSignalAndResume(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("SKIP: no bash")
	}
	dir := filepath.Join(t.TempDir(), "42")
	out1 := &harness.SyncBuffer{}
	run1 := start(t, dir, 0, out1)
	// Let it pass a periodic checkpoint and a few more steps.
	waitFor(t, "step 7", out1, func() bool { return readStep(t, filepath.Join(dir, "progress")) >= 7 })
	if err := run1.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, ".checkpointed-0")
	waitFor(t, "the checkpoint marker", out1, func() bool { _, err := os.Stat(marker); return err == nil })
	atSignal := readStep(t, marker)
	if ckpt := readStep(t, filepath.Join(dir, "checkpoint")); ckpt != atSignal || atSignal < 7 {
		t.Fatalf("checkpoint step %d, marker step %d; want equal and >= 7\n%s", ckpt, atSignal, out1.String())
	}
	// Slurm's requeue kills the job a little later: some steps get redone.
	waitFor(t, "two more steps", out1, func() bool { return readStep(t, filepath.Join(dir, "progress")) >= atSignal+2 })
	run1.Process.Signal(syscall.SIGTERM)
	werr := run1.Wait()
	reached := readStep(t, filepath.Join(dir, "progress"))
	if !strings.Contains(out1.String(), "terminated at step") {
		t.Fatalf("run 1 did not log its termination (%v):\n%s", werr, out1.String())
	}

	out2 := &harness.SyncBuffer{}
	run2 := start(t, dir, 1, out2)
	if err := run2.Wait(); err != nil {
		t.Fatalf("requeued run failed: %v\n%s", err, out2.String())
	}
	log2 := out2.String()
	t.Logf("run 1:\n%s\nrun 2:\n%s", out1.String(), log2)
	for _, want := range []string{
		"restart=1 resumed from checkpoint at step " + strconv.Itoa(atSignal),
		"restart=1 redoing " + strconv.Itoa(reached-atSignal) + " steps done after the last checkpoint",
		"restart=1 step " + strconv.Itoa(atSignal+1) + " done",
		"done: 30 steps, " + strconv.Itoa(reached-atSignal) + " redone",
	} {
		if !strings.Contains(log2, want) {
			t.Errorf("run 2 log lacks %q", want)
		}
	}
	// No step before the checkpoint was redone.
	for _, m := range regexp.MustCompile(`step (\d+) done`).FindAllStringSubmatch(log2, -1) {
		if n, _ := strconv.Atoi(m[1]); n <= atSignal {
			t.Errorf("run 2 redid step %d, before the checkpoint at %d", n, atSignal)
		}
	}
	if readStep(t, filepath.Join(dir, "checkpoint")) != 30 {
		t.Errorf("final checkpoint = %d, want 30", readStep(t, filepath.Join(dir, "checkpoint")))
	}
	if _, err := os.Stat(filepath.Join(dir, ".checkpointed-1")); err == nil {
		t.Error("run 2 wrote a marker without being signalled")
	}
}

// TestEarlyCheckpointOnUSR2: SIGUSR2 (burst's early checkpoint on a
// rebalance recommendation, for jobs with rebalance=checkpoint) saves a
// checkpoint and the job runs on: no marker, no exit.
func TestEarlyCheckpointOnUSR2(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("SKIP: no bash")
	}
	dir := filepath.Join(t.TempDir(), "42")
	out := &harness.SyncBuffer{}
	run := start(t, dir, 0, out)
	waitFor(t, "step 7", out, func() bool { return readStep(t, filepath.Join(dir, "progress")) >= 7 })
	if err := run.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the early checkpoint", out, func() bool { return strings.Contains(out.String(), "(rebalance)") })
	m := regexp.MustCompile(`early checkpoint at step (\d+) \(rebalance\)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no early checkpoint line:\n%s", out.String())
	}
	if err := run.Wait(); err != nil {
		t.Fatalf("the job did not run on after SIGUSR2: %v\n%s", err, out.String())
	}
	if at, _ := strconv.Atoi(m[1]); at < 7 || !strings.Contains(out.String(), "done: 30 steps") {
		t.Fatalf("early checkpoint at %d:\n%s", at, out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, ".checkpointed-0")); err == nil {
		t.Error("SIGUSR2 wrote the interrupt marker")
	}
}

func TestShellcheck(t *testing.T) {
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		if os.Getenv("BURST_REQUIRE_TOOLS") == "1" {
			t.Fatal("shellcheck not installed")
		}
		t.Skip("SKIP: shellcheck not installed")
	}
	scripts := []string{"train.sh", "ddp-node.sh", "train-ddp.sbatch", "testdata/fakeslurm/srun", "testdata/fakeslurm/scontrol"}
	if out, err := exec.Command(sc, append([]string{"-s", "bash"}, scripts...)...).CombinedOutput(); err != nil {
		t.Fatalf("shellcheck %v: %v\n%s", scripts, err, out)
	}
}
