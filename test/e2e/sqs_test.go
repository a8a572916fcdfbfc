package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/interruption/interruptiontest"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// TestSQSDeadAgent: the agent on a node running the example job is dead
// (killed); EC2 sends the spot interruption warning, which EventBridge
// delivers through the interruption queue (the emulator's SQS) to
// burst-sizer serve. Hearing nothing from the agent, the sizer drains the
// node, signals the job (which checkpoints), requeues it and hands the
// node back: Slurm's SuspendProgram terminates the instance before EC2
// reclaims it. The job finishes from its checkpoint on a new node.
func TestSQSDeadAgent(t *testing.T) {
	const every = 5
	s := start(t, stack.Options{
		Emulator: ec2emu.Options{NoticePeriod: 2 * time.Minute}, // EC2's own
		Configure: func(c *config.Config) {
			c.Interruptions.AgentWait = config.D(5 * time.Second)
		},
	})
	tr := trainingRunning(t, s, 30, every)
	id, logPath, node, first := tr.id, tr.log, tr.node, tr.instance
	stopAgent(t, s, node)
	if err := s.Emu.Interrupt(first.ID); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	eventually(t, 90*time.Second, "the job requeued by burst-sizer", func() bool { return jobNow(t, s, id).RestartCount == 1 })
	requeued := time.Since(t0)
	eventually(t, 60*time.Second, "the interrupted instance handed back", func() bool {
		in, _ := s.Emu.Instance(first.ID)
		return in.State == "terminated" || in.State == "shutting-down"
	})
	handedBack := time.Since(t0)
	in, _ := s.Emu.Instance(first.ID)
	// terminated by burst (SuspendProgram's TerminateInstances), not by EC2's reclaim
	if in.StateReasonCode != "Client.UserInitiatedShutdown" || handedBack >= 2*time.Minute {
		t.Errorf("instance %s ended %s after %v: want burst's termination before EC2's deadline", first.ID, in.StateReasonCode, handedBack)
	}
	j := jobNow(t, s, id)
	note, _, ok := interruptiontest.ParseConsumed(j.AdminComment) // the requeue's epilog used it (nothing to hold: one node)
	if !ok || note.By != "sizer" || !note.IsLost(node) || note.Instance != first.ID {
		t.Errorf("job %s admin comment %q: want the sizer's requeue note for %s", id, j.AdminComment, node)
	}
	waitJob(t, s, id, 3*time.Minute, "COMPLETED")
	text := readFile(logPath)
	if !strings.Contains(text, "on signal; wrote") || !strings.Contains(text, "resumed from checkpoint") {
		t.Errorf("the job did not checkpoint on the sizer's signal and resume:\n%s", text)
	}
	m := regexp.MustCompile(`done: 30 steps, (\d+) redone`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("the job did not finish all steps:\n%s", text)
	}
	if redone, _ := strconv.Atoi(m[1]); redone > every {
		t.Errorf("redid %d steps, more than one checkpoint interval (%d)", redone, every)
	}
	if v := metric(t, s, `burst_sizer_ec2_events_total{kind="spot-interruption",outcome="handled"}`); v != 1 {
		t.Errorf("sizer handled %v spot interruption events, want 1", v)
	}
	sizerLog := readFile(filepath.Join(s.Dir, "sizer.log"))
	if !strings.Contains(sizerLog, "no word from the node's agent") {
		t.Errorf("the sizer's log does not say it acted for a silent agent")
	}
	t.Logf("notice -> requeued by the sizer %.1f s (agent_wait %v), -> instance terminated by burst %.1f s; %d instances in all",
		requeued.Seconds(), s.Cfg.Interruptions.AgentWait.Duration, handedBack.Seconds(), len(s.Emu.Instances()))
}

func readFile(p string) string { b, _ := os.ReadFile(p); return string(b) }
