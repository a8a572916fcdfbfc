package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestTaskProlog(t *testing.T) {
	root := t.TempDir()
	env := map[string]string{"SLURM_JOB_ID": "42", "BURST_CHECKPOINT_ROOT": root}
	var out bytes.Buffer
	taskProlog(&out, func(k string) string { return env[k] })
	want := "export BURST_CHECKPOINT_DIR=" + filepath.Join(root, "42") + "\n"
	if out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
	if fi, err := os.Stat(filepath.Join(root, "42")); err != nil || !fi.IsDir() {
		t.Fatalf("checkpoint dir not made: %v", err)
	}
	for _, bad := range []map[string]string{
		{"SLURM_JOB_ID": "42; rm -rf /", "BURST_CHECKPOINT_ROOT": root},
		{"SLURM_JOB_ID": "42", "BURST_CHECKPOINT_ROOT": "relative"},
		{"SLURM_JOB_ID": "42", "BURST_CHECKPOINT_ROOT": "/x $(id)"},
	} {
		out.Reset()
		taskProlog(&out, func(k string) string { return bad[k] })
		if out.Len() != 0 {
			t.Errorf("%v: printed %q, want nothing", bad, out.String())
		}
	}
}
