package bootstrap

import (
	"fmt"
	"syscall"
)

// Test oracles: functions only tests call (no program needs them, so they
// are not production code).

// Unmount detaches the file system mounted on mountPoint (FSx, or the test
// switch's bind mount); not being a mount point is not an error.
func Unmount(mountPoint string) error {
	ok, err := isMountPoint(mountPoint)
	if err != nil || !ok {
		return err
	}
	if err := syscall.Unmount(mountPoint, syscall.MNT_DETACH); err != nil {
		return fmt.Errorf("unmounting %s: %w", mountPoint, err)
	}
	return nil
}
