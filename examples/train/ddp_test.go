package train

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/burst-hpc/burst/test/harness"
	"github.com/burst-hpc/burst/test/torchenv"
)

// The example's size in these tests: 1,024 samples over 2 ranks in batches
// of 16 is 32 steps an epoch, 96 in all.
const (
	ddpSeed      = 20240531
	ddpEvery     = 10
	ddpTotal     = 96
	ddpEpochLen  = 32
	ddpFeatures  = 16
	ddpHidden    = 32
	ddpClasses   = 10
	ddpHangGuard = 5 * time.Minute // a hang guard, not a performance bound
)

func ddpArgs(extra ...string) []string {
	return append([]string{"--seed", strconv.Itoa(ddpSeed), "--samples", "1024", "--batch-size", "16", "--epochs", "3",
		"--features", strconv.Itoa(ddpFeatures), "--hidden", strconv.Itoa(ddpHidden), "--classes", strconv.Itoa(ddpClasses),
		"--checkpoint-every", strconv.Itoa(ddpEvery),
		// a rank that dies takes the others down within a minute, not ten
		"--timeout", "60"}, extra...)
}

// TestDDPDeterministicAcrossInterruption trains the PyTorch example on two
// "nodes" (two torchruns on 127.0.0.1, gloo) twice with the same seed:
// once straight through, once with an early (rebalance) checkpoint request,
// a SIGUSR1 to every process of one node mid-epoch, a SIGTERM to all of
// them after the marker (Slurm's requeue), and a restart. The final weights
// must be equal bit for bit, and the steps redone at most one checkpoint
// interval.
func TestDDPDeterministicAcrossInterruption(t *testing.T) {
	py := torchPython(t)
	t0 := time.Now()
	root := t.TempDir()
	dirA, dirB := filepath.Join(root, "a"), filepath.Join(root, "b")

	// (a) straight through, alongside (b).
	runA := ddpCluster(t, py, dirA, 0)

	// (b) the same seed; --step-sleep only widens the window between steps.
	runB := ddpCluster(t, py, dirB, 0, "--step-sleep", "0.05")
	rank0, rank1 := runB[0].out, runB[1].out
	waitUntil(t, "step 4", rank0, func() bool { return lastStep(rank0.String()) >= 4 })
	writeRequest(t, dirB, "reason=rebalance\nrestart=0\n")
	early, _ := strconv.Atoi(grab(t, waitLine(t, rank0, `checkpoint at step \d+ complete: .*\(rebalance`), `checkpoint at step (\d+) complete: .*\(rebalance`)[1])
	checkAllRanks(t, dirB, early, "rebalance")
	marker := filepath.Join(dirB, ".checkpointed-0")
	if exists(marker) {
		t.Fatal("an early (rebalance) checkpoint wrote the interruption marker")
	}

	// Mid-epoch, SIGUSR1 to every process of node 1 only (torchrun and its
	// worker, rank 1), as `scancel -s USR1` delivers it on one node.
	waitUntil(t, "step 14", rank0, func() bool { return lastStep(rank0.String()) >= 14 })
	runB[1].signal(t, syscall.SIGUSR1)
	waitUntil(t, "the checkpoint marker", rank0, func() bool { return exists(marker) })
	atSignal := markerStep(t, marker)
	if atSignal < 14 || atSignal%ddpEpochLen == 0 {
		t.Fatalf("marker at step %d; want mid-epoch, at or after 14", atSignal)
	}
	checkAllRanks(t, dirB, atSignal, "interrupt")
	for _, want := range []struct {
		out  *harness.SyncBuffer
		line string
	}{
		{rank1, fmt.Sprintf("rank=1 got SIGUSR1 after step %d\n", atSignal)},
		{rank0, fmt.Sprintf("rank=0 wrote its checkpoint part for step %d (interrupt)", atSignal)},
		{rank1, fmt.Sprintf("rank=1 wrote its checkpoint part for step %d (interrupt)", atSignal)},
	} {
		if !strings.Contains(want.out.String(), want.line) {
			t.Fatalf("log lacks %q:\n%s", want.line, want.out.String())
		}
	}
	// Training goes on (so torchrun on node 1 survived the signal) until
	// Slurm's requeue kills everything with SIGTERM.
	waitUntil(t, "two more steps", rank0, func() bool { return lastStep(rank0.String()) >= atSignal+2 })
	for _, n := range runB {
		n.signal(t, syscall.SIGTERM)
	}
	for i, n := range runB {
		if err := n.wait(t, fmt.Sprintf("interrupted node %d", i)); err == nil {
			t.Errorf("node %d exited 0 after SIGTERM", i)
		}
	}
	reached := lastStep(rank0.String())
	resumeAt := newestComplete(t, dirB)
	if resumeAt < atSignal {
		t.Fatalf("newest complete checkpoint %d is older than the signalled one %d", resumeAt, atSignal)
	}
	checkAllRanks(t, dirB, resumeAt, map[bool]string{true: "interrupt", false: "periodic"}[resumeAt == atSignal])

	// The requeued run, with a request left over from the first run that
	// it must drop as stale.
	writeRequest(t, dirB, "reason=interrupt\nrestart=0\n")
	runB2 := ddpCluster(t, py, dirB, 1)
	for i, n := range runB2 {
		if err := n.wait(t, fmt.Sprintf("resumed node %d", i)); err != nil {
			t.Fatalf("resumed node %d: %v\n%s", i, err, n.out.String())
		}
	}
	for i, n := range runA {
		if err := n.wait(t, fmt.Sprintf("uninterrupted node %d", i)); err != nil {
			t.Fatalf("uninterrupted node %d: %v\n%s", i, err, n.out.String())
		}
	}
	logA, logB1, logB2 := runA[0].out.String(), rank0.String(), runB2[0].out.String()
	t.Logf("uninterrupted rank 0:\n%s\ninterrupted rank 0:\n%s\ninterrupted rank 1:\n%s\nresumed rank 0:\n%s\nresumed rank 1:\n%s",
		logA, logB1, rank1.String(), logB2, runB2[1].out.String())
	for r, n := range runB2 {
		want := fmt.Sprintf("rank=%d resumed from checkpoint at step %d (epoch %d, batch %d)", r, resumeAt, resumeAt/ddpEpochLen, resumeAt%ddpEpochLen)
		if !strings.Contains(n.out.String(), want) {
			t.Errorf("resumed rank %d log lacks %q", r, want)
		}
	}
	redone := reached - resumeAt
	t.Logf("signalled checkpoint at step %d, killed after step %d, resumed at %d: %d steps redone (interval %d)", atSignal, reached, resumeAt, redone, ddpEvery)
	if redone < 0 || redone > ddpEvery {
		t.Errorf("%d steps redone; want 0..%d (one checkpoint interval)", redone, ddpEvery)
	}

	// Every step has the same loss, bit for bit, in both histories.
	la, lb1, lb2 := losses(logA), losses(logB1), losses(logB2)
	if len(la) != ddpTotal || lastStep(logB2) != ddpTotal {
		t.Fatalf("uninterrupted run logged %d steps, resumed run ended at %d; want %d", len(la), lastStep(logB2), ddpTotal)
	}
	for n := 1; n <= ddpTotal; n++ {
		if got, ok := lb1[n]; ok && got != la[n] {
			t.Errorf("step %d loss before the interruption %s, uninterrupted %s", n, got, la[n])
		}
		if got, ok := lb2[n]; ok && got != la[n] {
			t.Errorf("step %d loss after the restart %s, uninterrupted %s", n, got, la[n])
		}
		if _, ok := lb2[n]; ok != (n > resumeAt) {
			t.Errorf("step %d: run after the restart did it: %v; want it to do exactly the steps after %d", n, ok, resumeAt)
		}
	}

	// The final weights, compared here: the raw tensor bytes of both files
	// (and the script's own hash lines).
	wa, wb := torchenv.TensorData(t, filepath.Join(dirA, "final.pt")), torchenv.TensorData(t, filepath.Join(dirB, "final.pt"))
	params := (ddpFeatures+1)*ddpHidden + (ddpHidden+1)*ddpHidden + (ddpHidden+1)*ddpClasses
	total := 0
	for k, b := range wa {
		total += len(b)
		if !bytes.Equal(b, wb[k]) {
			t.Errorf("final weights differ in storage %s", k)
		}
	}
	if len(wa) != 6 || len(wb) != len(wa) || total != 4*params {
		t.Errorf("final weights: %d and %d storages, %d bytes; want 6 storages of %d float32 parameters", len(wa), len(wb), total, params)
	}
	hashA := grab(t, logA, `weights sha256 ([0-9a-f]{64})`)[1]
	hashB := grab(t, logB2, `weights sha256 ([0-9a-f]{64})`)[1]
	if hashA != hashB {
		t.Errorf("weights sha256: uninterrupted %s, interrupted and resumed %s", hashA, hashB)
	}
	if !strings.Contains(logB2, "rank=0 dropped a stale checkpoint request (restart='0', this is restart 1)") || exists(filepath.Join(dirB, ".checkpointed-1")) {
		t.Errorf("the resumed run did not drop the first run's leftover request (marker .checkpointed-1 written: %v)", exists(filepath.Join(dirB, ".checkpointed-1")))
	}
	t.Logf("final weights equal bit for bit (sha256 %s); test took %v", hashA, time.Since(t0).Round(time.Millisecond))

	// A run on one node cannot resume the two-rank checkpoint: it says so
	// and leaves it alone.
	env := slurmEnv("SLURM_JOB_ID=42", "SLURM_NNODES=1", "SLURM_NODEID=0", "SLURM_RESTART_COUNT=2", "BURST_CHECKPOINT_DIR="+dirB,
		"DDP_PYTHON="+py, "DDP_NPROC_PER_NODE=1", "OMP_NUM_THREADS=1")
	one := startGroup(t, env, "bash", append([]string{"ddp-node.sh", "127.0.0.1", strconv.Itoa(torchenv.FreePort(t))}, ddpArgs()...)...)
	if err := one.wait(t, "the one-node run"); err == nil {
		t.Errorf("a one-node run resumed a two-rank checkpoint:\n%s", one.out.String())
	}
	if want := "was written by 2 ranks with seed " + strconv.Itoa(ddpSeed) + "; this run has 1 ranks"; !strings.Contains(one.out.String(), want) {
		t.Errorf("the one-node run's output lacks %q:\n%s", want, one.out.String())
	}
	checkAllRanks(t, dirB, ddpTotal, "final")
}

