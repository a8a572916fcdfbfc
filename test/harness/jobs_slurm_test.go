package harness

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestJobOwnersFromSlurm: Sbatch runs a job as the cluster's ordinary user
// (Slurm's UserId says so), SbatchAsRoot as root, and CheckJobOwners names
// exactly the job root submitted around the harness (a plain sbatch as
// root), from Slurm's own records: the queue, and the job completion log
// once the jobs ended.
func TestJobOwnersFromSlurm(t *testing.T) {
	c := New(t, cloudOptions())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	u := c.User()
	if u.UID == 0 || u.Name != DefaultUser {
		t.Fatalf("cluster user %+v: want %s, not root", u, DefaultUser)
	}
	user, err := c.Sbatch(ctx, "--hold", "--wrap", "true")
	if err != nil {
		t.Fatal(err)
	}
	root, err := c.SbatchAsRoot(ctx, "--hold", "--wrap", "true")
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Run(ctx, "sbatch", "--parsable", "--hold", "--wrap", "true")
	if err != nil {
		t.Fatal(err)
	}
	stray := strings.TrimSpace(out)
	sub := c.Submitted()
	if len(sub) != 2 || sub[0].ID != user || sub[0].UID != u.UID || sub[0].AsRoot || sub[1].ID != root || sub[1].UID != 0 || !sub[1].AsRoot {
		t.Fatalf("Submitted() = %+v; want job %s as uid %d, job %s as root", sub, user, u.UID, root)
	}
	check := func(when string) {
		t.Helper()
		n, partial, err := c.CheckJobOwners(ctx)
		if partial != nil || n != 3 {
			t.Fatalf("%s: checked %d jobs (partial: %v), want 3", when, n, partial)
		}
		if err == nil || !strings.Contains(err.Error(), "jobs "+stray+" ran as root") {
			t.Fatalf("%s: CheckJobOwners = %v; want job %s, the plain root sbatch, named alone", when, err, stray)
		}
	}
	check("queued")
	// cancelled, the jobs are written to the completion log with Slurm's
	// owner (slurmctld keeps them MinJobAge more)
	if _, err := c.Run(ctx, "scancel", user, root, stray); err != nil {
		t.Fatal(err)
	}
	var jobs []Job
	for deadline := time.Now().Add(30 * time.Second); len(jobs) < 3; time.Sleep(200 * time.Millisecond) {
		b, _ := os.ReadFile(c.JobCompLog())
		if jobs = ParseJobCompOwners(string(b)); time.Now().After(deadline) {
			t.Fatalf("job completion log %s has %+v, want the 3 jobs", c.JobCompLog(), jobs)
		}
	}
	for _, j := range jobs {
		if want := map[string]int{user: u.UID, root: 0, stray: 0}[j.ID]; j.UID != want {
			t.Errorf("completion log: job %s uid %d, want %d", j.ID, j.UID, want)
		}
	}
	check("ended")
}
