// Package statefile is how burst's short-lived processes share the small
// state files of sizer.state_dir (the launch breaker, the
// unavailable-offerings cache, the instance-event journal): a change runs
// under an exclusive flock on <file>.lock, so that burst-resume and
// burst-suspend processes started at the same moment take turns; a
// rewrite goes to a temporary file in the same directory, is fsynced and
// renamed over the file (and the directory fsynced), so a reader never sees
// half a file and a crash loses at most the change in progress.
package statefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Read returns the file's content, nil when it does not exist. It takes no
// lock: files are only ever replaced whole, so a read sees one version.
func Read(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return b, nil
}

// Lock takes the exclusive lock of path (flock on path+".lock", created
// with perm and the directory when missing) and returns its release.
func Lock(path string, perm os.FileMode) (unlock func(), err error) {
	return lock(path, perm, syscall.LOCK_EX)
}

// TryLock is Lock without waiting: ok is false when another process holds
// the lock.
func TryLock(path string, perm os.FileMode) (unlock func(), ok bool, err error) {
	u, err := lock(path, perm, syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, false, nil
	}
	return u, err == nil, err
}

// dirPerm is the mode of a state directory the package creates: readable
// by others only when the file is.
func dirPerm(perm os.FileMode) os.FileMode {
	if perm&0o044 != 0 {
		return 0o755
	}
	return 0o700
}

func lock(path string, perm os.FileMode, how int) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), dirPerm(perm)); err != nil {
		return nil, fmt.Errorf("creating the state directory %s: %w", filepath.Dir(path), err)
	}
	lp := path + ".lock"
	f, err := os.OpenFile(lp, os.O_CREATE|os.O_RDWR, perm)
	if err != nil {
		return nil, fmt.Errorf("opening the lock %s: %w", lp, err)
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, err
		}
		return nil, fmt.Errorf("locking %s: %w", lp, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it too
		f.Close()
	}, nil
}

// Update changes the file under its lock: f gets the current content (nil
// when there is none) and returns the new content and whether to write it
// (false leaves the file alone). An error from f is returned as is.
func Update(path string, perm os.FileMode, f func(old []byte) (data []byte, write bool, err error)) error {
	unlock, err := Lock(path, perm)
	if err != nil {
		return err
	}
	defer unlock()
	old, err := Read(path)
	if err != nil {
		return err
	}
	data, write, err := f(old)
	if err != nil || !write {
		return err
	}
	return WriteAtomic(path, data, perm)
}

// ReadLocked is Read under the file's lock: for files that are appended to
// (Append), where a read without the lock could see an append in progress.
func ReadLocked(path string, perm os.FileMode) ([]byte, error) {
	unlock, err := Lock(path, perm)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return Read(path)
}

// AppendLine is Append for line-oriented files: when the file does not end
// with a newline (a crash cut its last write short), one is written first,
// so the cut line stays a line of its own and data stays whole.
func AppendLine(path string, perm os.FileMode, data []byte) error {
	return appendData(path, perm, data, true)
}

func appendData(path string, perm os.FileMode, data []byte, line bool) error {
	unlock, err := Lock(path, perm)
	if err != nil {
		return err
	}
	defer unlock()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, perm)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	if line {
		if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
			last := make([]byte, 1)
			if _, err := f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
				data = append([]byte{'\n'}, data...)
			}
		}
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("appending to %s: %w", path, Full(path, err))
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing %s: %w", path, Full(path, err))
	}
	return f.Close()
}

// Full adds what to do to a write error that is a full file system (or a
// quota) under path: burst keeps nothing from that write, so the admin
// must make room for it; the error itself stays as is for errors.Is.
func Full(path string, err error) error {
	if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return err
	}
	return fmt.Errorf("%w (the file system holding %s is full: free space there or give it a larger one; burst writes again once it can)", err, filepath.Dir(path))
}

// WriteAtomic replaces the file with data: a temporary file beside it,
// fsynced, renamed over it, and the directory fsynced. Callers that share
// the file with other processes hold its lock (see Update).
func WriteAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, Full(path, err))
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, Full(path, err))
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("syncing %s: %w", path, Full(path, err))
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() //nolint:errcheck // the rename is done; a failed directory sync only widens the crash window
		d.Close()
	}
	return nil
}
