package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/test/stack"
)

// TestOverBudgetAtResume: an account that has spent its monthly budget gets
// no instance at resume (authoritative even when the job bypassed the
// submission filter): its node is handed back with the reason and the job
// is held with a reason the user sees in squeue.
func TestOverBudgetAtResume(t *testing.T) {
	s := start(t, stack.Options{})
	ctx := context.Background()
	c, err := sizerclient.New(s.Cfg.Sizer.URL, s.Token)
	if err != nil {
		t.Fatal(err)
	}
	// account demo (budget $100) ran a $500/h instance for the last hour
	if err := c.Launched(ctx, sizerapi.InstanceEvent{InstanceID: "i-0spent0000000000", Node: "l4-9", InstanceType: "g6.xlarge",
		Zone: "us-east-1a", Capacity: "on-demand", PriceUSD: 500, Account: "demo", Time: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	id := sbatch(t, s, "--gres=gpu:1", "--account=demo", "--wrap", "hostname")
	eventually(t, 60*time.Second, "the job held", func() bool {
		out, _ := s.Cluster.Run(ctx, "squeue", "-h", "-j", id, "-o", "%T|%r")
		return strings.Contains(out, "JobHeldAdmin")
	})
	out, _ := s.Cluster.Run(ctx, "scontrol", "show", "job", id)
	if !strings.Contains(out, "over its monthly GPU budget") {
		t.Errorf("the job does not say why it is held:\n%s", out)
	}
	if n := len(s.Emu.Instances()); n != 0 {
		t.Errorf("%d instances launched for an over-budget account", n)
	}
	s.Cluster.Run(ctx, "scancel", id)
}
