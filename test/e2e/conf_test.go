package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/test/stack"
)

// TestGeneratedConfigAccepted: the slurm.conf include and gres.conf that
// burst-slurm-conf generates from the demo burst.yaml are accepted by a
// real slurmctld of each version, which lists every cloud node powered down (idle~)
// with the class's GRES and features.
func TestGeneratedConfigAccepted(t *testing.T) {
	s := start(t, stack.Options{NoSizer: true})
	out, err := s.Cluster.Run(context.Background(), "sinfo", "-h", "-N", "-o", "%N|%T|%G|%f")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{}
	for i := 1; i <= 4; i++ {
		want["l4-"+string(rune('0'+i))] = [2]string{"gpu:l4:1", "burst,l4"}
		want["a10g-"+string(rune('0'+i))] = [2]string{"gpu:a10g:1", "burst,a10g"}
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 4 {
			t.Fatalf("sinfo line %q", line)
		}
		w, ok := want[f[0]]
		if !ok {
			t.Errorf("unexpected node %s", f[0])
			continue
		}
		seen++
		if f[1] != "idle~" || !strings.HasPrefix(f[2], w[0]) || f[3] != w[1] {
			t.Errorf("node %s: state %s gres %s features %s; want idle~ %s %s", f[0], f[1], f[2], f[3], w[0], w[1])
		}
	}
	if seen != len(want) {
		t.Errorf("sinfo listed %d of %d burst nodes:\n%s", seen, len(want), out)
	}
}
