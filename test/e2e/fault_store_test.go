package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/sizer/store"
	"github.com/burst-hpc/burst/test/stack"
)

// TestFaultSQLiteCorrupt: the sizer's database is damaged (a disk error,
// a bad restore) while the sizer is down. burst-sizer refuses to start on
// it, saying which file is damaged and what to do; meanwhile a job still
// runs (burst-resume ranks in-process and journals its launch). Once the
// admin moves the file aside as the message says, the sizer starts on a
// new database and replays the journal: spend equals EC2's bill.
func TestFaultSQLiteCorrupt(t *testing.T) {
	s := faultStart(t, 0, stack.Options{})
	s.StopSizer()
	path := filepath.Join(s.Cfg.Sizer.StateDir, store.FileName)
	for _, suf := range []string{"-wal", "-shm"} {
		os.Remove(path + suf)
	}
	garbage := []byte(strings.Repeat("this is not a database page\n", 4096))
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	err := s.StartSizer(context.Background())
	if err == nil {
		s.StopSizer()
		t.Fatal("burst-sizer started on a damaged database")
	}
	log := readFile(filepath.Join(s.Dir, "sizer.log"))
	if !strings.Contains(log, path) || !strings.Contains(log, "move it aside") {
		t.Errorf("the sizer's refusal does not name %s and say what to do:\n%s", path, log)
	}
	id := sbatch(t, s, "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 1")
	waitJob(t, s, id, 3*time.Minute, "COMPLETED")
	if err := os.Rename(path, path+".damaged"); err != nil {
		t.Fatal(err)
	}
	if err := s.StartSizer(context.Background()); err != nil {
		t.Fatalf("the sizer on a new database: %v", err)
	}
	assertClean(t, s, time.Minute)
	// start's ledger check replays the journal into the new database
}
