//go:build linux

package safedir

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const openDir = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// Open opens the directory at path (absolute) as described in the package
// comment and returns its descriptor (the caller closes it).
func Open(path string) (int, error) {
	fd, _, err := walk(path, "", time.Time{})
	return fd, err
}

// MkdirAll opens path like Open, making what is missing. Below base (an
// ancestor of path, or path itself) burst owns the directories: a missing
// one is made root-owned 0755, a root-owned one others can write is set to
// 0755, and an entry that is not a root-owned directory (a user's
// directory, a symlink, a file) is renamed "<name>.moved-<unix time>" and
// reported, and a directory of root's made in its place. base and the
// directories above it are only checked.
func MkdirAll(base, path string, now time.Time) (int, []Moved, error) {
	if base == "" {
		return -1, nil, errors.New("safedir: MkdirAll needs a base")
	}
	return walk(path, base, now)
}

func walk(path, base string, now time.Time) (int, []Moved, error) {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return -1, nil, fmt.Errorf("%q is not a clean absolute path", path)
	}
	if base != "" && path != base && !strings.HasPrefix(path, strings.TrimSuffix(base, "/")+"/") {
		return -1, nil, fmt.Errorf("%s is not under %s", path, base)
	}
	fd, err := unix.Open("/", openDir, 0)
	if err != nil {
		return -1, nil, fmt.Errorf("opening /: %w", err)
	}
	if err := check(fd, "/"); err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	var moved []Moved
	cur := "/"
	for _, name := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		if name == "" {
			continue
		}
		next := filepath.Join(cur, name)
		owned := base != "" && len(next) > len(base) // below base: burst's own
		nfd, m, err := step(fd, cur, name, owned, now)
		unix.Close(fd)
		if err != nil {
			return -1, moved, err
		}
		moved = append(moved, m...)
		fd, cur = nfd, next
	}
	return fd, moved, nil
}

// step opens name under the directory pfd (at parent, already checked),
// making it (when owned) as the package comment says, and checks it.
func step(pfd int, parent, name string, owned bool, now time.Time) (int, []Moved, error) {
	p := filepath.Join(parent, name)
	var moved []Moved
	for attempt := 0; attempt < 5; attempt++ {
		var st unix.Stat_t
		err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case errors.Is(err, unix.ENOENT) && owned:
			if err := unix.Mkdirat(pfd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				return -1, moved, fmt.Errorf("creating %s: %w", p, err)
			}
			continue
		case err != nil:
			return -1, moved, fmt.Errorf("checking %s: %w", p, err)
		case owned && (st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != 0):
			why := fmt.Sprintf("not a directory (mode %07o, owner uid %d)", st.Mode, st.Uid)
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				why = fmt.Sprintf("a directory of uid %d, not root's: that user could swap what burst makes inside", st.Uid)
			}
			to, err := moveAside(pfd, name, now)
			if err != nil {
				return -1, moved, fmt.Errorf("moving %s aside (%s): %w", p, why, err)
			}
			moved = append(moved, Moved{Path: p, To: filepath.Join(parent, to), Why: why})
			continue
		}
		fd, err := unix.Openat(pfd, name, openDir, 0)
		if err != nil {
			if owned && (errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ENOENT)) {
				continue // swapped in between: look again
			}
			return -1, moved, fmt.Errorf("opening %s without following symlinks: %w", p, err)
		}
		if owned {
			var dst unix.Stat_t
			if err := unix.Fstat(fd, &dst); err == nil && dst.Uid == 0 && dst.Mode&0o022 != 0 {
				if err := unix.Fchmod(fd, 0o755); err != nil {
					unix.Close(fd)
					return -1, moved, fmt.Errorf("setting mode 0755 on %s: %w", p, err)
				}
			}
		}
		if err := check(fd, p); err != nil {
			unix.Close(fd)
			return -1, moved, err
		}
		return fd, moved, nil
	}
	return -1, moved, fmt.Errorf("%s keeps changing; giving up", p)
}

// check applies the package comment's rule to the open directory fd.
func check(fd int, p string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("checking %s: %w", p, err)
	}
	switch {
	case st.Uid != 0:
		return fmt.Errorf("%s is owned by uid %d: that user could replace what is inside (make it root's: chown root:root %s): %w", p, st.Uid, p, ErrUnsafe)
	case st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0:
		return fmt.Errorf("%s (mode %04o) is writable by others without the sticky bit: anyone could rename what is inside (chmod o-w,g-w or chmod +t %s): %w", p, st.Mode&0o7777, p, ErrUnsafe)
	}
	return nil
}

func moveAside(pfd int, name string, now time.Time) (string, error) {
	for i := 0; i < 100; i++ {
		to := name + ".moved-" + strconv.FormatInt(now.Unix(), 10)
		if i > 0 {
			to += "." + strconv.Itoa(i)
		}
		var st unix.Stat_t
		if err := unix.Fstatat(pfd, to, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
			continue
		}
		if err := unix.Renameat(pfd, name, pfd, to); err != nil {
			return "", err
		}
		return to, nil
	}
	return "", errors.New("no free name")
}
