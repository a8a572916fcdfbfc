package e2e

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/sizer/store"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// TestFaultStoreLocked: another process (a backup, an admin's sqlite3
// shell) takes the sizer's database lock as a job's instance is launched
// (pending) and holds it, past the store's 10 s busy timeout, until the
// sizer has been refused the instance's "running" state change (EC2's
// event through the EventBridge queue: the start of what EC2 bills), then
// lets go. The job completes, and what the sizer could not write then is
// in the ledger afterwards: spend equals EC2's bill (start's ledger
// check), although SQS would bring the refused message back only after
// its 5 minute visibility timeout.
func TestFaultStoreLocked(t *testing.T) {
	versionBlind(t)
	// 5 s of pending: the lock is in place before the running event
	s := faultStart(t, 0, stack.Options{Emulator: ec2emu.Options{BootDelay: 5 * time.Second}})
	db, err := sql.Open("sqlite", "file:"+filepath.Join(s.Cfg.Sizer.StateDir, store.FileName)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	id := sbatch(t, s, "--gres=gpu:1", "--constraint=l4", "--wrap", "sleep 2")
	var in ec2emu.Instance
	eventually(t, 2*time.Minute, "an instance launched for job "+id, func() bool {
		for _, i := range liveInstances(s) {
			if i.Tags[ec2p.TagJobID] == id {
				in = i
				return true
			}
		}
		return false
	})
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatalf("locking the sizer's database: %v", err)
	}
	// the sizer's writes take turns on its one connection, each waiting out
	// the busy timeout
	// the proof that the fault happened: the sizer's log says the database
	// refused the running state (it went to the spool)
	sizerLog := filepath.Join(s.Dir, "sizer.log")
	refused := func() bool {
		for _, l := range strings.Split(readFile(sizerLog), "\n") {
			if strings.Contains(l, "did not take an EC2 state change") && strings.Contains(l, `"instance_id":"`+in.ID+`","state":"running"`) {
				return true
			}
		}
		return false
	}
	eventually(t, 2*time.Minute, "the sizer's database refused "+in.ID+"'s running state (sizer.log: did not take an EC2 state change)", refused)
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatalf("unlocking: %v", err)
	}
	waitJob(t, s, id, 3*time.Minute, "COMPLETED")
	assertClean(t, s, time.Minute)
}
