package server

import (
	"testing"
	"time"
)

// TestLimiter: a bucket of 2 refilled at 0.5 token/s, on a fake clock; the
// waits are worked out by hand.
func TestLimiter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newLimiter(0.5, 2, func() time.Time { return now })
	for i := 0; i < 2; i++ {
		if ok, _ := l.allow("a"); !ok {
			t.Fatalf("request %d within the burst refused", i+1)
		}
	}
	ok, wait := l.allow("a")
	if ok || wait != 2*time.Second {
		t.Fatalf("third request: ok=%v wait=%v, want refused with 2s to wait", ok, wait)
	}
	if ok, _ := l.allow("b"); !ok {
		t.Fatal("another key shares the first key's bucket")
	}
	now = now.Add(time.Second)
	if ok, wait := l.allow("a"); ok || wait != time.Second {
		t.Fatalf("after 1s: ok=%v wait=%v, want refused with 1s left (a refusal takes no token)", ok, wait)
	}
	now = now.Add(time.Second)
	if ok, _ := l.allow("a"); !ok {
		t.Fatal("after the bucket refilled one token: refused")
	}
	var off *limiter
	if ok, _ := off.allow("a"); !ok {
		t.Fatal("no limiter must allow everything")
	}
}
