package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// fill writes zeros to path until its file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", path, err)
			}
			break
		}
	}
	for _, n := range []int{4096, 512, 1} { // the last blocks too
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
}

// TestFaultStateDirFull: the head node's state directory (sizer.state_dir:
// the sizer's database, the launch journal) fills up while a job waits for
// a node. burst launches nothing it could not journal: the node is handed
// back with a reason, the job waits, and burst's log names the full file
// system and what to do. Once space returns the job runs and completes,
// and spend equals EC2's bill.
func TestFaultStateDirFull(t *testing.T) {
	versionBlind(t)
	s := faultStart(t, 0, stack.Options{StateDirSize: 16 << 20})
	filler := filepath.Join(s.Cfg.Sizer.StateDir, "filler")
	fill(t, filler)
	id := sbatch(t, s, "--gres=gpu:1", "--constraint=l4", "--wrap", "sleep 2")
	want := "the file system holding " + s.Cfg.Sizer.StateDir + " is full: free space there"
	eventually(t, 2*time.Minute, "burst's log saying "+want, func() bool {
		return strings.Contains(readFile(s.LogPath()), want)
	})
	eventually(t, time.Minute, "node l4-1 handed back with burst's reason", func() bool {
		return strings.Contains(nodeField(s, "l4-1", "Reason"), "burst: LaunchIntentNotJournaled")
	})
	if live := liveInstances(s); len(live) > 0 {
		t.Errorf("instances launched without a journaled intent: %v", live)
	}
	eventually(t, time.Minute, "job "+id+" requeued (pending)", func() bool {
		st, _, err := s.Cluster.JobState(t.Context(), id)
		return err == nil && st == "PENDING"
	})
	// the admin frees space and lets the job go now instead of after
	// Slurm's requeue delay (OPERATIONS.md)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if out, err := s.Cluster.Run(t.Context(), "scontrol", "update", "JobId="+id, "StartTime=now"); err != nil {
		t.Fatalf("scontrol update JobId=%s StartTime=now: %v\n%s", id, err, out)
	}
	waitJob(t, s, id, 3*time.Minute, "COMPLETED")
	assertClean(t, s, time.Minute)
}

// TestFaultNodeSpoolFull: the file system of a node's report spool (the
// agent's state directory) fills up while a job runs on it. The job
// completes; the agent says which file system is full and what to do, and
// loses only the reports it could not write (counted as dropped); once
// space returns it spools and sends again. Spend equals EC2's bill.
func TestFaultNodeSpoolFull(t *testing.T) {
	versionBlind(t)
	spoolDir := func(s *stack.Stack, node string) string { return filepath.Join(s.Dir, "run", node, "agent-state") }
	// the mount is made where the node runs (inside a Debian root's mount
	// namespace, or on the host for the host's Slurm)
	sh := func(s *stack.Stack, script string) error {
		out, err := s.Cluster.Run(context.Background(), "/bin/sh", "-c", script)
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", script, err, out)
		}
		return nil
	}
	var mounted []string
	boot := func(ctx context.Context, s *stack.Stack, in ec2emu.Instance, node string) error {
		d := spoolDir(s, node)
		if err := sh(s, "mkdir -p "+d+" && mount -t tmpfs -o size=512k,mode=0700 burst-spool "+d); err != nil {
			return err
		}
		mounted = append(mounted, d)
		return stack.BootstrapNode(ctx, s, in, node)
	}
	s := faultStart(t, 0, stack.Options{Boot: boot, NodeEnv: []string{"BURST_REPORT_INTERVAL=2s"}})
	t.Cleanup(func() {
		for _, d := range mounted {
			sh(s, "umount -l "+d) //nolint:errcheck // the stack's removal reports what is left
		}
	})
	id := sbatch(t, s, "--gres=gpu:1", "--constraint=l4", "--wrap", "sleep 25")
	waitJob(t, s, id, 3*time.Minute, "RUNNING")
	d := spoolDir(s, "l4-1")
	if err := sh(s, "cat /dev/zero > "+d+"/filler 2>/dev/null; test -s "+d+"/filler"); err != nil {
		t.Fatal(err)
	}
	agentLog := filepath.Join(s.Dir, "run", "l4-1", "agent.log")
	want := "the file system holding " + d + " is full: free space there"
	eventually(t, time.Minute, "the agent's log saying "+want, func() bool {
		return strings.Contains(readFile(agentLog), want)
	})
	if err := sh(s, "rm "+d+"/filler"); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the agent's sampling recovered (agent.log)", func() bool {
		return strings.Contains(readFile(agentLog), `"msg":"sampling recovered"`)
	})
	if st := waitJob(t, s, id, 3*time.Minute, "COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL"); st != "COMPLETED" {
		t.Fatalf("job %s ended %s with its node's spool full for a while", id, st)
	}
	assertClean(t, s, time.Minute)
}
