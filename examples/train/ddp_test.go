package train

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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

// torchPython is the interpreter with PyTorch: Debian's /usr/bin/python3
// (python3-torch), whatever python3 is first on PATH; BURST_TORCH_PYTHON
// names another.
func torchPython(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("SKIP: -short: the PyTorch example trains for real (about 15 s)")
	}
	py := "/usr/bin/python3"
	if p := os.Getenv("BURST_TORCH_PYTHON"); p != "" {
		py = p
	}
	out, err := exec.Command(py, "-c", "import torch; print(torch.__version__)").CombinedOutput()
	if err != nil {
		if os.Getenv("BURST_REQUIRE_TOOLS") == "1" {
			t.Fatalf("PyTorch is missing (%s -c 'import torch': %v: %s); scripts/install-deps.sh installs python3-torch", py, err, out)
		}
		t.Skipf("SKIP: PyTorch is missing (%v); scripts/install-deps.sh installs python3-torch", err)
	}
	t.Logf("torch %s (%s)", strings.TrimSpace(string(out)), py)
	return py
}

// freePort returns a port that is free now and that the kernel does not
// hand out by itself: torchrun binds it a moment later, and a port from the
// ephemeral range could be taken in between by any socket of this busy
// machine (gloo's own listeners included).
func freePort(t *testing.T) int {
	t.Helper()
	lo, hi := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			lo, _ = strconv.Atoi(f[0])
			hi, _ = strconv.Atoi(f[1])
		}
	}
	start := 20000 + int(rand.Uint32()%10000)
	for i := 0; i < 45000; i++ {
		p := 10000 + (start-10000+i)%55000
		if p >= lo && p <= hi {
			continue
		}
		if l, err := net.Listen("tcp", ":"+strconv.Itoa(p)); err == nil {
			l.Close()
			return p
		}
	}
	t.Fatalf("no free port outside the ephemeral range %d-%d", lo, hi)
	return 0
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
	out  *syncBuf
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
	g := &group{cmd: exec.Command(name, args...), out: &syncBuf{}, done: make(chan error, 1)}
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
	port := strconv.Itoa(freePort(t))
	var nodes []*group
	for node := 0; node < 2; node++ {
		env := slurmEnv("SLURM_JOB_ID=42", "SLURM_NNODES=2", "SLURM_NODEID="+strconv.Itoa(node),
			"SLURM_RESTART_COUNT="+strconv.Itoa(restart), "BURST_CHECKPOINT_DIR="+dir,
			"DDP_PYTHON="+py, "DDP_NPROC_PER_NODE=1", "OMP_NUM_THREADS=1")
		nodes = append(nodes, startGroup(t, env, "bash", append([]string{"ddp-node.sh", "127.0.0.1", port}, ddpArgs(extra...)...)...))
	}
	return nodes
}

func waitUntil(t *testing.T, what string, out *syncBuf, cond func() bool) {
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

var stepDone = regexp.MustCompile(`(?m)rank=0 step (\d+) done epoch=\d+ batch=\d+ loss=(\S+)$`)

// losses maps step -> the loss rank 0 logged for it (exact, as float.hex()).
func losses(log string) map[int]string {
	out := map[int]string{}
	for _, m := range stepDone.FindAllStringSubmatch(log, -1) {
		n, _ := strconv.Atoi(m[1])
		out[n] = m[2]
	}
	return out
}

func lastStep(log string) int {
	last := 0
	for n := range losses(log) {
		last = max(last, n)
	}
	return last
}

func grab(t *testing.T, log, pattern string) []string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no line matching %q in:\n%s", pattern, log)
	}
	return m
}

type manifest struct {
	Format    string `json:"format"`
	Step      int    `json:"step"`
	Epoch     int    `json:"epoch"`
	Batch     int    `json:"batch"`
	WorldSize int    `json:"world_size"`
	Reason    string `json:"reason"`
	Files     map[string]struct {
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
	} `json:"files"`
}

