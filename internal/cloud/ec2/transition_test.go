package ec2

import (
	"strings"
	"testing"
	"time"
)

func TestParseTransitionReason(t *testing.T) {
	for _, c := range []struct {
		in  string
		who string
		at  string
		ok  bool
	}{
		{"User initiated (2026-12-01 10:00:00 GMT)", "User", "2026-12-01T10:00:00Z", true},
		{"Service initiated (2026-12-31 23:59:59 GMT)", "Service", "2026-12-31T23:59:59Z", true},
		{"User initiated (2026-02-30 10:00:00 GMT)", "", "", false}, // no such day
		{"User initiated", "", "", false},
		{"", "", "", false},
		{"(2026-12-01 10:00:00 GMT)", "", "2026-12-01T10:00:00Z", true},
		{"User initiated (2026-12-01 10:00:00 PST)", "", "", false},
		{"User initiated (2026-12-01T10:00:00Z)", "", "", false},
	} {
		who, at, ok := ParseTransitionReason(c.in)
		if ok != c.ok || who != c.who || ok && at.Format(time.RFC3339) != c.at {
			t.Errorf("%q: %q %v %v, want %q %s %v", c.in, who, at, ok, c.who, c.at, c.ok)
		}
	}
}

func FuzzParseTransitionReason(f *testing.F) {
	f.Add("User initiated (2026-12-01 10:00:00 GMT)")
	f.Add("Service initiated (")
	f.Add("((()))")
	f.Fuzz(func(t *testing.T, s string) {
		who, at, ok := ParseTransitionReason(s)
		if !ok {
			return
		}
		if at.Location() != time.UTC || at.Nanosecond() != 0 || strings.Contains(who, "(") {
			t.Fatalf("%q: %q %v", s, who, at)
		}
		// what it read is what EC2 would write for that time
		if !strings.Contains(s, at.Format("2006-01-02 15:04:05")) {
			t.Fatalf("%q: read %v, which it does not contain", s, at)
		}
	})
}
