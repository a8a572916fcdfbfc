package stack

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// mountSmall mounts a tmpfs of size bytes at dir (created 0700): a small
// file system a test can fill (disk-full faults).
func mountSmall(dir string, size int64) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("stack: creating %s: %w", dir, err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0700,size="+strconv.FormatInt(size, 10)); err != nil {
		return fmt.Errorf("stack: mounting a %d-byte tmpfs at %s (needs root): %w", size, dir, err)
	}
	return nil
}

// unmountAll detaches every mount stacked at dir.
func unmountAll(dir string) {
	for i := 0; i < 8 && syscall.Unmount(dir, syscall.MNT_DETACH) == nil; i++ {
	}
}
