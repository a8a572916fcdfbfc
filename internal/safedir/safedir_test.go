//go:build linux

package safedir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const user = 61003 // an ordinary user, an attacker

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("BURST_REQUIRE_SLURM") == "1" { // make test runs as root, like the bootstrap and the Prolog
			t.Fatal("safedir's cases need root (make test runs as root; BURST_REQUIRE_SLURM=1)")
		}
		t.Skip("SKIPPING: the cases give directories to another user (needs root, as the bootstrap and the Prolog run)")
	}
}

// base is a root-owned 0755 directory under t.TempDir() (under /tmp, 1777
// root: allowed, it has the sticky bit).
func base(t *testing.T) string {
	d := filepath.Join(t.TempDir(), "fsx")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

func mkdir(t *testing.T, p string, mode os.FileMode, uid int) {
	t.Helper()
	if err := os.Mkdir(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
}

func statOf(t *testing.T, p string) (uint32, os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid, fi.Mode()
}

// TestOpenRefusesEveryUnsafeAncestor: each way a directory on the path can
// be another user's refuses the whole path, wherever it is.
func TestOpenRefusesEveryUnsafeAncestor(t *testing.T) {
	needRoot(t)
	cases := []struct {
		name  string
		setup func(t *testing.T, b string) string // returns the path to open
		want  string                              // "" = opens
	}{
		{"root's all the way", func(t *testing.T, b string) string {
			mkdir(t, b+"/burst", 0o755, 0)
			mkdir(t, b+"/burst/checkpoints", 0o755, 0)
			return b + "/burst/checkpoints"
		}, ""},
		{"sticky world-writable ancestor", func(t *testing.T, b string) string {
			os.Chmod(b, os.ModeSticky|0o777)
			mkdir(t, b+"/burst", 0o755, 0)
			return b + "/burst"
		}, ""},
		{"the root itself a user's", func(t *testing.T, b string) string {
			mkdir(t, b+"/checkpoints", 0o755, user)
			return b + "/checkpoints"
		}, "owned by uid 61003"},
		// the swap: a user made burst/ first
		{"a parent a user's", func(t *testing.T, b string) string {
			mkdir(t, b+"/burst", 0o755, user)
			mkdir(t, b+"/burst/checkpoints", 0o755, 0)
			return b + "/burst/checkpoints"
		}, "burst is owned by uid 61003"},
		{"a grandparent world-writable without sticky", func(t *testing.T, b string) string {
			os.Chmod(b, 0o777)
			mkdir(t, b+"/burst", 0o755, 0)
			mkdir(t, b+"/burst/checkpoints", 0o755, 0)
			return b + "/burst/checkpoints"
		}, "writable by others without the sticky bit"},
		{"a group-writable parent", func(t *testing.T, b string) string {
			mkdir(t, b+"/burst", 0o775, 0)
			mkdir(t, b+"/burst/checkpoints", 0o755, 0)
			return b + "/burst/checkpoints"
		}, "mode 0775"},
		{"a symlinked parent", func(t *testing.T, b string) string {
			mkdir(t, b+"/real", 0o755, 0)
			mkdir(t, b+"/real/checkpoints", 0o755, 0)
			os.Symlink(b+"/real", b+"/burst")
			return b + "/burst/checkpoints"
		}, "without following symlinks"},
		{"a symlinked last component", func(t *testing.T, b string) string {
			mkdir(t, b+"/real", 0o755, 0)
			os.Symlink(b+"/real", b+"/checkpoints")
			return b + "/checkpoints"
		}, "without following symlinks"},
		{"a file", func(t *testing.T, b string) string {
			os.WriteFile(b+"/checkpoints", nil, 0o644)
			return b + "/checkpoints"
		}, "not a directory"},
		{"not clean", func(t *testing.T, b string) string { return b + "/../fsx" }, "not a clean absolute path"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.setup(t, base(t))
			fd, err := Open(p)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				unix.Close(fd)
				return
			}
			if err == nil {
				unix.Close(fd)
				t.Fatalf("Open(%s) accepted", p)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open(%s): %v, want %q", p, err, tc.want)
			}
		})
	}
}

// TestMkdirAllOwnsBelowBase: below the mount point burst makes the
// directories root's, moving a user's entries aside; the mount point and
// above are only checked.
func TestMkdirAllOwnsBelowBase(t *testing.T) {
	needRoot(t)
	now := time.Unix(1_800_000_000, 0)

	b := base(t)
	os.Chmod(b, os.ModeSticky|0o777) // a site's scratch FSx, 1777
	// the attacker made burst/ first and a checkpoints of their own in it
	mkdir(t, b+"/burst", 0o777, user)
	mkdir(t, b+"/burst/checkpoints", 0o777, user)
	fd, moved, err := MkdirAll(b, b+"/burst/checkpoints", now)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	if len(moved) != 1 || moved[0].Path != b+"/burst" || moved[0].To != b+"/burst.moved-1800000000" || !strings.Contains(moved[0].Why, "uid 61003") {
		t.Errorf("moved: %+v", moved)
	}
	for _, p := range []string{b + "/burst", b + "/burst/checkpoints"} {
		if uid, m := statOf(t, p); uid != 0 || m.Perm() != 0o755 || !m.IsDir() {
			t.Errorf("%s: uid %d mode %v, want root's 0755", p, uid, m)
		}
	}
	if uid, _ := statOf(t, b+"/burst.moved-1800000000/checkpoints"); uid != user {
		t.Errorf("the attacker's tree was not kept aside intact")
	}

	// a symlink and a file in the way, a root-owned 0777 directory
	b = base(t)
	os.Symlink(t.TempDir(), b+"/burst")
	fd, moved, err = MkdirAll(b, b+"/burst/checkpoints", now)
	if err != nil || len(moved) != 1 || !strings.Contains(moved[0].Why, "not a directory") {
		t.Fatalf("symlink in the way: %+v %v", moved, err)
	}
	unix.Close(fd)
	if _, m := statOf(t, b+"/burst"); !m.IsDir() {
		t.Errorf("burst is %v", m)
	}
	os.Chmod(b+"/burst", 0o777)
	fd, moved, err = MkdirAll(b, b+"/burst/checkpoints", now)
	if err != nil || len(moved) != 0 {
		t.Fatalf("again: %+v %v", moved, err)
	}
	unix.Close(fd)
	if _, m := statOf(t, b+"/burst"); m.Perm() != 0o755 {
		t.Errorf("root's 0777 burst left %v", m)
	}

	// the mount point (base) itself is only checked, never changed
	b = base(t)
	os.Chmod(b, 0o777)
	if _, _, err := MkdirAll(b, b+"/burst/checkpoints", now); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "chmod") {
		t.Errorf("a 0777 mount point: %v, want ErrUnsafe with the fix", err)
	}
	if _, m := statOf(t, b); m.Perm() != 0o777 {
		t.Errorf("the mount point was changed: %v", m)
	}
	if _, err := os.Lstat(b + "/burst"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("made burst under an unsafe mount point: %v", err)
	}
	b = base(t)
	os.Chown(b, user, user)
	if _, _, err := MkdirAll(b, b+"/burst", now); !errors.Is(err, ErrUnsafe) {
		t.Errorf("a mount point of a user's: %v", err)
	}
	if _, _, err := MkdirAll(b, "/elsewhere", now); err == nil {
		t.Error("a path outside base accepted")
	}
}
