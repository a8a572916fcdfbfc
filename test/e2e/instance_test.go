package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/test/stack"
)

// TestNodeInstance: on Slurm 23.11 and later the bootstrap starts slurmd
// with --instance-id/--instance-type (and sets them with scontrol update
// where slurmctld did not record them: 26.05.5), so `scontrol show node`
// names the EC2 instance the node runs on, and burst's Slurm client (the configured
// backend) reads the same back; on 22.05, whose slurmd has no such options,
// the node carries none.
func TestNodeInstance(t *testing.T) {
	s := start(t, stack.Options{})
	id := sbatch(t, s, "--gres=gpu:1", "--constraint=l4", "--wrap", "sleep 300")
	waitJob(t, s, id, 90*time.Second, "RUNNING")
	in := instanceOfJob(t, s, id, 30*time.Second)
	node := ec2p.NodeOf(in.Tags)
	v, err := slurm.ParseVersion(s.Cluster.Slurm().Release)
	if err != nil {
		t.Fatal(err)
	}
	// the bootstrap sets the instance once the node registered, which is
	// when the job may already run: wait for it (26.05 takes it from the
	// bootstrap's scontrol update, 24.11 from slurmd's registration)
	var line string
	read := func() bool {
		var err error
		line, err = s.Cluster.Run(context.Background(), "scontrol", "show", "node", "-o", node)
		return err == nil && token(line, "InstanceId") == in.ID
	}
	if v.AtLeast(23, 11) {
		eventually(t, 30*time.Second, "node "+node+" showing InstanceId="+in.ID, read)
	} else {
		read()
	}
	gotID, gotType := token(line, "InstanceId"), token(line, "InstanceType")
	ns, err := burstSlurm(t, s).Nodes(context.Background(), node)
	if err != nil || len(ns) != 1 {
		t.Fatalf("burst's Slurm client reading node %s: %v (%d nodes)", node, err, len(ns))
	}
	want, wantType := in.ID, in.InstanceType
	if !v.AtLeast(23, 11) {
		want, wantType = "", ""
	}
	if gotID != want || gotType != wantType {
		t.Errorf("Slurm %s: scontrol show node %s: InstanceId=%q InstanceType=%q, want %q %q:\n%s", v, node, gotID, gotType, want, wantType, strings.TrimSpace(line))
	}
	if ns[0].InstanceID != want || ns[0].InstanceType != wantType {
		t.Errorf("Slurm %s (slurm.api %s): burst reads node %s instance %q %q, want %q %q", v, s.Cfg.Slurm.API, node, ns[0].InstanceID, ns[0].InstanceType, want, wantType)
	}
	t.Logf("Slurm %s: node %s runs on %s (%s); scontrol shows InstanceId=%q InstanceType=%q", v, node, in.ID, in.InstanceType, gotID, gotType)
	if _, err := s.Cluster.Run(context.Background(), "scancel", id); err != nil {
		t.Fatal(err)
	}
	assertClean(t, s, 2*time.Minute)
}

// token is KEY's value in one `scontrol show node -o` line (values without spaces).
func token(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}
