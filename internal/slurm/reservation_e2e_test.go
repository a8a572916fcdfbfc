package slurm_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
)

// TestMaintReservationAgainstSlurm: a maintenance reservation on an up node
// from 20 minutes on (a Capacity Block's fence) keeps a job whose time
// limit runs into it from starting there, while a job that ends before it
// runs; a second reservation of the same name is ErrReservationExists.
// The same command on every release (BURST_SLURM).
func TestMaintReservationAgainstSlurm(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cli := slurm.NewScontrol(slurm.ScontrolOptions{Conf: c.ConfPath(), BinDir: c.ClientBin(), Timeout: 20 * time.Second})
	if _, err := c.Run(ctx, "scontrol", "update", "nodename=gpu-5", "state=POWER_UP"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartSlurmd(ctx, "gpu-5", netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitNodeState(ctx, "gpu-5", "idle"); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := cli.CreateMaintReservation(ctx, "burst_block_i-0123", []string{"gpu-5"}, now.Add(20*time.Minute), now.Add(80*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := cli.CreateMaintReservation(ctx, "burst_block_i-0123", []string{"gpu-5"}, now.Add(20*time.Minute), now.Add(80*time.Minute)); !errors.Is(err, slurm.ErrReservationExists) {
		t.Errorf("the same reservation again: %v, want ErrReservationExists", err)
	}
	if err := cli.CreateMaintReservation(ctx, "bad name", []string{"gpu-5"}, now, now.Add(time.Hour)); err == nil {
		t.Error("a reservation name with a space was passed to scontrol")
	}
	if err := cli.CreateMaintReservation(ctx, "burst_block_i-0456", []string{"-gpu-5"}, now, now.Add(time.Hour)); err == nil {
		t.Error("a node name that reads as an option was passed to scontrol")
	}
	show, err := c.Run(ctx, "scontrol", "show", "reservation", "burst_block_i-0123")
	if err != nil || !strings.Contains(show, "Nodes=gpu-5") || !strings.Contains(show, "MAINT") {
		t.Fatalf("scontrol show reservation: %v\n%s", err, show)
	}
	t.Logf("the fence as Slurm shows it:\n%s", strings.TrimSpace(show))
	// 30 minutes would run into the window: it waits
	long, err := c.Sbatch(ctx, "-J", "too-long", "-w", "gpu-5", "-t", "30", "--gres=gpu:a10g:1", "--wrap", "sleep 1")
	if err != nil {
		t.Fatal(err)
	}
	// 10 minutes ends before it: it runs to the end
	short, err := c.Sbatch(ctx, "-J", "fits", "-w", "gpu-5", "-t", "10", "--gres=gpu:a10g:1", "--wrap", "sleep 1")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c.WaitJobState(ctx, short, "COMPLETED"); err != nil {
		t.Fatalf("the job that fits before the fence: %s %v", st, err)
	}
	// the scheduler has passed over the long job by now (it was submitted first)
	out, err := c.Run(ctx, "squeue", "-h", "-j", long, "-o", "%T %r")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(strings.TrimSpace(out), "PENDING") {
		t.Errorf("the job whose time limit runs into the fence: %q, want PENDING", strings.TrimSpace(out))
	}
	t.Logf("the long job: %s", strings.TrimSpace(out))
}
