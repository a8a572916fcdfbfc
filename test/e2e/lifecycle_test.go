package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// liveInstances returns the pending or running instances of the stack's
// cluster.
func liveInstances(s *stack.Stack) []ec2emu.Instance {
	var out []ec2emu.Instance
	for _, in := range s.Instances() { // of this stack's cluster
		if in.State == "pending" || in.State == "running" {
			out = append(out, in)
		}
	}
	return out
}

// TestSingleGPUJob: sbatch --gres=gpu:1 makes burst launch one spot instance
// with the expected tags, the job runs on it and completes, the instance is
// terminated right after, and the node is back to idle~.
func TestSingleGPUJob(t *testing.T) {
	s := start(t, stack.Options{})
	id := sbatch(t, s, "--gres=gpu:1", "--account=demo", "--comment=burst: params=1B dataset=20GB workload=finetune",
		"--wrap", "echo node=$SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES; sleep 2")
	waitJob(t, s, id, 90*time.Second, "RUNNING", "COMPLETED")
	waitJob(t, s, id, 60*time.Second, "COMPLETED")

	all := s.Emu.Instances()
	if len(all) != 1 {
		t.Fatalf("want exactly 1 instance launched, got %d: %+v", len(all), all)
	}
	in := all[0]
	node := in.Tags[ec2p.TagNode]
	want := map[string]string{ec2p.TagCluster: "demo", ec2p.TagJobID: id, ec2p.TagAccount: "demo", ec2p.TagCapacity: "spot"}
	for k, v := range want {
		if in.Tags[k] != v {
			t.Errorf("tag %s = %q, want %q (tags %v)", k, in.Tags[k], v, in.Tags)
		}
	}
	if in.Lifecycle != "spot" || !strings.HasPrefix(node, "l4-") && !strings.HasPrefix(node, "a10g-") {
		t.Errorf("instance %s: lifecycle %s node %q", in.ID, in.Lifecycle, node)
	}
	out, err := os.ReadFile(s.Cluster.Dir() + "/work/slurm-" + id + ".out")
	if err != nil || !strings.Contains(string(out), "node="+node+" gpus=0") {
		t.Errorf("job output %q (err %v) does not show it ran on %s with its GPU", out, err, node)
	}
	// event-driven release: terminated within seconds, node powered down
	eventually(t, 30*time.Second, "instance terminated", func() bool { return len(liveInstances(s)) == 0 })
	waitNode(t, s, node, 60*time.Second, "idle~")
	if n := s.Emu.CallCount("TerminateInstances"); n == 0 {
		t.Error("no TerminateInstances call recorded")
	}
}

// TestTwoNodeJob: sbatch -N2 gets both nodes from one all-or-nothing launch
// and srun runs on both.
func TestTwoNodeJob(t *testing.T) {
	s := start(t, stack.Options{})
	id := sbatch(t, s, "-N2", "--gres=gpu:1", "--constraint=l4", "--wrap", "srun -l printenv SLURMD_NODENAME; sleep 1")
	waitJob(t, s, id, 120*time.Second, "COMPLETED")
	all := s.Emu.Instances()
	if len(all) != 2 {
		t.Fatalf("want 2 instances, got %d", len(all))
	}
	if all[0].Zone != all[1].Zone {
		t.Errorf("all-or-nothing launch spans zones %s and %s", all[0].Zone, all[1].Zone)
	}
	if n := s.Emu.CallCount("CreateFleet"); n != 1 {
		t.Errorf("want one CreateFleet for the 2-node job, got %d", n)
	}
	out, _ := os.ReadFile(s.Cluster.Dir() + "/work/slurm-" + id + ".out")
	if strings.Count(string(out), ": l4-") != 2 {
		t.Errorf("srun did not run on 2 nodes:\n%s", out)
	}
	eventually(t, 30*time.Second, "instances terminated", func() bool { return len(liveInstances(s)) == 0 })
}

// TestAllOrNothingFailure: with capacity for only one l4 instance in any
// pool, a 2-node job gets no instance at all, its nodes go back with the
// reason, and the job is requeued (pending again).
func TestAllOrNothingFailure(t *testing.T) {
	s := start(t, stack.Options{})
	for _, typ := range []string{"g6.xlarge", "g6.2xlarge"} {
		for _, z := range []string{"us-east-1a", "us-east-1b"} {
			s.Emu.SetCapacity(typ, z, "spot", 1)
			s.Emu.SetCapacity(typ, z, "on-demand", 1)
		}
	}
	id := sbatch(t, s, "-N2", "--gres=gpu:1", "--constraint=l4", "--wrap", "srun hostname")
	var reason string
	eventually(t, 60*time.Second, "a node handed back with a burst reason", func() bool {
		out, _ := s.Cluster.Run(context.Background(), "scontrol", "show", "node", "l4-1")
		if i := strings.Index(out, "Reason=burst:"); i >= 0 {
			reason = strings.SplitN(out[i:], "\n", 2)[0]
			return true
		}
		return false
	})
	if !strings.Contains(reason, "InsufficientInstanceCapacity") {
		t.Errorf("reason %q does not say why", reason)
	}
	if live := liveInstances(s); len(live) != 0 {
		t.Fatalf("all-or-nothing left %d instances running", len(live))
	}
	// Slurm requeues the job through COMPLETING (its allocation is torn
	// down first); on a loaded machine that can take a moment.
	requeued := func(st string, err error) bool { return err == nil && (st == "PENDING" || st == "CONFIGURING") }
	st, r, err := s.Cluster.JobState(context.Background(), id)
	for end := time.Now().Add(30 * time.Second); !requeued(st, err) && time.Now().Before(end); {
		time.Sleep(200 * time.Millisecond)
		st, r, err = s.Cluster.JobState(context.Background(), id)
	}
	if !requeued(st, err) {
		t.Fatalf("job %s: state %s reason %s err %v; want it requeued", id, st, r, err)
	}
	s.Cluster.Run(context.Background(), "scancel", id)
}

// TestResumeTwice: running burst-resume again for nodes it already launched
// creates no second instance.
func TestResumeTwice(t *testing.T) {
	s := start(t, stack.Options{})
	if _, err := s.Cluster.Run(context.Background(), "scontrol", "update", "nodename=a10g-2", "state=power_up"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "an instance for a10g-2", func() bool { return len(s.Emu.Instances()) == 1 })
	cmd := s.Cluster.Command(context.Background(), binDir+"/burst-resume", "a10g-2")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("second burst-resume: %v\n%s", err, out)
	}
	if n := len(s.Emu.Instances()); n != 1 {
		t.Fatalf("second resume made %d instances, want 1", n)
	}
}
