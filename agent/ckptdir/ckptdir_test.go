package ckptdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: Ensure gives directories to other users (needs root, as the Prolog runs)")
	}
}

func owner(t *testing.T, p string) (uint32, os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid, fi.Mode()
}

func TestEnsure(t *testing.T) {
	needRoot(t)
	root := t.TempDir()
	os.Chmod(root, 0o755)
	now := time.Unix(1_800_000_000, 0)
	const victim, attacker = 61001, 61002

	// fresh: made for the job's user, 0700
	res, err := Ensure(root, "101", victim, victim, now)
	if err != nil || !res.Created || res.MovedAside != "" {
		t.Fatalf("fresh: %+v %v", res, err)
	}
	if uid, m := owner(t, res.Path); uid != victim || m.Perm() != 0o700 || !m.IsDir() {
		t.Errorf("fresh dir owned by %d mode %v", uid, m)
	}
	// again (a requeue): kept, contents kept
	os.WriteFile(filepath.Join(res.Path, "ckpt"), []byte("x"), 0o600)
	if res, err = Ensure(root, "101", victim, victim, now); err != nil || res.Created || res.MovedAside != "" {
		t.Fatalf("again: %+v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(res.Path, "ckpt")); err != nil {
		t.Errorf("requeue lost the checkpoint: %v", err)
	}

	// pre-created by another user (0777): moved aside, the job gets its own
	pre := filepath.Join(root, "102")
	os.Mkdir(pre, 0o777)
	os.Chmod(pre, 0o777)
	os.Chown(pre, attacker, attacker)
	os.WriteFile(filepath.Join(pre, "model.pt"), []byte("evil"), 0o666)
	res, err = Ensure(root, "102", victim, victim, now)
	if err != nil || !res.Created || !strings.HasSuffix(res.MovedAside, "102.moved-1800000000") || !strings.Contains(res.Why, "uid 61002") {
		t.Fatalf("attacker's directory: %+v %v", res, err)
	}
	if uid, m := owner(t, pre); uid != victim || m.Perm() != 0o700 {
		t.Errorf("job dir owned by %d mode %v", uid, m)
	}
	if _, err := os.Stat(filepath.Join(pre, "model.pt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the attacker's file is in the job's directory: %v", err)
	}

	// a symlink into the attacker's space: never followed, moved aside
	target := t.TempDir()
	os.Chown(target, attacker, attacker)
	os.Chmod(target, 0o755)
	link := filepath.Join(root, "103")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	res, err = Ensure(root, "103", victim, victim, now)
	if err != nil || !res.Created || res.MovedAside == "" {
		t.Fatalf("symlink: %+v %v", res, err)
	}
	if uid, m := owner(t, link); uid != victim || !m.IsDir() || m&os.ModeSymlink != 0 {
		t.Errorf("job dir after a symlink: uid %d mode %v", uid, m)
	}
	if uid, m := owner(t, target); uid != attacker || m.Perm() != 0o755 {
		t.Errorf("the symlink's target was changed: uid %d mode %v", uid, m)
	}
	if fi, err := os.Lstat(res.MovedAside); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was not moved aside: %v %v", fi, err)
	}

	// a file by that name; a second collision in the same second
	os.WriteFile(filepath.Join(root, "104"), []byte("x"), 0o644)
	os.Symlink("/etc/shadow", filepath.Join(root, "104.moved-1800000000"))
	res, err = Ensure(root, "104", victim, victim, now)
	if err != nil || !strings.HasSuffix(res.MovedAside, "104.moved-1800000000.1") {
		t.Fatalf("a file in the way: %+v %v", res, err)
	}

	// unsafe roots and bad input
	open := t.TempDir()
	os.Chmod(open, 0o777)
	if _, err := Ensure(open, "1", victim, victim, now); !errors.Is(err, ErrUnsafeRoot) {
		t.Errorf("world-writable root without the sticky bit: %v", err)
	}
	sticky := t.TempDir()
	os.Chmod(sticky, os.ModeSticky|0o777)
	if _, err := Ensure(sticky, "1", victim, victim, now); err != nil {
		t.Errorf("a legacy 1777 root: %v", err)
	}
	rootLink := filepath.Join(t.TempDir(), "root")
	os.Symlink(root, rootLink)
	if _, err := Ensure(rootLink, "1", victim, victim, now); err == nil {
		t.Error("a symlinked root was followed")
	}
	for _, name := range []string{"", "..", "a/b"} {
		if _, err := Ensure(root, name, victim, victim, now); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
	if _, err := Ensure(root, "9", -1, 0, now); err == nil {
		t.Error("made a directory for uid -1")
	}
	if res, err := Ensure(root, "10", 0, 0, now); err != nil || !res.Created {
		t.Errorf("root's job: %+v %v", res, err)
	}
}

func TestName(t *testing.T) {
	for in, ok := range map[string]bool{"1": true, "4294967295": true, "4294967296": false, "0": false, "12_3": false, "-1": false, "": false, "1 ": false} {
		if _, err := Name(in); (err == nil) != ok {
			t.Errorf("Name(%q): %v", in, err)
		}
	}
}

func FuzzName(f *testing.F) {
	f.Add("123")
	f.Add("1_2")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Name(s)
		if err == nil && (n != s || strings.ContainsAny(n, "/._ ") || n == "") {
			t.Fatalf("Name(%q) = %q", s, n)
		}
	})
}

// TestEnsureRefusesAUsersAncestor: the swap of issue 25. A user who made
// burst/ first renames burst/checkpoints away and puts their own directory
// there; the Prolog must not make the victim's directory inside it (the
// user could then move it away and plant a symlink), nor under a
// directory of theirs higher up.
func TestEnsureRefusesAUsersAncestor(t *testing.T) {
	needRoot(t)
	now := time.Unix(1_800_000_000, 0)
	const victim, attacker = 61001, 61002
	fsx := t.TempDir()
	os.Chmod(fsx, os.ModeSticky|0o777)
	burst := filepath.Join(fsx, "burst")
	os.Mkdir(burst, 0o755)
	os.Chown(burst, attacker, attacker)
	swapped := filepath.Join(burst, "checkpoints")
	os.Mkdir(swapped, 0o755) // the attacker's own, swapped in
	os.Chown(swapped, attacker, attacker)
	if _, err := Ensure(swapped, "201", victim, victim, now); !errors.Is(err, ErrUnsafeRoot) || !strings.Contains(err.Error(), "uid 61002") {
		t.Errorf("a checkpoint root of the attacker's: %v, want ErrUnsafeRoot", err)
	}
	os.Chown(swapped, 0, 0) // root's, but inside the attacker's burst/
	if _, err := Ensure(swapped, "201", victim, victim, now); !errors.Is(err, ErrUnsafeRoot) || !strings.Contains(err.Error(), burst+" is owned by uid 61002") {
		t.Errorf("a root under the attacker's directory: %v, want ErrUnsafeRoot naming %s", err, burst)
	}
	if _, err := os.Lstat(filepath.Join(swapped, "201")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the victim's directory was made under the attacker's: %v", err)
	}
}
