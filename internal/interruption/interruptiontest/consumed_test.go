package interruptiontest

import (
	"slices"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/interruption"
)

// A consumed note reads back with its lost nodes, restart count and the
// nodes it held; one without a hold holds none; a live note is not one.
func TestParseConsumed(t *testing.T) {
	n := interruption.Note{Lost: []string{"a10g-1", "a10g-2"}, Instance: "i-1", Run: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), Restart: 4, By: "agent", Why: "spot"}
	c := n.Consumed([]string{"a10g-3"})
	if back, held, ok := ParseConsumed(c); !ok || !slices.Equal(held, []string{"a10g-3"}) || back.Restart != 4 || !slices.Equal(back.Lost, n.Lost) {
		t.Errorf("ParseConsumed(%q) = %+v %v %v", c, back, held, ok)
	}
	if _, held, ok := ParseConsumed(n.Consumed(nil)); !ok || len(held) != 0 {
		t.Errorf("consumed without a hold: %v %v", held, ok)
	}
	if _, _, ok := ParseConsumed(n.String()); ok {
		t.Errorf("a live note %q read as consumed", n.String())
	}
}