// readManifest reads a step's manifest and checks every part it names
// against its size and sha256; nil if the step has no manifest.
func readManifest(t *testing.T, dir string, step int) *manifest {
	t.Helper()
	d := filepath.Join(dir, fmt.Sprintf("step-%09d", step))
	b, err := os.ReadFile(filepath.Join(d, "manifest.json"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", d, err)
	}
	for name, want := range m.Files {
		data, err := os.ReadFile(filepath.Join(d, name))
		if err != nil {
			t.Fatalf("checkpoint %s lacks %s: %v", d, name, err)
		}
		sum := sha256.Sum256(data)
		if int64(len(data)) != want.Size || hex.EncodeToString(sum[:]) != want.SHA256 {
			t.Fatalf("checkpoint %s: %s is %d bytes sha256 %x; manifest says %d bytes %s", d, name, len(data), sum, want.Size, want.SHA256)
		}
	}
	return &m
}

// checkAllRanks checks that step is a complete checkpoint of both ranks,
// taken for reason.
func checkAllRanks(t *testing.T, dir string, step int, reason string) {
	t.Helper()
	m := readManifest(t, dir, step)
	if m == nil {
		t.Fatalf("step %d has no manifest in %s", step, dir)
	}
	var names []string
	for n := range m.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	if got, want := strings.Join(names, " "), "model.pt rank-00000.pt rank-00001.pt"; got != want || m.WorldSize != 2 || m.Step != step || m.Reason != reason {
		t.Fatalf("step %d manifest: files %q world %d step %d reason %q; want %q, 2, %d, %q", step, got, m.WorldSize, m.Step, m.Reason, want, step, reason)
	}
	if m.Epoch*ddpEpochLen+m.Batch != step {
		t.Fatalf("step %d manifest: position epoch %d batch %d", step, m.Epoch, m.Batch)
	}
}

func newestComplete(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	best := -1
	for _, e := range ents {
		n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "step-"))
		if err != nil || !strings.HasPrefix(e.Name(), "step-") {
			continue
		}
		if n > best && readManifest(t, dir, n) != nil {
			best = n
		}
	}
	return best
}

// tensorData reads the raw tensor storages of a torch.save file (a zip
// whose <archive>/data/<key> entries hold each storage's bytes).
func tensorData(t *testing.T, path string) map[string][]byte {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer zr.Close()
	out := map[string][]byte{}
	for _, f := range zr.File {
		_, key, ok := strings.Cut(f.Name, "/data/")
		if !ok {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[key] = b
	}
	return out
}

func writeRequest(t *testing.T, dir, content string) {
	t.Helper()
	tmp := filepath.Join(dir, ".checkpoint-request.tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, ".checkpoint-request")); err != nil {
		t.Fatal(err)
	}
}

func markerStep(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(string(b), "step=")))
	if err != nil {
		t.Fatalf("%s: %q is not step=N", path, b)
	}
	return n
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

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
		out  *syncBuf
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
	wa, wb := tensorData(t, filepath.Join(dirA, "final.pt")), tensorData(t, filepath.Join(dirB, "final.pt"))
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
	one := startGroup(t, env, "bash", append([]string{"ddp-node.sh", "127.0.0.1", strconv.Itoa(freePort(t))}, ddpArgs()...)...)
	if err := one.wait(t, "the one-node run"); err == nil {
		t.Errorf("a one-node run resumed a two-rank checkpoint:\n%s", one.out.String())
	}
	if want := "was written by 2 ranks with seed " + strconv.Itoa(ddpSeed) + "; this run has 1 ranks"; !strings.Contains(one.out.String(), want) {
		t.Errorf("the one-node run's output lacks %q:\n%s", want, one.out.String())
	}
	checkAllRanks(t, dirB, ddpTotal, "final")
}

// waitLine waits for a line matching pattern and returns the output.
func waitLine(t *testing.T, out *syncBuf, pattern string) string {
	t.Helper()
	re := regexp.MustCompile(pattern)
	waitUntil(t, "a line matching "+pattern, out, func() bool { return re.MatchString(out.String()) })
	return out.String()
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
		"DDP_MASTER_PORT="+strconv.Itoa(freePort(t)), "PATH="+filepath.Join(here, "testdata", "fakeslurm")+":"+os.Getenv("PATH"))
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
