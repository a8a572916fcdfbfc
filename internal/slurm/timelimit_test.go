package slurm

import (
	"testing"
	"time"
)

func TestParseTimeLimitForms(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90", 90 * time.Minute, true},
		{"5:30", 5*time.Minute + 30*time.Second, true},
		{"2:03:04", 2*time.Hour + 3*time.Minute + 4*time.Second, true},
		{"1-2", 26 * time.Hour, true},
		{"1-2:30", 26*time.Hour + 30*time.Minute, true},
		{"1-2:30:15", 26*time.Hour + 30*time.Minute + 15*time.Second, true},
		{"0", 0, true},
		{"INFINITE", 0, false},
		{"1:2:3:4", 0, false},
		{"-5", 0, false},
		{"1-2-3", 0, false},
		{"1000001", 0, false},
		{"", 0, false},
	} {
		if got, ok := ParseTimeLimit(c.in); got != c.want || ok != c.ok {
			t.Errorf("ParseTimeLimit(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
