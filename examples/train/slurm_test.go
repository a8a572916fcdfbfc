package train

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/test/torchenv"

	"github.com/burst-hpc/burst/test/harness"
)

// TestDDPOnSlurm submits train-ddp.sbatch, unchanged, to a real Slurm
// cluster of two nodes (test/harness: slurmctld, one slurmd per network
// namespace) and drives it the ways burst can:
//   - restart 0: `scancel --batch -s USR2` (an early checkpoint, no marker),
//     then `scancel --batch -s USR1` (the batch shell writes the request; all
//     ranks checkpoint; the marker), then `scontrol requeue` (Slurm's SIGTERM
//     to every process) and `scontrol update starttime=now`, as burst-agent
//     does;
//   - restart 1: `scancel -s USR1` (every process of every step on both
//     nodes: torchrun must survive it, every rank takes it), then the job
//     runs to the end.
//
// The final weights must equal, bit for bit, those of an uninterrupted run
// of the same seed (two local torchruns), and the steps redone after the
// requeue be at most one checkpoint interval.
func TestDDPOnSlurm(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPING REAL-SLURM TEST in -short mode (make test-unit starts no daemon)")
	}
	py := torchPython(t)
	if os.Geteuid() != 0 || exec.Command("/usr/sbin/slurmctld", "-V").Run() != nil {
		msg := "needs root and Debian's slurmctld/slurmd/munge (run `make test` as root)"
		if os.Getenv("BURST_REQUIRE_SLURM") == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPING REAL-SLURM TEST: " + msg)
	}
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// 160 steps; --step-sleep keeps restart 0 from finishing before the
	// requeue lands.
	args := ddpArgs("--epochs", "5")
	const total = 160

	// The reference, alongside: the same seed, straight through, locally.
	ref := filepath.Join(t.TempDir(), "ref")
	refRun := ddpCluster(t, py, ref, 0, "--epochs", "5")

	// Cloud nodes, as on burst: the job's power-up (ResumeProgram=/bin/true
	// here) is answered by booting slurmd in each node's namespace, which
	// registers the node's address (cloud_reg_addrs).
	c := harness.New(t, harness.Options{
		Fragment: "NodeName=ddp-[1-2] CPUs=1 RealMemory=1000 Gres=gpu:1 State=CLOUD\n" +
			"PartitionName=ddp Nodes=ddp-[1-2] Default=YES State=UP\n",
		GresConf: "AutoDetect=off\nNodeName=ddp-[1-2] Name=gpu File={{DEVDIR}}/nvidia0\n",
		GPUs:     1,
	})
	ctx, cancel := context.WithTimeout(context.Background(), ddpHangGuard)
	defer cancel()

	// the job is an ordinary user's, as at a site: its working directory
	// (output, checkpoints) is that user's own
	work := t.TempDir()
	u := c.User()
	if err := os.Chmod(filepath.Dir(work), 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(work, u.UID, u.GID); err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(work, "checkpoints")
	cmd := c.UserCommand(ctx, u, "sbatch", append([]string{"--parsable", "--chdir=" + work, "--nodes=2", "--gres=gpu:1", filepath.Join(here, "train-ddp.sbatch")},
		append(args, "--step-sleep", "0.1")...)...)
	cmd.Env = append(cmd.Env, "DDP_DIR="+here, "DDP_PYTHON="+py, "DDP_NPROC_PER_NODE=1", "BURST_CHECKPOINT_DIR="+ckpt)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sbatch: %v", err)
	}
	id := strings.TrimSpace(string(out))
	if show, err := c.Run(ctx, "scontrol", "show", "job", "-o", id); err != nil || !strings.Contains(show, fmt.Sprintf("UserId=%s(%d)", u.Name, u.UID)) {
		t.Fatalf("job %s is not the ordinary user %s's (%v): %s", id, u.Name, err, show)
	}
	boot := make(chan error, 2)
	for _, n := range []string{"ddp-1", "ddp-2"} {
		go func() { _, err := c.StartSlurmd(ctx, n, netip.Addr{}); boot <- err }()
	}
	for range 2 {
		if err := <-boot; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.WaitJobState(ctx, id, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(work, "ddp-"+id+".out")
	jobLog := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	defer func() {
		if t.Failed() {
			t.Logf("job output:\n%s", jobLog())
		}
	}()
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := c.Run(ctx, name, args...); err != nil {
			t.Fatalf("%v (%s)", err, out)
		}
	}
	// restartStep is the last step rank 0 logged in restart r.
	restartStep := func(r int) int {
		last := 0
		for _, m := range regexp.MustCompile(`restart=`+strconv.Itoa(r)+` rank=0 step (\d+) done`).FindAllStringSubmatch(jobLog(), -1) {
			n, _ := strconv.Atoi(m[1])
			last = max(last, n)
		}
		return last
	}
	logged := &harness.SyncBuffer{} // only for waitUntil's failure message
	waitLog := func(what string, cond func(string) bool) {
		t.Helper()
		waitUntil(t, what, logged, func() bool { return cond(jobLog()) })
	}
	has := func(s string) func(string) bool { return func(l string) bool { return strings.Contains(l, s) } }

	// Restart 0: the batch shell gets the signals (burst-agent's default).
	waitLog("step 4", func(string) bool { return restartStep(0) >= 4 })
	run("scancel", "--batch", "--signal=USR2", id)
	waitLog("the rebalance checkpoint", has("(rebalance, "))
	early, _ := strconv.Atoi(grab(t, jobLog(), `restart=0 rank=0 checkpoint at step (\d+) complete: .*\(rebalance`)[1])
	checkAllRanks(t, ckpt, early, "rebalance")
	marker0 := filepath.Join(ckpt, ".checkpointed-0")
	if exists(marker0) {
		t.Fatal("the rebalance request wrote the marker")
	}
	waitLog("three more steps", func(string) bool { return restartStep(0) >= early+3 })
	run("scancel", "--batch", "--signal=USR1", id)
	waitUntil(t, "the marker of restart 0", logged, func() bool { return exists(marker0) })
	at0 := markerStep(t, marker0)
	checkAllRanks(t, ckpt, at0, "interrupt")
	waitLog("two more steps", func(string) bool { return restartStep(0) >= at0+2 })
	run("scontrol", "requeue", id)
	if _, err := c.WaitJobState(ctx, id, "PENDING"); err != nil {
		t.Fatal(err)
	}
	reached0 := restartStep(0)
	resume1 := newestComplete(t, ckpt)
	run("scontrol", "update", "jobid="+id, "starttime=now")

	// Restart 1: every step is signalled (scancel without --batch).
	waitLog("restart 1 resumed", has(fmt.Sprintf("restart=1 rank=1 resumed from checkpoint at step %d ", resume1)))
	waitLog("three steps of restart 1", func(string) bool { return restartStep(1) >= resume1+3 })
	run("scancel", "--signal=USR1", id)
	marker1 := filepath.Join(ckpt, ".checkpointed-1")
	waitUntil(t, "the marker of restart 1", logged, func() bool { return exists(marker1) })
	at1 := markerStep(t, marker1)
	checkAllRanks(t, ckpt, at1, "interrupt")
	if _, err := c.WaitJobState(ctx, id, "COMPLETED"); err != nil {
		t.Fatal(err)
	}
	l := jobLog()
	t.Logf("job output:\n%s", l)
	for _, want := range []string{
		"restart=0 batch checkpoint requested (rebalance)",
		"restart=0 batch checkpoint requested (interrupt)",
		fmt.Sprintf("restart=0 rank=0 got an interrupt checkpoint request after step %d", at0),
		fmt.Sprintf("restart=0 rank=1 wrote its checkpoint part for step %d (interrupt)", at0),
		"restart=0 batch terminated",
		fmt.Sprintf("restart=1 rank=0 got SIGUSR1 after step %d", at1),
		fmt.Sprintf("restart=1 rank=1 got SIGUSR1 after step %d", at1),
		fmt.Sprintf("restart=1 rank=0 done: %d steps", total),
	} {
		if !strings.Contains(l, want) {
			t.Errorf("job output lacks %q", want)
		}
	}
	if strings.Contains(l, "restart=1 batch checkpoint requested") {
		t.Error("scancel without --batch reached the batch shell")
	}
	redone := reached0 - resume1
	t.Logf("restart 0: marker at step %d, killed after step %d; restart 1 resumed at %d (%d redone), marker at %d", at0, reached0, resume1, redone, at1)
	if resume1 < at0 || redone < 0 || redone > ddpEvery {
		t.Errorf("resumed at %d after the marker at %d and step %d: want resume >= marker and at most %d steps redone", resume1, at0, reached0, ddpEvery)
	}

	for i, n := range refRun {
		if err := n.wait(t, fmt.Sprintf("reference node %d", i)); err != nil {
			t.Fatalf("reference node %d: %v\n%s", i, err, n.out.String())
		}
	}
	wr, wj := torchenv.TensorData(t, filepath.Join(ref, "final.pt")), torchenv.TensorData(t, filepath.Join(ckpt, "final.pt"))
	if len(wr) != 6 || len(wj) != 6 {
		t.Fatalf("final weights: %d and %d storages, want 6", len(wr), len(wj))
	}
	for k, b := range wr {
		if !bytes.Equal(b, wj[k]) {
			t.Errorf("final weights of the Slurm job differ from the uninterrupted run's in storage %s", k)
		}
	}
	hr := grab(t, refRun[0].out.String(), `weights sha256 ([0-9a-f]{64})`)[1]
	hj := grab(t, l, `restart=1 rank=0 done: .* weights sha256 ([0-9a-f]{64})`)[1]
	if hr != hj {
		t.Errorf("weights sha256: uninterrupted %s, Slurm job %s", hr, hj)
	}
	t.Logf("final weights equal bit for bit (sha256 %s)", hj)
}
