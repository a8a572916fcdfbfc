package slurm_test

import (
	"context"
	"errors"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/test/harness"
)

var update = flag.Bool("update", false, "rewrite testdata/*-22.05.json from the real cluster (TestClientAgainstSlurm)")

const e2eFragment = `
NodeName=gpu-[1-2] CPUs=1 RealMemory=1000 State=CLOUD Feature=g5.xlarge,a10g Gres=gpu:a10g:2
NodeName=big-1 CPUs=1 RealMemory=1000 State=CLOUD Feature=p4d.24xlarge,a100 Gres=gpu:a100:8
PartitionName=cloud Nodes=gpu-[1-2],big-1 Default=YES MaxTime=INFINITE State=UP
SuspendTime=600
`

const e2eGres = "AutoDetect=off\nNodeName=gpu-[1-2] Name=gpu Type=a10g File={{DEVDIR}}/nvidia[0-1]\nNodeName=big-1 Name=gpu Type=a100 File={{DEVDIR}}/nvidia[0-7]\n"

func startCluster(t *testing.T) *harness.Cluster {
	return harness.New(t, harness.Options{Fragment: e2eFragment, GresConf: e2eGres, GPUs: 8})
}

func capture(t *testing.T, c *harness.Cluster, ctx context.Context, name string, args ...string) []byte {
	t.Helper()
	out, err := c.Run(ctx, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(out)
}

func TestCaptureSamples(t *testing.T) {
	if !*update {
		t.Skip("only with -update")
	}
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.Sbatch(ctx, "-J", "train-7b", "--gres=gpu:a10g:2", "--comment", "burst: params=7B ckpt=/fsx/ck", "-C", "a10g", "--mem=500", "-t", "30", "--requeue", "--begin=now+1hour", "--wrap", "sleep 100"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sbatch(ctx, "-J", "gpus-per-job", "--gpus=2", "--mem-per-cpu=100", "--hold", "--no-requeue", "--wrap", "true"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, "scontrol", "update", "nodename=gpu-2", "state=POWER_UP"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartSlurmd(ctx, "gpu-2", netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitNodeState(ctx, "gpu-2", "idle"); err != nil {
		t.Fatal(err)
	}
	j, err := c.Sbatch(ctx, "-J", "done", "-w", "gpu-2", "--gres=gpu:1", "--wrap", "true")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitJobState(ctx, j, "COMPLETED"); err != nil {
		t.Fatal(err)
	}
	r, err := c.Sbatch(ctx, "-J", "running", "-w", "gpu-2", "--gres=gpu:a10g:1", "--wrap", "sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitJobState(ctx, r, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, "scontrol", "update", "nodename=big-1", "state=DRAIN", "reason=capacity test"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, "scontrol", "update", "nodename=big-1", "comment=i-0abc", "extra={\"instance_id\":\"i-0abc\"}"); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"squeue-22.05.json":            capture(t, c, ctx, "squeue", "--json"),
		"sinfo-22.05.json":             capture(t, c, ctx, "sinfo", "--json"),
		"scontrol-show-node-22.05.txt": capture(t, c, ctx, "scontrol", "show", "node", "-o"),
	} {
		if err := os.WriteFile(filepath.Join("testdata", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestClientAgainstSlurm(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	cl := slurm.NewScontrol(slurm.ScontrolOptions{Conf: c.ConfPath(), Timeout: 20 * time.Second})
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}

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
	// Figures: mean latency of one client call on this machine.
	for _, call := range []struct {
		name string
		f    func() error
	}{
		{"Ping", func() error { return cl.Ping(ctx) }},
		{"Jobs", func() error { _, err := cl.Jobs(ctx); return err }},
		{"Nodes", func() error { _, err := cl.Nodes(ctx); return err }},
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
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "scontrol update nodename=nope-1") || !errors.Is(err, slurm.ErrNotFound) {
		t.Errorf("UpdateNodes(nope-1) = %v, want a CommandError naming the command", err)
	}
	t.Logf("unknown node error: %v", err)

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
