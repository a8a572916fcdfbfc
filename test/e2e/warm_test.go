package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/test/stack"
)

// TestWarmReuse: with one a10g node and two short jobs, the node that
// finishes the first job is handed to the waiting second job instead of
// being released (one instance for both), and the warm-reuse timer then
// releases it once no job wants it.
func TestWarmReuse(t *testing.T) {
	s := start(t, stack.Options{Configure: func(c *config.Config) {
		c.Classes[1].MaxNodes = 1
		c.Teardown.WarmReuse = config.D(8 * time.Second)
	}})
	a := sbatch(t, s, "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 2")
	b := sbatch(t, s, "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 2")
	waitJob(t, s, a, 90*time.Second, "COMPLETED")
	waitJob(t, s, b, 60*time.Second, "COMPLETED")
	if n := len(s.Emu.Instances()); n != 1 {
		t.Errorf("want the second job on the warm node (1 instance), got %d instances", n)
	}
	// no job wants the node any more: released after the window
	eventually(t, 40*time.Second, "the warm node released", func() bool { return len(liveInstances(s)) == 0 })
	log, _ := os.ReadFile(s.LogPath())
	if n := strings.Count(string(log), "keeping node warm"); n != 1 {
		t.Errorf("%d 'keeping node warm' decisions, want 1", n)
	}
	if !strings.Contains(string(log), "warm-reuse window over") && !strings.Contains(string(log), "released at job end") {
		t.Errorf("no release after the warm-reuse window in the log")
	}
}
