package interruption

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
)

func TestNoteRoundTrip(t *testing.T) {
	n := Note{Lost: []string{"a10g-2", "a10g-1", "a10g-2"}, Instance: "i-0abc12345", Run: runStart.Add(300 * time.Millisecond), Restart: 4, By: "sizer", Why: "spot\ninterruption (terminate)"}
	s := n.String()
	want := "burst-requeue lost=a10g-1,a10g-2 instance=i-0abc12345 run=2026-12-01T11:00:00Z restart=4 by=sizer: spot interruption (terminate)"
	if s != want {
		t.Fatalf("String() = %q\nwant %q", s, want)
	}
	got, ok := ParseNote(s)
	if !ok || !slices.Equal(got.Lost, []string{"a10g-1", "a10g-2"}) || got.Instance != "i-0abc12345" || !got.Run.Equal(runStart) || got.Restart != 4 || got.By != "sizer" {
		t.Fatalf("ParseNote = %+v, %v", got, ok)
	}
	if !got.Ends(slurm.Job{StartTime: runStart.Add(20 * time.Second), RestartCount: 5}) {
		t.Error("the requeued run's epilog is not recognised")
	}
	for _, j := range []slurm.Job{{RestartCount: 4}, {RestartCount: 6}} {
		if got.Ends(j) {
			t.Errorf("Ends(%+v): another run taken for the requeue", j)
		}
	}
	c := got.Consumed([]string{"a10g-3"})
	if _, ok := ParseNote(c); ok || !strings.HasPrefix(c, "burst-requeued lost=a10g-1,a10g-2 ") || !strings.HasSuffix(c, "; held a10g-3 for the relaunch") {
		t.Errorf("Consumed = %q", c)
	}
	if n := (Note{Lost: []string{"x"}, By: "agent", Run: runStart}).String(); !strings.Contains(n, "instance=- ") {
		t.Errorf("no instance: %q", n)
	}
}

func TestParseNoteRefuses(t *testing.T) {
	for _, s := range []string{
		"",
		"burst 2026-12-01T11:00:00Z: requeued from a10g-1: instance gone",
		"burst-requeue lost=a10g-1 instance=i-0abc12345 run=2026-12-01T11:00:00Z restart=0 by=me: x",
		"burst-requeue lost=a10g-1;rm instance=i-0abc12345 run=2026-12-01T11:00:00Z restart=0 by=agent: x",
		"burst-requeue lost=a10g-1 instance=vol-1 run=2026-12-01T11:00:00Z restart=0 by=agent: x",
		"burst-requeue lost=a10g-1 instance=- run=yesterday restart=0 by=agent: x",
		"burst-requeue lost=a10g-1 instance=- run=2026-12-01T11:00:00Z restart=99999999999 by=agent: x",
		"burst-requeue lost=,a instance=- run=2026-12-01T11:00:00Z restart=0 by=agent: x",
		"burst-requeue lost=a instance=- run=2026-12-01T11:00:00Z restart=0 by=agent: " + strings.Repeat("x", 300),
	} {
		if n, ok := ParseNote(s); ok {
			t.Errorf("ParseNote(%q) = %+v, want refused", s, n)
		}
	}
}

func TestMergeNote(t *testing.T) {
	old := Note{Lost: []string{"n-3"}, Run: runStart, Restart: 1, By: "agent"}.String()
	got := mergeNote(old, Note{Lost: []string{"n-1"}, Run: runStart, Restart: 1, By: "sizer"})
	if !slices.Equal(got.Lost, []string{"n-1", "n-3"}) {
		t.Errorf("same run: lost %v", got.Lost)
	}
	got = mergeNote(old, Note{Lost: []string{"n-1"}, Run: runStart.Add(time.Hour), Restart: 2, By: "sizer"})
	if !slices.Equal(got.Lost, []string{"n-1"}) {
		t.Errorf("another run: lost %v", got.Lost)
	}
}

// FuzzParseNote: never panics; whatever parses renders back to itself.
func FuzzParseNote(f *testing.F) {
	f.Add(Note{Lost: []string{"a10g-1"}, Instance: "i-0abc12345", Run: runStart, By: "agent", Why: "spot interruption"}.String())
	f.Add("burst-requeue lost=a,b instance=- run=2026-12-01T11:00:00Z restart=7 by=sizer: ")
	f.Add("burst: budget exceeded")
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := ParseNote(s)
		if !ok {
			return
		}
		if len(n.Lost) == 0 || (n.By != "agent" && n.By != "sizer") {
			t.Fatalf("accepted %q as %+v", s, n)
		}
		back, ok := ParseNote(n.String())
		if !ok || !back.Run.Equal(n.Run) || back.Restart != n.Restart || back.Instance != n.Instance {
			t.Fatalf("%q -> %+v -> %q -> %+v %v", s, n, n.String(), back, ok)
		}
	})
}
