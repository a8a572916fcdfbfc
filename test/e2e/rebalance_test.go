package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/interruption"
	"github.com/burst-hpc/burst/test/stack"
)

// TestRebalanceDrain: EC2 recommends rebalancing the instance of a node
// running the example job, which allows an early checkpoint
// (rebalance=checkpoint). The node's agent drains the node (no new job
// starts there: the next job gets a node of its own) and signals the job's
// batch shell, which takes one early checkpoint; the sizer, which gets the
// same recommendation through EventBridge, leaves it to the agent. The job
// finishes on that node undisturbed (never requeued), and the drained node
// is released at its end, never kept warm.
func TestRebalanceDrain(t *testing.T) {
	s := start(t, stack.Options{})
	ctx := context.Background()
	id := sbatchTrain(t, s, 20, 5, "--comment=burst: workload=train checkpoint=1m rebalance=checkpoint")
	waitJob(t, s, id, 90*time.Second, "RUNNING")
	logPath := filepath.Join(s.Cluster.Dir(), "work", "train-"+id+".out")
	eventually(t, 60*time.Second, "3 training steps", func() bool { return strings.Contains(readFile(logPath), "step 3 done") })
	node := jobNow(t, s, id).Nodes
	inst := nodeInstance(s, node)
	if err := s.Emu.Rebalance(inst.ID); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	sl := slurmClient(s)
	eventually(t, 30*time.Second, "the node drained", func() bool {
		ns, err := sl.Nodes(ctx, node)
		return err == nil && len(ns) == 1 && ns[0].HasFlag("DRAIN") && ns[0].Reason == interruption.RebalanceReason(inst.ID)
	})
	drained := time.Since(t0)
	eventually(t, 30*time.Second, "the early checkpoint", func() bool { return strings.Contains(readFile(logPath), "(rebalance)") })
	// a new job does not start on the drained node
	other := sbatch(t, s, "--constraint=a10g", "--gres=gpu:1", "--wrap", "sleep 1")
	waitJob(t, s, other, 90*time.Second, "RUNNING", "COMPLETED")
	if n := jobNow(t, s, other).Nodes; n == node {
		t.Errorf("job %s started on the drained node %s", other, n)
	}
	waitJob(t, s, id, 2*time.Minute, "COMPLETED")
	j := jobNow(t, s, id)
	if j.RestartCount != 0 || j.Nodes != node {
		t.Errorf("job %s: restarts %d on %s, want 0 on %s (undisturbed)", id, j.RestartCount, j.Nodes, node)
	}
	text := readFile(logPath)
	if n := len(regexp.MustCompile(`early checkpoint at step \d+ \(rebalance\)`).FindAllString(text, -1)); n != 1 || !strings.Contains(text, "done: 20 steps, 0 redone") ||
		strings.Contains(text, "terminated") {
		t.Errorf("want one early checkpoint and an undisturbed run to the end, got %d:\n%s", n, text)
	}
	// the sizer heard it through EventBridge too and left it to the agent
	eventually(t, 30*time.Second, "the sizer's EventBridge reading", func() bool {
		return metric(t, s, `burst_sizer_ec2_events_total{kind="rebalance",outcome="agent"}`) == 1
	})
	if v := metric(t, s, `burst_sizer_ec2_events_total{kind="rebalance",outcome="handled"}`); v > 0 {
		t.Errorf("the sizer acted on a rebalance its agent handled (%v)", v)
	}
	eventually(t, 30*time.Second, "the drained node's instance released", func() bool {
		in, _ := s.Emu.Instance(inst.ID)
		return in.State == "terminated" || in.State == "shutting-down"
	})
	for _, l := range strings.Split(readFile(s.LogPath()), "\n") {
		var e struct {
			Msg  string `json:"msg"`
			Node string `json:"node"`
		}
		if json.Unmarshal([]byte(l), &e) == nil && e.Msg == "keeping node warm for a waiting job" && e.Node == node {
			t.Errorf("the drained node %s was kept warm: %s", node, l)
		}
	}
	t.Logf("rebalance recommendation -> node drained %.1f s", drained.Seconds())
}
