package slurm_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/rest"
	"github.com/burst-hpc/burst/test/harness"
)

var update = flag.Bool("update", false, "rewrite testdata/<release>/ from the real cluster (TestCaptureSamples)")

// e2eFragment: the nodes of the fixture scenario (fixtures_test.go). The
// ResumeProgram keeps a copy of each SLURM_RESUME_FILE (slurmctld removes
// it once the program has run).
const e2eFragment = `
NodeName=gpu-[1-6] CPUs=2 RealMemory=1000 State=CLOUD Feature=g5.xlarge,a10g Gres=gpu:a10g:2
NodeName=big-1 CPUs=2 RealMemory=1000 State=CLOUD Feature=p4d.24xlarge,a100 Gres=gpu:a100:8
PartitionName=cloud Nodes=gpu-[1-6],big-1 Default=YES MaxTime=INFINITE State=UP
SuspendTime=600
ResumeTimeout=600
ResumeProgram={{DIR}}/work/keep-resume-file
MaxJobCount=20000
`

const e2eGres = "AutoDetect=off\nNodeName=gpu-[1-6] Name=gpu Type=a10g File={{DEVDIR}}/nvidia[0-1]\nNodeName=big-1 Name=gpu Type=a100 File={{DEVDIR}}/nvidia[0-7]\n"

func startCluster(t testing.TB) *harness.Cluster {
	return harness.New(t, harness.Options{Fragment: e2eFragment, GresConf: e2eGres, GPUs: 8, RestJWT: true, Prepare: func(c *harness.Cluster) error {
		dir := filepath.Join(c.Dir(), "work")
		if err := os.MkdirAll(filepath.Join(dir, "resume"), 0o755); err != nil {
			return err
		}
		// slurmctld runs it without PATH
		script := "#!/bin/sh\n/bin/cat \"$SLURM_RESUME_FILE\" > " + dir + "/resume/$(/bin/date +%s%N).json\n"
		return os.WriteFile(filepath.Join(dir, "keep-resume-file"), []byte(script), 0o755)
	}})
}

