package slurm_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/rest"
	"github.com/burst-hpc/burst/test/harness"
)

// backends are the slurm.Client implementations every real-Slurm test of
// the contract runs: the command line, and slurmrestd (with JWT) whose
// fallback for what a release's REST API cannot do is the command line.
var backends = []string{"cli", "rest"}

// newBackend returns the client of backend for cluster c.
func newBackend(t testing.TB, c *harness.Cluster, backend string, observe func(slurm.Call)) slurm.Client {
	t.Helper()
	return newBackendDetecting(t, c, backend, observe, nil)
}

// newBackendDetecting is newBackend with the REST client's own detection
// cache (nil: the process's).
func newBackendDetecting(t testing.TB, c *harness.Cluster, backend string, observe func(slurm.Call), det *rest.Detections) slurm.Client {
	t.Helper()
	cli := slurm.NewScontrol(slurm.ScontrolOptions{Conf: c.ConfPath(), BinDir: c.ClientBin(), Timeout: 20 * time.Second, Observe: observe})
	if backend == "cli" {
		return cli
	}
	rc, err := rest.New(rest.Options{URL: "unix:" + c.RestSocket(), User: "root", JWTKeyFile: c.JWTKeyPath(), Fallback: cli, Observe: observe, Timeout: 20 * time.Second, Detections: det})
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
		j.Name != "train-7b" || j.User != c.User().Name || j.Partition != "cloud" || !reflect.DeepEqual(j.GRESPerNode, want) {
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