// TestDDPBatchScript runs train-ddp.sbatch as Slurm's batch step would,
// with stand-ins for srun and scontrol (testdata/fakeslurm: two "nodes" on
// this host), and signals the batch shell alone, as
// `scancel --batch -s USR1|USR2` does: USR2 must give an early checkpoint
// without the marker, USR1 a checkpoint of every rank at one step and the
// marker; SIGTERM to every process (Slurm's requeue) must end the job and
// leave that checkpoint intact.
func TestDDPBatchScript(t *testing.T) {
	py := torchPython(t)
	dir := filepath.Join(t.TempDir(), "43")
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	env := slurmEnv("SLURM_JOB_ID=43", "SLURM_JOB_NODELIST=ddp-a,ddp-b", "SLURM_NNODES=2", "SLURM_RESTART_COUNT=0",
		"SLURM_SUBMIT_DIR="+here, "BURST_CHECKPOINT_DIR="+dir, "DDP_PYTHON="+py, "DDP_NPROC_PER_NODE=1", "OMP_NUM_THREADS=1",
		"DDP_MASTER_PORT="+strconv.Itoa(torchenv.FreePort(t)), "PATH="+filepath.Join(here, "testdata", "fakeslurm")+":"+os.Getenv("PATH"))
	job := startGroup(t, env, "bash", append([]string{"train-ddp.sbatch"}, ddpArgs("--step-sleep", "0.05")...)...)
	batch := job.cmd.Process

	waitUntil(t, "step 4", job.out, func() bool { return lastStep(job.out.String()) >= 4 })
	if err := batch.Signal(syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	early, _ := strconv.Atoi(grab(t, waitLine(t, job.out, `checkpoint at step \d+ complete: .*\(rebalance`), `checkpoint at step (\d+) complete: .*\(rebalance`)[1])
	checkAllRanks(t, dir, early, "rebalance")
	marker := filepath.Join(dir, ".checkpointed-0")
	if exists(marker) {
		t.Fatal("SIGUSR2 (rebalance) wrote the interruption marker")
	}

	waitUntil(t, "three more steps", job.out, func() bool { return lastStep(job.out.String()) >= early+3 })
	if err := batch.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the checkpoint marker", job.out, func() bool { return exists(marker) })
	atSignal := markerStep(t, marker)
	checkAllRanks(t, dir, atSignal, "interrupt")
	waitUntil(t, "two more steps", job.out, func() bool { return lastStep(job.out.String()) >= atSignal+2 })
	job.signal(t, syscall.SIGTERM)
	if err := job.wait(t, "the batch job"); err == nil {
		t.Error("the batch job exited 0 after SIGTERM")
	}
	log := job.out.String()
	t.Logf("batch job output:\n%s", log)
	for _, want := range []string{
		"batch checkpoint requested (rebalance)",
		"batch checkpoint requested (interrupt)",
		fmt.Sprintf("rank=0 got an interrupt checkpoint request after step %d", atSignal),
		fmt.Sprintf("rank=1 wrote its checkpoint part for step %d (interrupt)", atSignal),
		"batch terminated",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if n := newestComplete(t, dir); n < atSignal {
		t.Errorf("after SIGTERM the newest complete checkpoint is %d, older than the signalled %d", n, atSignal)
	}
	checkAllRanks(t, dir, atSignal, "interrupt")
}
