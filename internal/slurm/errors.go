package slurm

import (
	"errors"
	"strings"
)

// Burst's Slurm errors: both clients (command line and REST) classify what
// Slurm says with Classify, so callers test errors.Is(err, slurm.ErrX)
// whichever backend they run on.
var (
	// ErrNotFound: a job or node Slurm does not know.
	ErrNotFound = errors.New("not found in Slurm")
	// ErrAccessDenied: Slurm refused the operation to the user burst
	// acts as (burst needs SlurmUser or root, or an operator/admin).
	ErrAccessDenied = errors.New("access denied by Slurm")
	// ErrAuth: Slurm did not accept burst's credential (munge, or a JWT
	// that is expired, signed with another key or for an unknown user).
	ErrAuth = errors.New("Slurm authentication failed") //lint:ignore ST1005 Slurm is a name
	// ErrUnsupported: the Slurm release (or its REST API) cannot do this.
	ErrUnsupported = errors.New("not supported by this Slurm")
	// ErrJobPending: the job is pending already (a requeue of a job that
	// Slurm itself requeued a moment before: ESLURM_JOB_PENDING).
	ErrJobPending = errors.New("job is pending already")
)

// Slurm's error numbers (slurm_errno.h) that Classify maps.
const (
	errnoProtocolAuth   = 1007 // SLURM_PROTOCOL_AUTHENTICATION_ERROR
	errnoAccessDenied   = 2002 // ESLURM_ACCESS_DENIED
	errnoUserIDMissing  = 2003 // ESLURM_USER_ID_MISSING
	errnoInvalidJobID   = 2017 // ESLURM_INVALID_JOB_ID
	errnoInvalidNode    = 2018 // ESLURM_INVALID_NODE_NAME
	errnoAuthCredential = 6001 // ESLURM_AUTH_CRED_INVALID ... ESLURM_AUTH_* (6000-6099)
)

// classText are the messages (slurm_strerror) that mean the same, for
// callers that see only text (scontrol's stderr).
var classText = []struct {
	text string
	err  error
}{
	{"Invalid job id specified", ErrNotFound},
	{"Invalid node name", ErrNotFound}, // squeue: "Invalid node name nope-1"
	{"Access/permission denied", ErrAccessDenied},
	{"Protocol authentication error", ErrAuth},
	{"Authentication credential expired", ErrAuth},
	{"Invalid authentication credential", ErrAuth},
	{"Job is pending execution", ErrJobPending},
}

// Classify maps one Slurm error (its number, 0 when unknown, and text) to
// ErrNotFound, ErrAccessDenied or ErrAuth; nil when it is none of those.
func Classify(errno int, text string) error {
	switch {
	case errno == errnoInvalidJobID || errno == errnoInvalidNode:
		return ErrNotFound
	case errno == errnoAccessDenied || errno == errnoUserIDMissing:
		return ErrAccessDenied
	case errno == errnoProtocolAuth || errno >= errnoAuthCredential-1 && errno < 6100:
		return ErrAuth
	}
	for _, c := range classText {
		if strings.Contains(text, c.text) {
			return c.err
		}
	}
	return nil
}
