package billing

import (
	"testing"
	"time"
)

func TestMonthStart(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.FixedZone("x", -5*3600))
	if ms := MonthStart(now); !ms.Equal(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("month start %v", ms)
	}
	if ms := MonthStart(time.Date(2026, 3, 31, 22, 0, 0, 0, time.FixedZone("y", -5*3600))); !ms.Equal(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("UTC month: %v", ms)
	}
}