func capture(t *testing.T, c *harness.Cluster, ctx context.Context, name string, args ...string) []byte {
	t.Helper()
	out, err := c.Run(ctx, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(out)
}

// clusterVersion is the release of the cluster's Slurm tools.
func clusterVersion(t testing.TB, c *harness.Cluster) slurm.Version {
	t.Helper()
	out, err := c.Run(context.Background(), "scontrol", "--version")
	if err != nil {
		t.Fatal(err)
	}
	v, err := slurm.ParseVersion(out)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCaptureSamples runs the fixture scenario (fixtures_test.go) on the real
// daemons and, with -update, writes what they print to testdata/<release>/.
func TestCaptureSamples(t *testing.T) {
	if !*update {
		t.Skip("only with -update")
	}
	c := startCluster(t)
	v := clusterVersion(t, c)
	rel := fmt.Sprintf("%02d.%02d", v.Major, v.Minor)
	t.Logf("Slurm %s: writing testdata/%s/", v, rel)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	sbatch := func(args ...string) string {
		t.Helper()
		id, err := c.Sbatch(ctx, append(args, "-o", "/dev/null")...)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	run := func(name string, args ...string) {
		t.Helper()
		if _, err := c.Run(ctx, name, args...); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(id string, states ...string) {
		t.Helper()
		if _, err := c.WaitJobState(ctx, id, states...); err != nil {
			t.Fatal(err)
		}
	}
	sbatch("-J", "train-7b", "--gres=gpu:a10g:2", "--comment", "burst: params=7B ckpt=/fsx/ck", "-C", "a10g", "--mem=500", "-t", "30", "--requeue", "--begin=now+1hour", "--wrap", "sleep 100")
	sbatch("-J", "gpus-per-job", "--gpus=2", "--mem-per-cpu=100", "--hold", "--no-requeue", "--wrap", "true")
	sbatch("-J", "sweep", "--array=0-3", "--hold", "--gres=gpu:1", "--wrap", "true")
	run("scontrol", "update", "nodename=gpu-1", "state=POWER_UP")
	if _, err := c.StartSlurmd(ctx, "gpu-1", netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitNodeState(ctx, "gpu-1", "idle"); err != nil {
		t.Fatal(err)
	}
	wait(sbatch("-J", "done", "-w", "gpu-1", "--gres=gpu:1", "--wrap", "true"), "COMPLETED")
	wait(sbatch("-J", "running", "-w", "gpu-1", "-c", "2", "--gres=gpu:a10g:1", "--wrap", "sleep 3000"), "RUNNING")
	// powers gpu-2 up and waits for it: nothing starts its slurmd
	wait(sbatch("-J", "booting", "-w", "gpu-2", "--gres=gpu:a10g:2", "-t", "60", "--wrap", "sleep 10"), "CONFIGURING")
	multi := []string{"-J", "multi", "-N2", "-w", "gpu-[3-4]", "--gres=gpu:a10g:2", "--wrap", "sleep 10"}
	if v.AtLeast(23, 2) {
		multi = append(multi, "--extra", "burst=1")
	}
	wait(sbatch(multi...), "CONFIGURING")
	if v.AtLeast(23, 11) {
		run("scontrol", "update", "nodename=gpu-1", "instanceid=i-0123456789abcdef0", "instancetype=g5.xlarge")
	}
	run("scontrol", "update", "nodename=big-1", "state=DRAIN", "reason=capacity test")
	run("scontrol", "update", "nodename=big-1", "comment=i-0abc", `extra={"instance_id":"i-0abc"}`)
	time.Sleep(2 * time.Second) // let slurmctld run the ResumePrograms

	j, err := slurm.JSONFlag(v)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"version.txt":       capture(t, c, ctx, "scontrol", "--version"),
		"squeue.json":       capture(t, c, ctx, "squeue", j, "-t", "all"),
		"squeue-j.json":     capture(t, c, ctx, "squeue", j, "-t", "all", "-j", "6,7,999999"),
		"squeue-states.txt": capture(t, c, ctx, "squeue", "-h", "-t", "all", "-o", "%A|%T|%D|%N|%r"),
	}
	if v.AtLeast(23, 2) {
		files["scontrol-show-job.json"] = capture(t, c, ctx, "scontrol", j, "show", "job", "6")
		files["scontrol-show-node.json"] = capture(t, c, ctx, "scontrol", j, "show", "node")
		files["scontrol-show-node-named.json"] = capture(t, c, ctx, "scontrol", j, "show", "node", "gpu-2,big-1,nope-1")
		files["sinfo.json"] = capture(t, c, ctx, "sinfo", j)
		files["squeue-default.json"] = capture(t, c, ctx, "squeue", "--json", "-t", "all")
	} else {
		files["sinfo.json"] = capture(t, c, ctx, "sinfo", "--json")
		files["scontrol-show-node.txt"] = capture(t, c, ctx, "scontrol", "show", "node", "-o", "-d")
		// exits 1 for the unknown node, printing the others
		out, _ := c.Run(ctx, "scontrol", "show", "node", "-o", "-d", "gpu-2,big-1,nope-1")
		files["scontrol-show-node-named.txt"] = []byte(out)
	}
	restFiles, status := captureREST(t, c, ctx, v)
	for name, b := range restFiles {
		files[name] = b
	}
	files["rest-status.txt"] = status
	kept, err := filepath.Glob(filepath.Join(c.Dir(), "work", "resume", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(kept)
	for i, p := range kept {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[fmt.Sprintf("resume-%d.json", i+1)] = b
	}
	dir := filepath.Join("testdata", rel)
	old, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// backends are the slurm.Client implementations every real-Slurm test of
// the contract runs: the command line, and slurmrestd (with JWT) whose
// fallback for what a release's REST API cannot do is the command line.
var backends = []string{"cli", "rest"}

// newBackend returns the client of backend for cluster c.
func newBackend(t testing.TB, c *harness.Cluster, backend string, observe func(slurm.Call)) slurm.Client {
	t.Helper()
	cli := slurm.NewScontrol(slurm.ScontrolOptions{Conf: c.ConfPath(), BinDir: c.ClientBin(), Timeout: 20 * time.Second, Observe: observe})
	if backend == "cli" {
		return cli
	}
	rc, err := rest.New(rest.Options{URL: c.RestURL(), User: "root", JWTKeyFile: c.JWTKeyPath(), Fallback: cli, Observe: observe, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// TestClientAgainstSlurm runs the slurm.Client contract against the real
// daemons through each backend, each on a cluster of its own.
func TestClientAgainstSlurm(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			c := startCluster(t)
			clientContract(t, c, backend)
		})
	}
}

func clientContract(t *testing.T, c *harness.Cluster, backend string) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	cl := newBackend(t, c, backend, nil)
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	v := clusterVersion(t, c)
	t.Logf("Slurm %s, backend %s", v, backend)

	// A pending GRES job with burst metadata.
	js, err := c.Sbatch(ctx, "-J", "train-7b", "--gres=gpu:a10g:2", "--comment", "burst: params=7B", "-C", "a10g",
		"--mem=500", "-t", "30", "--requeue", "--begin=now+1hour", "--wrap", "sleep 100")
	if err != nil {
		t.Fatal(err)
	}
	id := mustID(t, js)
	jobs, err := cl.Jobs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 {
		t.Fatalf("Jobs(%d) = %d jobs, want 1", id, len(jobs))
	}
	j := jobs[0]
	want := []slurm.GRES{{Name: "gpu", Type: "a10g", Count: 2}}
	if j.ID != id || j.State != "PENDING" || j.Reason != "BeginTime" || j.Comment != "burst: params=7B" ||
		j.Features != "a10g" || j.MemoryPerNodeMB != 500 || j.TimeLimit != 30*time.Minute || !j.Requeue ||
		j.Name != "train-7b" || j.User != "root" || j.Partition != "cloud" || !reflect.DeepEqual(j.GRESPerNode, want) {
		t.Errorf("Jobs(%d) = %+v", id, j)
	}
	if js, err := cl.Jobs(ctx, id, 999999); err != nil || len(js) != 1 || js[0].ID != id {
		t.Errorf("Jobs(%d, 999999) = %+v, %v; want job %d only", id, js, err, id)
	}
	st, err := cl.JobStates(ctx, slurm.JobFilter{IDs: []uint32{id, 999999}})
	if err != nil || len(st) != 1 || st[0] != (slurm.JobState{ID: id, State: "PENDING", Reason: "BeginTime", NodeCount: 1}) {
		t.Errorf("JobStates(%d, 999999) = %+v, %v", id, st, err)
	}
	if st, err := cl.JobStates(ctx, slurm.JobFilter{States: []string{"PENDING"}}); err != nil || len(st) != 1 || st[0].ID != id {
		t.Errorf("JobStates(PENDING) = %+v, %v", st, err)
	}

	// A job whose node is powering up: CONFIGURING (23.11+: RUNNING with
	// the CONFIGURING and POWER_UP_NODE flags), the node POWERING_UP.
	jc, err := c.Sbatch(ctx, "-w", "gpu-3", "--gres=gpu:a10g:1", "--wrap", "true")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitJobState(ctx, jc, "CONFIGURING"); err != nil {
		t.Fatal(err)
	}
	if j := oneJob(ctx, t, cl, mustID(t, jc)); j.State != "CONFIGURING" || !j.HasStateFlag("CONFIGURING") || j.Nodes != "gpu-3" {
		t.Errorf("configuring job: %+v", j)
	}
	// slurmctld flags the node once its power-save pass ran ResumeProgram
	for n := oneNode(ctx, t, cl, "gpu-3"); !n.HasFlag("POWERING_UP"); n = oneNode(ctx, t, cl, "gpu-3") {
		if ctx.Err() != nil || !n.HasFlag("POWERED_DOWN") {
			t.Fatalf("gpu-3 of a configuring job: %s, want it POWERED_DOWN, then POWERING_UP", n.StateString())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st, err := cl.JobStates(ctx, slurm.JobFilter{Nodes: []string{"gpu-3"}, States: []string{"CONFIGURING", "RUNNING"}}); err != nil ||
		len(st) != 1 || st[0].ID != mustID(t, jc) || st[0].State != "CONFIGURING" || st[0].Nodes != "gpu-3" {
		t.Errorf("JobStates(gpu-3) = %+v, %v", st, err)
	}
	if _, err := c.Run(ctx, "scancel", jc); err != nil {
		t.Fatal(err)
	}
	if ns, err := cl.Nodes(ctx, "big-1", "nope-1"); err != nil || len(ns) != 1 || ns[0].Name != "big-1" {
		t.Errorf("Nodes(big-1, nope-1) = %+v, %v", ns, err)
	}

	// Figures: mean latency of one client call on this machine.
	for _, call := range []struct {
		name string
		f    func() error
	}{
		{"Ping", func() error { return cl.Ping(ctx) }},
		{"Jobs", func() error { _, err := cl.Jobs(ctx); return err }},
		{"Jobs(id)", func() error { _, err := cl.Jobs(ctx, id); return err }},
		{"JobStates(id)", func() error { _, err := cl.JobStates(ctx, slurm.JobFilter{IDs: []uint32{id}}); return err }},
		{"Nodes", func() error { _, err := cl.Nodes(ctx); return err }},
		{"Nodes(name)", func() error { _, err := cl.Nodes(ctx, "big-1"); return err }},
	} {
		t0 := time.Now()
		for range 5 {
			if err := call.f(); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%s: %.1f ms per call (mean of 5)", call.name, float64(time.Since(t0).Microseconds())/5000)
	}
	if none, err := cl.Jobs(ctx, 999999); err != nil || len(none) != 0 {
		t.Errorf("Jobs(999999) = %v, %v; want none, nil", none, err)
	}

	// Hold with a reason, release, start now.
	if err := cl.Hold(ctx, id, "burst: budget exceeded"); err != nil {
		t.Fatal(err)
	}
	j = oneJob(ctx, t, cl, id)
	if j.Reason != "JobHeldAdmin" || j.AdminComment != "burst: budget exceeded" {
		t.Errorf("after Hold: reason %q admin comment %q", j.Reason, j.AdminComment)
	}
	if err := cl.Release(ctx, id); err != nil {
		t.Fatal(err)
	}
	// An admin comment on a job that is not held (what burst records before
	// it requeues a job after a spot interruption).
	note := "burst-requeue lost=gpu-2 run=2026-12-01T10:00:00Z restart=0: spot interruption"
	if err := cl.SetAdminComment(ctx, id, note); err != nil {
		t.Fatal(err)
	}
	if j = oneJob(ctx, t, cl, id); j.AdminComment != note || j.Reason == "JobHeldAdmin" {
		t.Errorf("after SetAdminComment: admin comment %q, reason %q", j.AdminComment, j.Reason)
	}
	if err := cl.SetAdminComment(ctx, id, "two\nlines"); err == nil {
		t.Error("SetAdminComment took a newline")
	}
	if err := cl.StartNow(ctx, id); err != nil {
		t.Fatal(err)
	}
	j = oneJob(ctx, t, cl, id)
	if j.Reason == "JobHeldAdmin" || j.Reason == "BeginTime" {
		t.Errorf("after Release+StartNow: still reason %q", j.Reason)
	}
	if err := cl.Requeue(ctx, 999999); !errors.Is(err, slurm.ErrNotFound) {
		t.Errorf("Requeue(999999) = %v, want ErrNotFound", err)
	}

	// Node updates, batched and read back.
	err = cl.UpdateNodes(ctx,
		slurm.NodeUpdate{Names: []string{"big-1"}, State: "DRAIN", Reason: "capacity test"},
		slurm.NodeUpdate{Names: []string{"big-1"}, Comment: "i-0abc", Extra: `{"instance_id":"i-0abc"}`},
		slurm.NodeUpdate{Names: []string{"gpu-2"}, Comment: "i-0abc", Extra: `{"instance_id":"i-0abc"}`},
	)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cl.Nodes(ctx, "big-1", "gpu-2")
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 {
		t.Fatalf("Nodes = %+v, want big-1 and gpu-2", nodes)
	}
	for _, n := range nodes {
		if n.Comment != "i-0abc" || n.Extra != `{"instance_id":"i-0abc"}` || !n.HasFlag("CLOUD") || !n.HasFlag("POWERED_DOWN") {
			t.Errorf("node %s after update: %+v", n.Name, n)
		}
		if n.Name == "big-1" {
			if !n.HasFlag("DRAIN") || n.Reason != "capacity test" || slurm.GPUs(n.GRES) != 8 || n.GRES[0].Type != "a100" ||
				!reflect.DeepEqual(n.Features, []string{"p4d.24xlarge", "a100"}) {
				t.Errorf("node big-1 after DRAIN: %+v", n)
			}
		}
	}
	if err := cl.UpdateNodes(ctx, slurm.NodeUpdate{Names: []string{"big-1"}, State: "UNDRAIN"}); err != nil {
		t.Fatal(err)
	}
	if n := oneNode(ctx, t, cl, "big-1"); n.HasFlag("DRAIN") {
		t.Errorf("big-1 still draining after UNDRAIN: %s", n.StateString())
	}
	err = cl.UpdateNodes(ctx, slurm.NodeUpdate{Names: []string{"nope-1"}, State: "DRAIN", Reason: "x"})
	var ce *slurm.CommandError
	var ae *rest.APIError
	switch {
	case !errors.Is(err, slurm.ErrNotFound):
		t.Errorf("UpdateNodes(nope-1) = %v, want ErrNotFound", err)
	case backend == "cli" || !v.AtLeast(23, 2): // 22.05's REST API cannot update nodes: scontrol does
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "scontrol update nodename=nope-1") {
			t.Errorf("UpdateNodes(nope-1) = %v, want a CommandError naming the command", err)
		}
	default:
		if !errors.As(err, &ae) || ae.Method != "POST" || !strings.HasSuffix(ae.Endpoint, "/node/nope-1") || !strings.Contains(err.Error(), "Invalid node name") {
			t.Errorf("UpdateNodes(nope-1) = %v, want an APIError naming POST .../node/nope-1 and Slurm's error", err)
		}
	}
	t.Logf("unknown node error: %v", err)
	if ns, err := cl.Nodes(ctx, "nope-1"); err != nil || len(ns) != 0 {
		t.Errorf("Nodes(nope-1) = %+v, %v; want none, nil", ns, err)
	}
	if err := cl.Hold(ctx, 999999, ""); !errors.Is(err, slurm.ErrNotFound) {
		t.Errorf("Hold(999999) = %v, want ErrNotFound", err)
	}
	if err := cl.Signal(ctx, 999999, "USR1", false); !errors.Is(err, slurm.ErrNotFound) {
		t.Errorf("Signal(999999) = %v, want ErrNotFound", err)
	}
	// several nodes in one update
	if err := cl.UpdateNodes(ctx, slurm.NodeUpdate{Names: []string{"gpu-5", "gpu-6"}, Comment: "pair"}); err != nil {
		t.Fatal(err)
	}
	if ns, err := cl.Nodes(ctx, "gpu-5", "gpu-6"); err != nil || len(ns) != 2 || ns[0].Comment != "pair" || ns[1].Comment != "pair" {
		t.Errorf("Nodes(gpu-5, gpu-6) after one update of both = %+v, %v", ns, err)
	}

	// Signal and requeue a running job on a booted node.
	if err := cl.UpdateNodes(ctx, slurm.NodeUpdate{Names: []string{"big-1"}, State: "POWER_UP"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartSlurmd(ctx, "big-1", netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitNodeState(ctx, "big-1", "idle"); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(c.Dir(), "work", "usr1")
	js, err = c.Sbatch(ctx, "-w", "big-1", "--requeue", "--wrap", "trap 'echo got >> "+mark+"' USR1; while :; do sleep 0.2; done")
	if err != nil {
		t.Fatal(err)
	}
	rid := mustID(t, js)
	if _, err := c.WaitJobState(ctx, js, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // let the batch shell install its trap
	if err := cl.Signal(ctx, rid, "SIGUSR1", true); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil {
		if b, _ := os.ReadFile(mark); strings.Contains(string(b), "got") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatal("batch shell never got USR1")
	}
	if err := cl.Requeue(ctx, rid); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitJobState(ctx, js, "PENDING"); err != nil {
		t.Fatal(err)
	}
	if j := oneJob(ctx, t, cl, rid); j.RestartCount != 1 {
		t.Errorf("after Requeue: restart count %d, want 1", j.RestartCount)
	}
	if err := cl.StartNow(ctx, rid); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitJobState(ctx, js, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	if j := oneJob(ctx, t, cl, rid); j.Nodes != "big-1" || j.BatchHost != "big-1" {
		t.Errorf("running job nodes %q batch host %q, want big-1", j.Nodes, j.BatchHost)
	}
	if st, err := cl.JobStates(ctx, slurm.JobFilter{Nodes: []string{"big-1"}, States: []string{"RUNNING"}}); err != nil ||
		len(st) != 1 || st[0].ID != rid || st[0].Nodes != "big-1" {
		t.Errorf("JobStates(big-1, RUNNING) = %+v, %v", st, err)
	}

	// Power down: ASAP lets the job run on, FORCE ends it now.
	if err := cl.UpdateNodes(ctx, slurm.NodeUpdate{Names: []string{"big-1"}, State: "POWER_DOWN_ASAP", Reason: "burst: test asap"}); err != nil {
		t.Fatal(err)
	}
	if n := oneNode(ctx, t, cl, "big-1"); !n.HasFlag("POWER_DOWN") && !n.HasFlag("POWER_DRAIN") && !n.HasFlag("DRAIN") {
		t.Errorf("big-1 after POWER_DOWN_ASAP: %s, want it draining to power down", n.StateString())
	}
	if j := oneJob(ctx, t, cl, rid); j.State != "RUNNING" {
		t.Errorf("job %d after POWER_DOWN_ASAP of its node: %s, want it still RUNNING", rid, j.State)
	}
	if err := cl.UpdateNodes(ctx, slurm.NodeUpdate{Names: []string{"big-1"}, State: "POWER_DOWN_FORCE", Reason: "burst: test force"}); err != nil {
		t.Fatal(err)
	}
	for n := oneNode(ctx, t, cl, "big-1"); !n.HasFlag("POWERING_DOWN") && !n.HasFlag("POWERED_DOWN"); n = oneNode(ctx, t, cl, "big-1") {
		if ctx.Err() != nil {
			t.Fatalf("big-1 after POWER_DOWN_FORCE: %s, want POWERING_DOWN", n.StateString())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if j := oneJob(ctx, t, cl, rid); j.State == "RUNNING" {
		t.Errorf("job %d still RUNNING after POWER_DOWN_FORCE of its node", rid)
	}
}

func mustID(t *testing.T, s string) uint32 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(n)
}

func oneJob(ctx context.Context, t *testing.T, cl slurm.Client, id uint32) slurm.Job {
	t.Helper()
	jobs, err := cl.Jobs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 {
		t.Fatalf("Jobs(%d) returned %d jobs", id, len(jobs))
	}
	return jobs[0]
}

func oneNode(ctx context.Context, t *testing.T, cl slurm.Client, name string) slurm.Node {
	t.Helper()
	nodes, err := cl.Nodes(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 {
		t.Fatalf("Nodes(%s) returned %d nodes", name, len(nodes))
	}
	return nodes[0]
}

// captureREST asks the cluster's slurmrestd (JWT, the data version burst
// speaks on the release) what burst asks it, errors included, and returns
// each answer's body by fixture name, and "name status" lines.
func captureREST(t *testing.T, c *harness.Cluster, ctx context.Context, v slurm.Version) (map[string][]byte, []byte) {
	t.Helper()
	key, err := os.ReadFile(c.JWTKeyPath())
	if err != nil {
		t.Fatal(err)
	}
	dv := c.Slurm().RestVersion()
	slash := "/"
	if dv == "v0.0.38" {
		slash = ""
	}
	files := map[string][]byte{}
	var status strings.Builder
	do := func(name, method, path, body string, signKey []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, c.RestURL()+"/slurm/"+dv+"/"+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-SLURM-USER-NAME", "root")
		req.Header.Set("X-SLURM-USER-TOKEN", rest.MintToken(signKey, "root", time.Now(), time.Minute))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
		fmt.Fprintf(&status, "%s %d %s %s\n", name, resp.StatusCode, method, req.URL.RequestURI())
	}
	do("rest-ping.json", "GET", "ping"+slash, "", key)
	do("rest-jobs.json", "GET", "jobs"+slash, "", key)
	do("rest-job.json", "GET", "job/6", "", key)
	do("rest-job-unknown.json", "GET", "job/999999", "", key)
	do("rest-nodes.json", "GET", "nodes"+slash, "", key)
	do("rest-node.json", "GET", "node/big-1", "", key)
	do("rest-node-unknown.json", "GET", "node/nope-1", "", key)
	do("rest-signal-unknown.json", "DELETE", "job/999999?signal=USR1", "", key)
	do("rest-bad-token.json", "GET", "job/6", "", []byte("not-the-cluster-key-0123456789ab"))
	if v.AtLeast(23, 2) {
		do("rest-update-unknown-node.json", "POST", "node/nope-1", `{"comment":"x"}`, key)
		do("rest-update-unknown-field.json", "POST", "node/big-1", `{"comment":"i-0abc","bogus":"x"}`, key)
	}
	if v.AtLeast(24, 5) {
		do("rest-jobs-state.json", "GET", "jobs/state/", "", key)
	}
	return files, []byte(status.String())
}
