package ec2

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
)

// FuzzUnavailableFile: whatever the unavailable-offerings file holds, the
// cache neither panics nor loses a new mark: after Mark the offering is in
// the snapshot and the file is valid again.
func FuzzUnavailableFile(f *testing.F) {
	f.Add([]byte(`{"version":1,"entries":[{"instance_type":"g6.xlarge","zone":"us-east-1a","capacity":"spot","code":"InsufficientInstanceCapacity","until":"2030-01-01T00:00:00Z"}]}`))
	f.Add([]byte(`{"version":1,"entries":[{"instance_type":"g6.xl`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, UnavailableFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		now := time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC)
		c := NewUnavailableCache(dir, 3*time.Minute, func() time.Time { return now })
		c.Snapshot()
		o := cloud.Offering{InstanceType: "g5.xlarge", Zone: "us-east-1b", Capacity: capacity.Spot}
		if err := c.Mark("InsufficientInstanceCapacity", o); err != nil {
			t.Fatal(err)
		}
		snap, err := c.Snapshot()
		if err != nil || snap[o.Key()] != "InsufficientInstanceCapacity" {
			t.Fatalf("after Mark on top of %q: %v %v", data, snap, err)
		}
	})
}
