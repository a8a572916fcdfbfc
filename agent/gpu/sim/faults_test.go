package sim

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/gpuhealth"
)

func TestParseFaults(t *testing.T) {
	for _, tc := range []struct {
		in, err string
		n       int
	}{
		{in: `{"faults":[]}`},
		{in: `{"faults":[{"kind":"xid","gpu":3,"xid":79},{"kind":"gpu_lost","gpu":0},{"kind":"gpu_count","count":7},{"kind":"ecc_uncorrected_volatile","gpu":1,"count":2}]}`, n: 4},
		{in: `{"faults":[{"kind":"xid","gpu":3}]}`, err: "faults[0]: xid 0: want 1..999"},
		{in: `{"faults":[{"kind":"xid","gpu":8,"xid":79}]}`, err: "faults[0]: gpu 8: want 0..7"},
		{in: `{"faults":[{"kind":"gpu_count","count":8}]}`, err: "want fewer than the node's 8 GPUs"},
		{in: `{"faults":[{"kind":"melted","gpu":1}]}`, err: `faults[0]: kind "melted" cannot be injected`},
		{in: `{"faults":[{"gpu":1}]}`, err: "faults[0]: kind missing"},
		{in: `{"faults":[{"kind":"xid","gpu":1,"xid":79,"extra":1}]}`, err: `unknown field "extra"`},
		{in: `{"faults":[{"kind":"xid","gpu":-1,"xid":79},{"kind":"gpu_model","gpu":0}]}`, err: "faults[1]"},
	} {
		f, err := ParseFaults(strings.NewReader(tc.in), 8)
		if tc.err == "" {
			if err != nil || len(f.Faults) != tc.n {
				t.Errorf("%s: %d faults, %v", tc.in, len(f.Faults), err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: got %v, want an error with %q", tc.in, err, tc.err)
		}
	}
}

func TestFaultFileRootOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("BURST_REQUIRE_SLURM") == "1" {
			t.Fatal("the fault file must be root's: run as root (make test does)")
		}
		t.Skip("SKIP: needs root to own the fault file (run as root; make test does)")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "faults.json")
	if f, err := ReadFaultFile(path, 8); err != nil || len(f.Faults) != 0 {
		t.Fatalf("missing file: %v, %v", f, err)
	}
	os.WriteFile(path, []byte(`{"faults":[{"kind":"xid","gpu":1,"xid":79}]}`), 0o644)
	if f, err := ReadFaultFile(path, 8); err != nil || len(f.Faults) != 1 {
		t.Fatalf("root's file: %v, %v", f, err)
	}
	os.Chmod(path, 0o666)
	if _, err := ReadFaultFile(path, 8); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("world-writable file: %v", err)
	}
	os.Chmod(path, 0o644)
	os.Chown(path, 65534, 65534)
	if _, err := ReadFaultFile(path, 8); err == nil || !strings.Contains(err.Error(), "not root") {
		t.Errorf("file of nobody: %v", err)
	}
	os.Chown(path, 0, 0)
	os.Chmod(dir, 0o777)
	if _, err := ReadFaultFile(path, 8); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("world-writable directory: %v", err)
	}
	os.Chmod(dir, 0o755)
	link := filepath.Join(dir, "link.json")
	os.Symlink(path, link)
	if _, err := ReadFaultFile(link, 8); err == nil {
		t.Error("a symlink was followed")
	}
}

func TestHealthInjected(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	path := filepath.Join(dir, "faults.json")
	r, err := New(Options{GPUs: 4, FaultFile: path})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if evs, err := r.Health(ctx, 0); err != nil || len(evs) != 0 {
		t.Fatalf("healthy: %v %v", evs, err)
	}
	if os.Geteuid() == 0 {
		os.WriteFile(path, []byte(`{"faults":[{"kind":"xid","gpu":3,"xid":79}]}`), 0o644)
		evs, err := r.Health(ctx, 5*time.Second)
		if err != nil || len(evs) != 1 || evs[0].Kind != gpuhealth.KindXid || evs[0].Xid != 79 || evs[0].GPU != 3 || evs[0].BusID != "0000:13:00.0" {
			t.Fatalf("after the file: %+v %v", evs, err)
		}
		// once only, and the file's entry is not applied again
		if evs, _ := r.Health(ctx, 0); len(evs) != 0 {
			t.Errorf("the Xid came again: %+v", evs)
		}
		// a fault for another instance is not this one's
		os.WriteFile(path, []byte(`{"faults":[{"kind":"xid","gpu":3,"xid":79},{"kind":"gpu_lost","gpu":0,"instance":"i-0other"}]}`), 0o644)
		if evs, _ := r.Health(ctx, 0); len(evs) != 0 {
			t.Errorf("another instance's fault applied: %+v", evs)
		}
	}
	r.Inject(Fault{Kind: gpuhealth.KindLost, GPU: 1})
	r.Inject(Fault{Kind: gpuhealth.KindECCVolatile, GPU: 2, Count: 2})
	if err := r.Inject(Fault{Kind: gpuhealth.KindCount, Count: 3}); err != nil {
		t.Fatal(err)
	}
	evs, _ := r.Health(ctx, 0)
	if len(evs) != 2 || evs[0].Kind != gpuhealth.KindLost || evs[1].Kind != gpuhealth.KindECCVolatile || evs[1].Count != 2 {
		t.Errorf("lost and ECC: %+v", evs)
	}
	if d, _ := r.Devices(); len(d) != 3 {
		t.Errorf("%d devices after gpu_count 3", len(d))
	}
	if s, _ := r.Sample(ctx); len(s) != 3 {
		t.Errorf("%d samples after gpu_count 3", len(s))
	}
	if err := r.Inject(Fault{Kind: gpuhealth.KindXid, GPU: 9, Xid: 79}); err == nil {
		t.Error("a fault on GPU 9 of 4 was accepted")
	}
}
