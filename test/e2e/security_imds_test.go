package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/test/stack"
)

// TestSecurityIMDSFirewallGuard: while a job runs, the node's whole
// nftables ruleset is flushed (what `nft flush ruleset`, a firewall
// service's reload or a package script does), which opens instance
// metadata to every user. burst-agent notices within its guard interval
// (2 s here, a minute by default) and drains the node with a reason an
// admin reads in sinfo -R; the running job is not killed; once it is
// cancelled nothing is left running or billed beyond EC2's bill.
func TestSecurityIMDSFirewallGuard(t *testing.T) {
	s := start(t, stack.Options{NodeEnv: []string{"BURST_IMDS_GUARD_INTERVAL=2s"}})
	ctx := context.Background()
	id := sbatch(t, s, "--gres=gpu:1", "--constraint=l4", "--wrap", "sleep 300")
	waitJob(t, s, id, 2*time.Minute, "RUNNING")
	node := jobNow(t, s, id).Nodes
	// the firewall is in place and the guard is quiet
	time.Sleep(5 * time.Second) // two guard intervals; not a wait for anything
	if r := nodeField(s, node, "Reason"); strings.Contains(r, "IMDS") {
		t.Fatalf("node %s drained with the firewall in place: %q", node, r)
	}
	cmd, err := s.Cluster.NodeCommand(ctx, node, "/usr/sbin/nft", "flush", "ruleset")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft flush ruleset on %s: %v\n%s", node, err, out)
	}
	s.Events.Add(node, "nft flush ruleset", "")
	eventually(t, time.Minute, "node "+node+" drained for its IMDS firewall", func() bool {
		return strings.HasPrefix(nodeField(s, node, "Reason"), "security: IMDS firewall gone")
	})
	t.Logf("node %s: State=%s Reason=%q", node, nodeField(s, node, "State"), nodeField(s, node, "Reason"))
	if st, _, err := s.Cluster.JobState(ctx, id); err != nil || st != "RUNNING" {
		t.Errorf("the running job after the drain: %s %v; want it left running", st, err)
	}
	if _, err := s.Cluster.Run(ctx, "scancel", id); err != nil {
		t.Fatal(err)
	}
	waitJob(t, s, id, time.Minute, "CANCELLED")
	assertClean(t, s, 2*time.Minute)
}
