package bootstrap

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/burst-hpc/burst/internal/safedir"
	"github.com/burst-hpc/burst/internal/statefile"
	"github.com/burst-hpc/burst/internal/userdata"
)

// LustreMountArgs returns the mount(8) arguments AWS documents for FSx for
// Lustre: mount -t lustre -o relatime,flock <dns>@tcp:/<mountname> <mountpoint>.
func LustreMountArgs(f userdata.FSx) []string {
	return []string{"-t", "lustre", "-o", "relatime,flock", f.DNSName + "@tcp:/" + f.MountName, f.MountPoint}
}

func (b *boot) mount(ctx context.Context) (string, error) {
	f := b.ud.FSx
	if err := os.MkdirAll(f.MountPoint, 0o755); err != nil {
		return "", fmt.Errorf("creating mount point: %w", err)
	}
	if ok, err := isMountPoint(f.MountPoint); err != nil {
		return "", err
	} else if ok {
		return f.MountPoint + " is already a mount point", nil
	}
	if b.ud.Test != nil && b.ud.Test.LocalFSDir != "" {
		dir := b.ud.Test.LocalFSDir
		st, err := os.Stat(dir)
		if err != nil {
			return "", fmt.Errorf("test switch test.local_fs_dir: %w", err)
		}
		if !st.IsDir() {
			return "", fmt.Errorf("test switch test.local_fs_dir: %s is not a directory", dir)
		}
		b.log.Warn("TEST SWITCH: bind-mounting a local directory instead of FSx for Lustre", "local_fs_dir", dir, "mount_point", f.MountPoint)
		if err := b.runCmd(ctx, b.o.Commands.Mount, "--bind", dir, f.MountPoint); err != nil {
			return "", err
		}
	} else {
		args := LustreMountArgs(f)
		var err error
		for attempt := 1; attempt <= b.o.MountAttempts; attempt++ {
			if err = b.runCmd(ctx, b.o.Commands.Mount, args...); err == nil {
				break
			}
			b.log.Warn("lustre mount failed", "attempt", attempt, "of", b.o.MountAttempts, "err", err)
			if attempt < b.o.MountAttempts {
				select {
				case <-ctx.Done():
					return "", ctx.Err()
				case <-time.After(3 * time.Second):
				}
			}
		}
		if err != nil {
			return "", fmt.Errorf("mounting FSx for Lustre %s@tcp:/%s on %s (check the security group allows TCP 988 and the lustre client module matches the kernel): %w",
				f.DNSName, f.MountName, f.MountPoint, err)
		}
	}
	if ok, err := isMountPoint(f.MountPoint); err != nil {
		return "", err
	} else if !ok {
		return "", fmt.Errorf("mount reported success but %s is not a mount point", f.MountPoint)
	}
	return "", nil
}

func isMountPoint(dir string) (bool, error) {
	fh, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("reading mount table: %w", err)
	}
	defer fh.Close()
	mps, err := ParseMountPoints(fh)
	if err != nil {
		return false, err
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = dir
	}
	for _, mp := range mps {
		if mp == real || mp == dir {
			return true, nil
		}
	}
	return false, nil
}

// ParseMountPoints returns the mount points (field 5) of a
// /proc/self/mountinfo table, with octal escapes such as \040 decoded.
func ParseMountPoints(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 10 {
			return nil, fmt.Errorf("parsing mountinfo line %d: %d fields, want at least 10", n, len(f))
		}
		mp, err := unescapeOctal(f[4])
		if err != nil {
			return nil, fmt.Errorf("parsing mountinfo line %d: %w", n, err)
		}
		out = append(out, mp)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	return out, nil
}

func unescapeOctal(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			if i+4 > len(s) {
				return "", fmt.Errorf("bad escape in %q", s)
			}
			v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
			if err != nil {
				return "", fmt.Errorf("bad escape in %q", s)
			}
			b.WriteByte(byte(v))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String(), nil
}

func (b *boot) checkpointRoot(context.Context) (string, error) {
	root := b.ud.FSx.CheckpointRoot
	// burst makes and owns every directory from the mount point down to
	// the root (root-owned, 0755, no symlink followed; a user's entry in
	// the way is moved aside), and checks the mount point and everything
	// above it are root's alone: a user who owned an ancestor could swap
	// the root for their own directory after this check (issue 25).
	// burst-agent as Slurm's Prolog (root) makes each job's directory,
	// owned by the job's user, 0700.
	fd, moved, err := safedir.MkdirAll(b.ud.FSx.MountPoint, root, time.Now())
	for _, m := range moved {
		b.log.Warn("moved an entry in the way of the checkpoint root aside", "path", m.Path, "moved_to", m.To, "why", m.Why)
	}
	if err != nil {
		return "", fmt.Errorf("creating checkpoint root %s: %w", root, err)
	}
	defer unix.Close(fd)
	if err := unix.Fchown(fd, 0, 0); err != nil {
		return "", fmt.Errorf("making checkpoint root %s root-owned: %w", root, err)
	}
	// The root was 1777 before; an entry a user made in it then is moved
	// aside by the Prolog when a job of another user needs that name.
	if err := unix.Fchmod(fd, 0o755); err != nil {
		return "", fmt.Errorf("setting mode 0755 on checkpoint root: %w", err)
	}
	probe, err := os.CreateTemp(root, ".burst-probe-*")
	if err != nil {
		return "", fmt.Errorf("checkpoint root %s is not writable: %w", root, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	// the Prolog and TaskProlog (burst-agent) find the root here
	if err := statefile.WriteAtomic(filepath.Join(b.o.RunDir, "checkpoint-root"), []byte(root+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("recording the checkpoint root: %w", err)
	}
	return "", nil
}
