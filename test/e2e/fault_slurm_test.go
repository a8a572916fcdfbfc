package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// Production failure modes that involve Slurm (issue 23): they run on
// every Slurm release (cli). Named TestSlurmFault* so that the +rest runs
// (REST_TESTS: TestFault.*) leave them out.

// TestSlurmFaultBootDeath: the first instance burst launches dies while it
// boots (its host fails: Server.InternalError) before it becomes the
// node. Slurm's resume of the node fails, the job goes back to the queue
// and then runs on a second instance and completes; the dead instance is
// never a node.
func TestSlurmFaultBootDeath(t *testing.T) {
	var once sync.Once
	var dead string
	var mu sync.Mutex
	s := faultStart(t, 0, stack.Options{Boot: func(ctx context.Context, s *stack.Stack, in ec2emu.Instance, node string) error {
		first := false
		once.Do(func() { first = true })
		if !first {
			return stack.BootstrapNode(ctx, s, in, node)
		}
		mu.Lock()
		dead = in.ID
		mu.Unlock()
		s.Events.Add(node, "host failed during boot", in.ID)
		return s.Emu.Crash(in.ID)
	}})
	id := sbatch(t, s, "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 1")
	// Slurm gives a node that never registers up after ResumeTimeout (90 s
	// here); 24.11 and later then hold the requeued job ~120 s
	waitJob(t, s, id, 6*time.Minute, "COMPLETED")
	mu.Lock()
	d := dead
	mu.Unlock()
	in, ok := s.Emu.Instance(d)
	if !ok || in.StateReasonCode != "Server.InternalError" {
		t.Fatalf("no instance died during boot (%+v); the test tested nothing", in)
	}
	n := 0
	for _, x := range s.Emu.Instances() {
		if x.Tags[ec2p.TagJobID] == id || ec2p.NodeOf(x.Tags) == ec2p.NodeOf(in.Tags) {
			n++
		}
	}
	if n < 2 {
		t.Errorf("job %s completed on %d instances; want the dead one and a second", id, n)
	}
	t.Logf("job %s: restarts %d; the dead instance %s (node %s)", id, restarts(s, id), d, ec2p.NodeOf(in.Tags))
	assertClean(t, s, time.Minute)
}

// TestSlurmFaultRestartDuringCreateFleet: slurmctld is restarted while
// burst-resume's CreateFleet is in flight (EC2 has made the instance, its
// answer not yet back). The instance becomes the node, the job completes,
// nothing is launched twice.
func TestSlurmFaultRestartDuringCreateFleet(t *testing.T) {
	s := faultStart(t, 0, stack.Options{})
	hold := s.Emu.HoldCalls("CreateFleet")
	defer hold.Release()
	id := sbatch(t, s, "--gres=gpu:1", "--constraint=l4", "--wrap", "sleep 2")
	select {
	case <-hold.Arrived():
	case <-time.After(90 * time.Second):
		t.Fatal("no CreateFleet within 90 s")
	}
	restartSlurmctld(t, s)
	hold.Release()
	waitJob(t, s, id, 4*time.Minute, "COMPLETED")
	t.Logf("job %s: restarts %d, %d instances", id, restarts(s, id), len(s.Emu.Instances()))
	assertClean(t, s, time.Minute)
}

// TestSlurmFaultPartition: the node running a job is cut off the network
// (slurmctld, the sizer, everything) for 20 s and comes back. The job
// completes (or is requeued by Slurm and completes), the agent's buffered
// reports reach the sizer, and nothing is left running.
func TestSlurmFaultPartition(t *testing.T) {
	s := faultStart(t, 0, stack.Options{Configure: func(c *config.Config) {
		c.Agent.ReportInterval = config.D(time.Second)
	}})
	id := sbatch(t, s, "--gres=gpu:1", "--constraint=l4", "--wrap", "sleep 40")
	waitJob(t, s, id, 90*time.Second, "RUNNING")
	node := jobNow(t, s, id).Nodes
	heal, err := s.Cluster.Partition(context.Background(), node)
	if err != nil {
		t.Fatal(err)
	}
	s.Events.Add(node, "partitioned", "")
	before := metric(t, s, `burst_sizer_report_records_total{result="accepted"}`)
	time.Sleep(20 * time.Second) // the partition's length, not a wait for anything
	during := metric(t, s, `burst_sizer_report_records_total{result="accepted"}`)
	if err := heal(); err != nil {
		t.Fatal(err)
	}
	s.Events.Add(node, "partition healed", "")
	if during-before > 3 {
		t.Errorf("the sizer accepted %.0f records from a partitioned node", during-before)
	}
	// the agent's buffer: the partition's samples arrive after it heals
	eventually(t, 60*time.Second, "the partition's reports delivered", func() bool {
		return metric(t, s, `burst_sizer_report_records_total{result="accepted"}`) >= during+15
	})
	waitJob(t, s, id, 5*time.Minute, "COMPLETED")
	t.Logf("job %s: restarts %d", id, restarts(s, id))
	assertClean(t, s, time.Minute)
}
