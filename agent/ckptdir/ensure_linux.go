//go:build linux

package ckptdir

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/burst-hpc/burst/internal/safedir"
)

// Ensure makes root/name a directory owned by uid:gid, mode 0700, as
// described in the package comment. root must be an existing directory
// reached without a symlink, and it and every directory above it root's
// alone (internal/safedir): otherwise ErrUnsafeRoot.
func Ensure(root, name string, uid, gid int, now time.Time) (Result, error) {
	res := Result{Path: filepath.Join(root, name)}
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
		return res, fmt.Errorf("checkpoint directory name %q is not one path element", name)
	}
	if uid < 0 || gid < 0 {
		return res, fmt.Errorf("checkpoint directory for uid %d gid %d: not a user", uid, gid)
	}
	// the root and every directory above it: no symlink, root's alone
	rfd, err := safedir.Open(root)
	if err != nil {
		return res, fmt.Errorf("opening checkpoint root %s: %w", root, err)
	}
	defer unix.Close(rfd)
	for attempt := 0; attempt < 5; attempt++ {
		var st unix.Stat_t
		err := unix.Fstatat(rfd, name, &st, atSymlinkNofollow)
		switch {
		case errors.Is(err, unix.ENOENT):
			if err := unix.Mkdirat(rfd, name, 0o700); err != nil {
				if errors.Is(err, unix.EEXIST) {
					continue // made in between: look again
				}
				return res, fmt.Errorf("creating %s: %w", res.Path, err)
			}
			res.Created = true
		case err != nil:
			return res, fmt.Errorf("checking %s: %w", res.Path, err)
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			if err := moveAside(rfd, name, now, &res, fmt.Sprintf("not a directory (mode %07o, owner uid %d)", st.Mode, st.Uid)); err != nil {
				return res, err
			}
			continue
		case int(st.Uid) != uid && !(st.Uid == 0 && res.Created):
			if err := moveAside(rfd, name, now, &res, fmt.Sprintf("a directory of uid %d, not of the job's user %d", st.Uid, uid)); err != nil {
				return res, err
			}
			continue
		}
		fd, err := unix.Openat(rfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ENOENT) {
				continue // swapped for something else in between: look again
			}
			return res, fmt.Errorf("opening %s: %w", res.Path, err)
		}
		err = func() error {
			defer unix.Close(fd)
			var dst unix.Stat_t
			if err := unix.Fstat(fd, &dst); err != nil {
				return err
			}
			if int(dst.Uid) != uid && dst.Uid != 0 {
				return fmt.Errorf("%s changed owner to uid %d while being set up", res.Path, dst.Uid)
			}
			if err := unix.Fchown(fd, uid, gid); err != nil {
				return fmt.Errorf("giving %s to uid %d: %w", res.Path, uid, err)
			}
			if err := unix.Fchmod(fd, 0o700); err != nil {
				return fmt.Errorf("setting mode 0700 on %s: %w", res.Path, err)
			}
			return nil
		}()
		return res, err
	}
	return res, fmt.Errorf("%s keeps changing under the Prolog; giving up", res.Path)
}

const atSymlinkNofollow = unix.AT_SYMLINK_NOFOLLOW

func moveAside(rfd int, name string, now time.Time, res *Result, why string) error {
	for i := 0; i < 100; i++ {
		to := name + ".moved-" + strconv.FormatInt(now.Unix(), 10)
		if i > 0 {
			to += "." + strconv.Itoa(i)
		}
		var st unix.Stat_t
		if err := unix.Fstatat(rfd, to, &st, atSymlinkNofollow); err == nil {
			continue
		}
		if err := unix.Renameat(rfd, name, rfd, to); err != nil {
			return fmt.Errorf("moving %s aside (%s): %w", res.Path, why, err)
		}
		res.MovedAside, res.Why = filepath.Join(filepath.Dir(res.Path), to), why
		return nil
	}
	return fmt.Errorf("moving %s aside: no free name", res.Path)
}
