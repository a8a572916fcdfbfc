//go:build !linux

package ckptdir

import (
	"errors"
	"time"
)

// Ensure is Linux only (openat, fchown on the descriptor).
func Ensure(root, name string, uid, gid int, now time.Time) (Result, error) {
	return Result{}, errors.New("checkpoint directories are made on Linux nodes only")
}
