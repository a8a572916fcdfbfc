package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
