package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/test/stack"
)

// TestFaultNodeClockAhead: a node's clock runs 20 minutes ahead of the
// head node's (and EC2's), twice the node credential's life. The job
// runs and completes, the agent's reports are taken, and the agent does
// not prove its identity again on every credential poll (it renews by its
// own clock from the sizer's answer): at most once, when it starts with
// the credential its bootstrap got. Spend equals EC2's bill.
func TestFaultNodeClockAhead(t *testing.T) {
	versionBlind(t)
	s := faultStart(t, 0, stack.Options{NodeEnv: []string{"BURST_TEST_CLOCK_OFFSET=20m", "BURST_REPORT_INTERVAL=2s"}})
	id := sbatch(t, s, "--gres=gpu:1", "--constraint=l4", "--wrap", "sleep 75")
	in := instanceOfJob(t, s, id, 3*time.Minute)
	agentLog := filepath.Join(s.Dir, "run", "l4-1", "agent.log")
	eventually(t, time.Minute, "the agent running with its clock shifted", func() bool {
		return strings.Contains(readFile(agentLog), "TEST SWITCH: this agent's clock is shifted")
	})
	waitJob(t, s, id, 4*time.Minute, "COMPLETED")
	again := 0
	for _, l := range strings.Split(readFile(filepath.Join(s.Dir, "sizer.log")), "\n") {
		if strings.Contains(l, `"msg":"node credential issued"`) && strings.Contains(l, `"instance":"`+in.ID+`"`) && strings.Contains(l, `"first":false`) {
			again++
		}
	}
	t.Logf("identity exchanges after the first: %d", again)
	if again > 1 {
		t.Errorf("the node proved its identity again %d times in one job: its credential renewal compares its clock with the sizer's", again)
	}
	if strings.Contains(readFile(agentLog), "node credential expired") {
		t.Errorf("the agent's credential expired:\n%s", readFile(agentLog))
	}
	assertClean(t, s, time.Minute)
}
