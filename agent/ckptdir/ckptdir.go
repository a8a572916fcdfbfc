// Package ckptdir creates a job's checkpoint directory safely, as root, for
// the job's user: burst-agent runs it as Slurm's Prolog (on the node, as
// root, before the job starts). The one path rule, for directories and for
// the markers burst-agent waits for on a spot notice (agent/spotwatch), is
// <checkpoint root>/<SLURM_JOB_ID>: an array task has a job id of its own,
// so its directory is that id too (never <array>_<task>).
//
// Safety: the checkpoint root is root-owned (0755), reached from "/"
// without following a symlink, through directories root's alone
// (internal/safedir); the directory is made
// with mkdirat under an O_DIRECTORY|O_NOFOLLOW descriptor of the root, then
// opened O_NOFOLLOW|O_DIRECTORY and changed through that descriptor (fchown,
// fchmod 0700), so no symlink is ever followed and no path is looked up
// twice. An entry of that name that is not a directory owned by the job's
// user (a file, a symlink, another user's directory, left from when the
// root was world-writable) is renamed aside, "<id>.moved-<unix time>", and
// reported.
package ckptdir

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/burst-hpc/burst/internal/safedir"
)

// Result says what Ensure did.
type Result struct {
	Path    string
	Created bool
	// MovedAside is the new name of an entry that was in the way, with
	// why; empty when there was none.
	MovedAside, Why string
}

var jobIDRE = regexp.MustCompile(`^[1-9][0-9]{0,9}$`)

// Name is the directory name of a job: its decimal SLURM_JOB_ID.
func Name(jobID string) (string, error) {
	if !jobIDRE.MatchString(jobID) {
		return "", fmt.Errorf("job id %q is not a Slurm job id", jobID)
	}
	if _, err := strconv.ParseUint(jobID, 10, 32); err != nil {
		return "", fmt.Errorf("job id %q is out of range", jobID)
	}
	return jobID, nil
}

// ErrUnsafeRoot means the checkpoint root, or a directory above it, lets
// another user replace entries: owned by a user, or writable by others
// without the sticky bit.
var ErrUnsafeRoot = safedir.ErrUnsafe
