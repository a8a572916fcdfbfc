package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// CheckpointRootFile is where the bootstrap records the node's checkpoint
// root for the TaskProlog (in the default run directory).
const CheckpointRootFile = "/run/burst/checkpoint-root"

var jobIDRe = regexp.MustCompile(`^[0-9]+$`)

// taskProlog is burst-agent run as Slurm's TaskProlog (burst.conf sets
// TaskProlog to burst-agent): it gives every task BURST_CHECKPOINT_DIR, the
// job's checkpoint directory on FSx, kept across requeues, by printing an
// "export" line as Slurm's TaskProlog protocol wants. It never fails a task.
func taskProlog(w io.Writer, getenv func(string) string) {
	id := getenv("SLURM_JOB_ID")
	if a := getenv("SLURM_ARRAY_JOB_ID"); a != "" {
		id = a + "_" + getenv("SLURM_ARRAY_TASK_ID")
	}
	if !jobIDRe.MatchString(strings.ReplaceAll(id, "_", "")) {
		return
	}
	root := getenv("BURST_CHECKPOINT_ROOT")
	if root == "" {
		b, err := os.ReadFile(CheckpointRootFile)
		if err != nil {
			return
		}
		root = strings.TrimSpace(string(b))
	}
	if !filepath.IsAbs(root) || strings.ContainsAny(root, " \t\n\"'$`\\") {
		return
	}
	dir := filepath.Join(root, id)
	_ = os.MkdirAll(dir, 0o700) // the job's own user runs the TaskProlog
	fmt.Fprintf(w, "export BURST_CHECKPOINT_DIR=%s\n", dir)
}
