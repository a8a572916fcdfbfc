package breaker

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzStateFile: whatever the breaker's state file holds (cut short,
// corrupt, hand-edited), the breaker neither panics nor wedges: a class
// still trips after Threshold failures, and the file it writes then is
// valid and names the class open.
func FuzzStateFile(f *testing.F) {
	f.Add([]byte(`{"version":1,"classes":[{"class":"l4","state":"open","failures":3,"trips":1,"until":"2026-11-29T15:05:00Z","total_trips":1}]}`))
	f.Add([]byte(`{"version":1,"classes":[{"class":"l4","state":"half-open","failures":-9,"trips":999999999}]}`))
	f.Add([]byte(`{"version":1,"classes":[{"cla`))
	f.Add([]byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, File), data, 0o644); err != nil {
			t.Fatal(err)
		}
		c := newClock()
		b := New(Options{Dir: dir, Threshold: 2, Cooldown: time.Minute, Now: c.now})
		b.Allow("l4")
		b.Snapshot()
		b.Success("fresh")
		b.Failure("fresh", "x")
		b.Failure("fresh", "x")
		if allowed(b, "fresh") {
			t.Fatal("a class did not trip after Threshold failures on top of this state file")
		}
		out, _ := os.ReadFile(filepath.Join(dir, File))
		m, err := decode(File, out)
		if err != nil || m["fresh"].State != Open {
			t.Fatalf("file after the trip: %v %+v\n%s", err, m["fresh"], out)
		}
	})
}
