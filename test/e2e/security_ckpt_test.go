package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/test/harness"
	"github.com/burst-hpc/burst/test/stack"
)

// asUser runs argv on the host as u (setpriv drops root): an ordinary user
// on a login node that mounts the same FSx.
func asUser(u harness.User, argv ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{fmt.Sprintf("--reuid=%d", u.UID), fmt.Sprintf("--regid=%d", u.GID), "--clear-groups", "--"}, argv...)
	return exec.CommandContext(ctx, "/usr/bin/setpriv", args...).CombinedOutput()
}

// ownerMode is the owner and mode of p, without following a symlink.
func ownerMode(t *testing.T, p string) (uint32, os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid, fi.Mode()
}

// TestSecurityCheckpointAncestorSwap is issue 25's medium finding: on a
// world-writable (1777) FSx, an ordinary user makes burst/ first, with a
// checkpoints/ of their own in it, before any node boots. The node's
// bootstrap must make burst/ and burst/checkpoints root's own (the user's
// tree moved aside), so the user can neither swap checkpoints/ for their
// own directory nor move the victim's job directory away and plant a
// symlink; the victim's job gets its own 0700 directory under root's.
func TestSecurityCheckpointAncestorSwap(t *testing.T) {
	atk, vic := attackerAndVictim(t)
	s := start(t, stack.Options{Configure: func(c *config.Config) {
		c.FSx.CheckpointDir = "burst/checkpoints"
	}})
	ctx := context.Background()
	for _, u := range []harness.User{atk, vic} {
		if err := s.Cluster.AddUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	fsx := s.Cfg.FSx.LocalDir // the file system behind every node's mount
	if err := os.Chmod(fsx, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	burst := filepath.Join(fsx, "burst")
	ckpt := filepath.Join(burst, "checkpoints")
	// the attacker, first: burst/ and checkpoints/ of their own
	if out, err := asUser(atk, "/bin/mkdir", "-m", "0777", "-p", ckpt); err != nil {
		t.Fatalf("the attacker making %s: %v\n%s", ckpt, err, out)
	}
	if uid, _ := ownerMode(t, burst); uid != uint32(atk.UID) {
		t.Fatalf("setup: %s not the attacker's (uid %d)", burst, uid)
	}

	vhome := home(t, s, vic)
	// the script marks that it started: Slurm reports RUNNING while the
	// node's Prolog (which makes the job's directory) may still run, and
	// starts the batch script only after it succeeded
	started := filepath.Join(vhome, "started")
	writeAs(t, vic, filepath.Join(vhome, "train.sh"), "#!/bin/bash\ntouch "+started+"\nsleep ${HOLD:-300}\n", 0o755)
	vjob := sbatchAs(t, s, vic, vhome, "--gres=gpu:1", "--constraint=a10g", "--account=demo", "--output="+filepath.Join(vhome, "%j.out"), filepath.Join(vhome, "train.sh"))
	waitJob(t, s, vjob, 3*time.Minute, "RUNNING")
	eventually(t, time.Minute, "the victim's batch script to start", func() bool {
		_, err := os.Stat(started)
		return err == nil
	})

	// after the node's bootstrap: both directories root's 0755, the
	// attacker's tree kept aside
	for _, p := range []string{burst, ckpt} {
		if uid, m := ownerMode(t, p); uid != 0 || !m.IsDir() || m.Perm() != 0o755 {
			t.Errorf("%s: uid %d mode %v; want root's directory, 0755", p, uid, m)
		}
	}
	aside, _ := filepath.Glob(burst + ".moved-*")
	if len(aside) != 1 {
		t.Errorf("the attacker's burst/ moved aside: %v, want one", aside)
	}

	// the victim's directory, made by the Prolog: its own, 0700
	vdir := filepath.Join(ckpt, vjob)
	if uid, m := ownerMode(t, vdir); uid != uint32(vic.UID) || !m.IsDir() || m.Perm() != 0o700 {
		t.Errorf("victim's directory %s: uid %d mode %v; want %s's 0700 directory", vdir, uid, m, vic.Name)
	}

	// the swap: move checkpoints/ (or the victim's directory) away and
	// plant the attacker's own: every step refused
	evil := filepath.Join(fsx, "evil")
	if out, err := asUser(atk, "/bin/mkdir", "-m", "0777", evil); err != nil {
		t.Fatalf("the attacker's own directory: %v\n%s", err, out)
	}
	for _, argv := range [][]string{
		{"/bin/mv", ckpt, filepath.Join(burst, "old")},
		{"/bin/mv", burst, filepath.Join(fsx, "old")},
		{"/bin/mv", vdir, filepath.Join(evil, vjob)},
		{"/bin/ln", "-s", evil, filepath.Join(ckpt, vjob+"1")},
		{"/bin/mkdir", filepath.Join(burst, "checkpoints2")},
	} {
		if out, err := asUser(atk, argv...); err == nil {
			t.Errorf("the attacker's %s succeeded: %s", strings.Join(argv, " "), out)
		}
	}
	if uid, m := ownerMode(t, vdir); uid != uint32(vic.UID) || !m.IsDir() {
		t.Errorf("victim's directory after the attack: uid %d mode %v", uid, m)
	}
}
