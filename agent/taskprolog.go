package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/burst-hpc/burst/agent/ckptdir"
)

// CheckpointRootFile is where the bootstrap records the node's checkpoint
// root for the Prolog and TaskProlog (in the default run directory).
const CheckpointRootFile = "/run/burst/checkpoint-root"

// checkpointRoot is the node's checkpoint root: the bootstrap's record,
// else $BURST_CHECKPOINT_ROOT (the test stack's wrapper sets it: its nodes
// share one file system and have no /run/burst of their own).
func checkpointRoot(getenv func(string) string) (string, error) {
	root := ""
	if b, err := os.ReadFile(CheckpointRootFile); err == nil {
		root = strings.TrimSpace(string(b))
	} else {
		root = getenv("BURST_CHECKPOINT_ROOT")
	}
	if root == "" {
		return "", fmt.Errorf("no checkpoint root: neither %s nor $BURST_CHECKPOINT_ROOT", CheckpointRootFile)
	}
	if !filepath.IsAbs(root) || filepath.Clean(root) != root || strings.ContainsAny(root, " \t\n\"'$`\\") {
		return "", fmt.Errorf("checkpoint root %q is not a clean absolute path", root)
	}
	return root, nil
}

// taskProlog is burst-agent run as Slurm's TaskProlog (burst.conf sets
// TaskProlog to burst-agent): it gives every task BURST_CHECKPOINT_DIR, the
// job's checkpoint directory on FSx (made by the Prolog, as root, for the
// job's user; kept across requeues), by printing an "export" line as
// Slurm's TaskProlog protocol wants. It runs as the job's user, creates
// nothing and never fails a task.
func taskProlog(w io.Writer, getenv func(string) string) {
	name, err := ckptdir.Name(getenv("SLURM_JOB_ID"))
	if err != nil {
		return
	}
	root, err := checkpointRoot(getenv)
	if err != nil {
		return
	}
	fmt.Fprintf(w, "export BURST_CHECKPOINT_DIR=%s\n", filepath.Join(root, name))
}
