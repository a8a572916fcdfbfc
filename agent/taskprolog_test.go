package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTaskProlog: the TaskProlog (the job's user) only says where the
// directory is, with the one path rule: <root>/<SLURM_JOB_ID>, array tasks
// included.
func TestTaskProlog(t *testing.T) {
	root := t.TempDir()
	for _, env := range []map[string]string{
		{"SLURM_JOB_ID": "42", "BURST_CHECKPOINT_ROOT": root},
		{"SLURM_JOB_ID": "42", "SLURM_ARRAY_JOB_ID": "40", "SLURM_ARRAY_TASK_ID": "2", "BURST_CHECKPOINT_ROOT": root},
	} {
		var out bytes.Buffer
		taskProlog(&out, func(k string) string { return env[k] })
		want := "export BURST_CHECKPOINT_DIR=" + filepath.Join(root, "42") + "\n"
		if out.String() != want {
			t.Fatalf("%v: got %q, want %q", env, out.String(), want)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "42")); err == nil {
		t.Fatal("the TaskProlog made the directory; the Prolog (root) does")
	}
	for _, bad := range []map[string]string{
		{"SLURM_JOB_ID": "42; rm -rf /", "BURST_CHECKPOINT_ROOT": root},
		{"SLURM_JOB_ID": "42", "BURST_CHECKPOINT_ROOT": "relative"},
		{"SLURM_JOB_ID": "42", "BURST_CHECKPOINT_ROOT": "/x $(id)"},
		{"SLURM_JOB_ID": "42", "BURST_CHECKPOINT_ROOT": "/x/../etc"},
	} {
		var out bytes.Buffer
		taskProlog(&out, func(k string) string { return bad[k] })
		if out.Len() != 0 {
			t.Errorf("%v: printed %q, want nothing", bad, out.String())
		}
	}
}

// TestProlog runs the Prolog as slurmd would (as root): the job's user gets
// <root>/<job id>, 0700; what was in the way is moved aside and reported.
func TestProlog(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: the Prolog runs as root")
	}
	root := t.TempDir()
	os.Chmod(root, 0o755)
	uid := 61003
	os.Symlink("/etc", filepath.Join(root, "77"))
	env := map[string]string{"SLURM_SCRIPT_CONTEXT": "prolog_slurmd", "SLURM_JOB_ID": "77", "SLURM_JOB_UID": strconv.Itoa(uid), "SLURM_JOB_GID": strconv.Itoa(uid), "BURST_CHECKPOINT_ROOT": root}
	var stderr bytes.Buffer
	if code := prolog(&stderr, func(k string) string { return env[k] }, time.Unix(1_800_000_000, 0)); code != 0 {
		t.Fatalf("prolog: %d %s", code, stderr.String())
	}
	fi, err := os.Lstat(filepath.Join(root, "77"))
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Uid != uint32(uid) {
		t.Fatalf("job dir %v %v", fi, err)
	}
	if !strings.Contains(stderr.String(), "moved") || !strings.Contains(stderr.String(), "77.moved-1800000000") {
		t.Errorf("the move aside is not reported: %s", stderr.String())
	}
	for _, bad := range []map[string]string{
		{"SLURM_JOB_ID": "78", "SLURM_JOB_UID": "x", "BURST_CHECKPOINT_ROOT": root},
		{"SLURM_JOB_ID": "7_8", "SLURM_JOB_UID": "1", "BURST_CHECKPOINT_ROOT": root},
		{"SLURM_JOB_ID": "79", "SLURM_JOB_UID": "1", "SLURM_JOB_GID": "1"},
	} {
		if code := prolog(&stderr, func(k string) string { return bad[k] }, time.Now()); code == 0 {
			t.Errorf("%v: prolog succeeded", bad)
		}
	}
}
