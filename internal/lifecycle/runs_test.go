package lifecycle

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
)

func TestOutputPaths(t *testing.T) {
	cases := []struct {
		j    slurm.Job
		want []string
	}{
		{slurm.Job{ID: 7, WorkDir: "/home/ann"}, []string{"/home/ann/slurm-7.out"}},
		{slurm.Job{ID: 7, WorkDir: "/home/ann", StdOut: "train-%j.out", StdErr: "/scratch/%u/%x.%4j.err", User: "ann", Name: "ft"}, []string{"/home/ann/train-7.out", "/scratch/ann/ft.7.err"}},
		{slurm.Job{ID: 8, ArrayJobID: 5, WorkDir: "/w"}, []string{"/w/slurm-5_0.out"}},
		{slurm.Job{ID: 9, WorkDir: "/w", StdOut: "/dev/null", StdErr: "out-%N-%%.log", Nodes: "l4-[2-3]"}, []string{"/w/out-l4-2-%.log"}},
		{slurm.Job{ID: 9, WorkDir: "/w", StdOut: "x-%b.out", StdErr: "/dev/null"}, nil}, // an unknown pattern: no guess
	}
	for _, c := range cases {
		if got := OutputPaths(c.j); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%+v: got %v want %v", c.j, got, c.want)
		}
	}
}

// TestFindMarker: the OOM markers are found in the output's tail; a
// symbolic link, a file another user owns or a directory is not read.
func TestFindMarker(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "slurm-1.out")
	body := strings.Repeat("step ok\n", 20000) + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
	if err := os.WriteFile(out, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if m, err := findMarker(out, me.Username); err != nil || m != "CUDA out of memory" {
		t.Errorf("marker %q %v", m, err)
	}
	clean := filepath.Join(dir, "clean.out")
	os.WriteFile(clean, []byte("RuntimeError: shape mismatch\n"), 0o600)
	if m, err := findMarker(clean, me.Username); err != nil || m != "" {
		t.Errorf("clean output: %q %v", m, err)
	}
	link := filepath.Join(dir, "link.out")
	os.Symlink(out, link)
	if _, err := findMarker(link, me.Username); err == nil {
		t.Error("followed a symbolic link")
	}
	if _, err := findMarker(dir, me.Username); err == nil {
		t.Error("read a directory")
	}
	if me.Uid == "0" {
		if err := os.Chown(out, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if _, err := findMarker(out, "root"); err == nil || !strings.Contains(err.Error(), "owned by uid 12345") {
			t.Errorf("read another user's file: %v", err)
		}
	}
}

// startRecorder keeps what RecordStart sends.
type startRecorder struct{ starts []sizerapi.JobStart }

func (r *startRecorder) JobStarted(_ context.Context, s sizerapi.JobStart) error {
	r.starts = append(r.starts, s)
	return nil
}
func (r *startRecorder) JobEnded(context.Context, sizerapi.JobEnd) error { return nil }

// TestRecordStartSendsSubmitTime: the job's start carries Slurm's submit
// time (the start of its wait on the dashboard) and the prolog's now.
func TestRecordStartSendsSubmitTime(t *testing.T) {
	cfg := demoConfig(t)
	node := cfg.Classes[0].Name + "-1"
	submit := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	now := submit.Add(97 * time.Second)
	sl := slurmfake.New([]slurm.Job{{ID: 42, Name: "ft", User: "ann", Account: "nlp", State: "CONFIGURING", Nodes: node, SubmitTime: submit}}, nil)
	rec := &startRecorder{}
	RecordStart(context.Background(), cfg, sl, rec, 42, node, now, nil)
	if len(rec.starts) != 1 {
		t.Fatalf("starts sent: %+v", rec.starts)
	}
	if s := rec.starts[0]; !s.Submit.Equal(submit) || !s.Start.Equal(now) || s.JobID != "42" {
		t.Errorf("start sent: submit %v start %v job %s; want %v, %v, 42", s.Submit, s.Start, s.JobID, submit, now)
	}
}
