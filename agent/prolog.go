package main

import (
	"fmt"
	"io"
	"log/slog"
	"os/user"
	"strconv"
	"time"

	"github.com/burst-hpc/burst/agent/ckptdir"
)

// prolog is burst-agent run as Slurm's Prolog (SLURM_SCRIPT_CONTEXT
// prolog_slurmd; burst.conf sets Prolog to burst-agent): slurmd runs it as
// root on the node before the job starts, and it makes the job's checkpoint
// directory <root>/<SLURM_JOB_ID> for the job's user, mode 0700, without
// following symlinks, moving aside whatever was in the way (agent/ckptdir).
// A failure fails the Prolog: Slurm requeues the job and drains the node
// with the reason, rather than start a job whose checkpoints another user
// could read or replace. Returns the exit status.
func prolog(stderr io.Writer, getenv func(string) string, now time.Time) int {
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("prog", "burst-agent prolog", "job", getenv("SLURM_JOB_ID"))
	fail := func(err error) int {
		log.Error("checkpoint directory not made; the job is requeued", "err", err)
		fmt.Fprintf(stderr, "burst-agent prolog: %v\n", err)
		return 1
	}
	name, err := ckptdir.Name(getenv("SLURM_JOB_ID"))
	if err != nil {
		return fail(err)
	}
	root, err := checkpointRoot(getenv)
	if err != nil {
		return fail(err)
	}
	uid, gid, err := jobOwner(getenv)
	if err != nil {
		return fail(err)
	}
	res, err := ckptdir.Ensure(root, name, uid, gid, now)
	if err != nil {
		return fail(err)
	}
	if res.MovedAside != "" {
		log.Warn("moved an entry in the way of the job's checkpoint directory aside", "path", res.Path, "moved_to", res.MovedAside, "why", res.Why, "uid", uid)
		fmt.Fprintf(stderr, "burst-agent prolog: moved %s aside to %s: %s\n", res.Path, res.MovedAside, res.Why)
	}
	log.Info("checkpoint directory ready", "path", res.Path, "created", res.Created, "uid", uid, "gid", gid)
	return 0
}

// jobOwner is the job's uid and primary gid from the Prolog environment
// (SLURM_JOB_UID, SLURM_JOB_GID), the gid looked up when not given.
func jobOwner(getenv func(string) string) (int, int, error) {
	uid, err := strconv.Atoi(getenv("SLURM_JOB_UID"))
	if err != nil || uid < 0 {
		return 0, 0, fmt.Errorf("SLURM_JOB_UID %q is not a uid", getenv("SLURM_JOB_UID"))
	}
	if g := getenv("SLURM_JOB_GID"); g != "" {
		gid, err := strconv.Atoi(g)
		if err != nil || gid < 0 {
			return 0, 0, fmt.Errorf("SLURM_JOB_GID %q is not a gid", g)
		}
		return uid, gid, nil
	}
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return 0, 0, fmt.Errorf("looking up uid %d: %w", uid, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return 0, 0, fmt.Errorf("uid %d has gid %q", uid, u.Gid)
	}
	return uid, gid, nil
}
