package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/agent/gpu/sim"
	"github.com/burst-hpc/burst/internal/bootstrap"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// injectGPUFaults writes the node's simulated-GPU fault file (root-owned,
// in the node's run directory: what the agent accepts, and nothing a job
// user can write).
func injectGPUFaults(t *testing.T, s *stack.Stack, node, faults string) {
	t.Helper()
	p := filepath.Join(s.RunDir(node), bootstrap.SimFaultFileName)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(faults), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

// TestGPUHealthXid79: the example training job runs on a node; its GPU 0
// reports Xid 79 (fallen off the bus). burst-agent drains the node with
// the GPU in the reason, checkpoint-signals and requeues the job, and
// hands the node back: its instance is terminated, never reused, and the
// job finishes from its checkpoint on a new instance. The sizer records
// the event with the instance's type and zone, and counts it in its
// metric; spend equals the emulator's bill (the ledger check).
func TestGPUHealthXid79(t *testing.T) {
	s := start(t, stack.Options{})
	ctx := context.Background()
	id := sbatchTrain(t, s, 20, 5)
	waitJob(t, s, id, 90*time.Second, "RUNNING")
	logPath := filepath.Join(s.Cluster.Dir(), "work", "train-"+id+".out")
	eventually(t, 60*time.Second, "3 training steps", func() bool { return strings.Contains(readFile(logPath), "step 3 done") })
	node := jobNow(t, s, id).Nodes
	first := nodeInstance(s, node)
	if first.ID == "" {
		t.Fatalf("node %s has no live instance", node)
	}
	injectGPUFaults(t, s, node, `{"faults":[{"kind":"xid","gpu":0,"xid":79}]}`)
	want := "gpu: Xid 79 on GPU 0 (" + sim.BusID(0) + ")"
	sl := slurmClient(s)
	// the reason shows from the drain until the node is powered down
	eventually(t, 60*time.Second, "the node drained with the GPU fault as its reason", func() bool {
		ns, err := sl.Nodes(ctx, node)
		return err == nil && len(ns) == 1 && ns[0].Reason == want && (ns[0].HasFlag("DRAIN") || ns[0].HasFlag("POWERING_DOWN") || ns[0].HasFlag("POWER_DOWN"))
	})
	eventually(t, 60*time.Second, "the job requeued by burst-agent", func() bool { return jobNow(t, s, id).RestartCount == 1 })
	if j := jobNow(t, s, id); !strings.Contains(j.AdminComment, want) {
		t.Errorf("the job's note %q does not say why it was requeued", j.AdminComment)
	}
	eventually(t, 60*time.Second, "the faulty instance terminated", func() bool {
		in, _ := s.Emu.Instance(first.ID)
		return in.State == "terminated" || in.State == "shutting-down"
	})
	waitJob(t, s, id, 3*time.Minute, "COMPLETED")
	text := readFile(logPath)
	if !strings.Contains(text, "on signal; wrote") || !strings.Contains(text, "resumed from checkpoint") {
		t.Errorf("the job did not checkpoint on the signal and resume from it:\n%s", text)
	}
	if m := regexp.MustCompile(`done: 20 steps, (\d+) redone`).FindStringSubmatch(text); m == nil {
		t.Errorf("the job did not finish all steps:\n%s", text)
	} else if n, _ := strconv.Atoi(m[1]); n > 5 {
		t.Errorf("redid %d steps, more than one checkpoint interval", n)
	}
	// the relaunch ran on another instance; the faulty one never came back
	all := s.Emu.Instances()
	if len(all) < 2 {
		t.Fatalf("want a replacement instance, got %d instance(s)", len(all))
	}
	for _, in := range liveInstances(s) {
		if in.ID == first.ID {
			t.Errorf("the faulty instance %s is live again", in.ID)
		}
	}
	// the sizer's record and metric
	c, err := s.SizerClient(s.Token)
	if err != nil {
		t.Fatal(err)
	}
	var row sizerapi.GPUHealthRow
	eventually(t, 30*time.Second, "the sizer to record the GPU health event", func() bool {
		v, err := c.Fleet(ctx)
		if err != nil {
			return false
		}
		for _, r := range v.GPUHealth {
			if r.InstanceID == first.ID && r.Event.Kind == "xid" && r.Event.Xid == 79 {
				row = r
				return true
			}
		}
		return false
	})
	if row.Node != node || row.InstanceType != first.InstanceType || row.Zone != first.Zone || row.Event.Action != "replace" || row.Event.Reason != want || row.Event.GPU != 0 {
		t.Errorf("recorded event %+v, want node %s, %s in %s, replace with reason %q", row, node, first.InstanceType, first.Zone, want)
	}
	if v := metric(t, s, `burst_sizer_gpu_health_events_total{action="replace",event="xid_79"}`); v != 1 {
		t.Errorf("burst_sizer_gpu_health_events_total{xid_79, replace} = %v, want 1", v)
	}
	eventually(t, 60*time.Second, "every instance released", func() bool { return len(liveInstances(s)) == 0 })
}

// TestGPUHealthBootGate: the first instance launched for a job has fewer
// GPUs than its type (a fault injected for that instance only, before it
// boots). The bootstrap's GPU gate refuses it before slurmd registers: the
// node is handed back with the reason, the instance terminated, and the
// job runs on a new, healthy instance.
func TestGPUHealthBootGate(t *testing.T) {
	var mu sync.Mutex
	var bad string
	s := start(t, stack.Options{Boot: func(ctx context.Context, s *stack.Stack, in ec2emu.Instance, node string) error {
		mu.Lock()
		first := bad == ""
		if first {
			bad = in.ID
		}
		mu.Unlock()
		if first {
			dir := s.RunDir(node)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			f := `{"faults":[{"kind":"gpu_count","count":0,"instance":"` + in.ID + `"}]}`
			if err := os.WriteFile(filepath.Join(dir, bootstrap.SimFaultFileName), []byte(f), 0o644); err != nil {
				return err
			}
		}
		return stack.BootstrapNode(ctx, s, in, node)
	}})
	ctx := context.Background()
	id := sbatch(t, s, "--constraint=a10g", "--gres=gpu:1", "--account=demo", "--wrap", "sleep 2")
	sl := slurmClient(s)
	want := "burst bootstrap: " + bootstrap.StepGPUGate + ": gpu: gpu_count (0 GPUs, the class has 1)"
	var node string
	eventually(t, 90*time.Second, "the node handed back by the GPU gate", func() bool {
		mu.Lock()
		b := bad
		mu.Unlock()
		if b == "" {
			return false
		}
		in, _ := s.Emu.Instance(b)
		node = ec2p.NodeOf(in.Tags)
		if node == "" {
			return false
		}
		ns, err := sl.Nodes(ctx, node)
		return err == nil && len(ns) == 1 && ns[0].Reason == want
	})
	eventually(t, 60*time.Second, "the refused instance terminated", func() bool {
		in, _ := s.Emu.Instance(bad)
		return in.State == "terminated" || in.State == "shutting-down"
	})
	// up to slurm.resume_timeout more (the first allocation's
	// PrologSlurmctld waits on), and 24.11 and later hold a requeued job
	// for its requeue delay (~120 s): see TestFaultSpotOnlyDry
	waitJob(t, s, id, 5*time.Minute, "COMPLETED")
	if all := s.Emu.Instances(); len(all) < 2 {
		t.Fatalf("want a replacement instance, got %d", len(all))
	}
	for _, in := range liveInstances(s) {
		if in.ID == bad {
			t.Errorf("the refused instance %s is live", bad)
		}
	}
	eventually(t, 60*time.Second, "every instance released", func() bool { return len(liveInstances(s)) == 0 })
}
