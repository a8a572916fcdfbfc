//go:build !linux

package safedir

import (
	"errors"
	"time"
)

var errLinux = errors.New("safedir: Linux only (openat, fchmod on descriptors)")

// Open is Linux only.
func Open(string) (int, error) { return -1, errLinux }

// MkdirAll is Linux only.
func MkdirAll(string, string, time.Time) (int, []Moved, error) { return -1, nil, errLinux }
