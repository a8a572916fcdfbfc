package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// TestEndRevokesTheNodeIdentity: when burst records an instance's end
// (burst-suspend, the reconciler's EC2 view), its node identity is revoked
// at once, also for an instance the ledger has no launch record of (a
// credential stolen from it stops working, and cannot be reissued), while
// the next instance with the same node name keeps its own.
func TestEndRevokesTheNodeIdentity(t *testing.T) { forDrivers(t, testEndRevokesTheNodeIdentity) }

func testEndRevokesTheNodeIdentity(t *testing.T, d driverCase) {
	ctx := context.Background()
	s := d.fresh(t).open(t)
	defer s.Close()
	t0 := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	issue := func(id string) NodeIdentity {
		ni := NodeIdentity{InstanceID: id, Node: "l4-1", NonceHash: strings.Repeat("a", 64), InstanceType: "g6.xlarge", Zone: "us-east-1a",
			Lifecycle: "spot", Pending: t0, LastIssued: t0, Expires: t0.Add(time.Hour)}
		if err := s.RecordIssue(ctx, ni); err != nil {
			t.Fatal(err)
		}
		return ni
	}
	old := issue("i-0000000000000old1") // no launch record: a fleet instance, a lost journal
	if ended, why, err := s.InstanceEnd(ctx, old.InstanceID); err != nil || ended {
		t.Fatalf("before its end: %v %q %v", ended, why, err)
	}
	known, err := s.RecordEnd(ctx, old.InstanceID, t0.Add(10*time.Minute), sizerapi.SourceEC2, "Client.UserInitiatedShutdown")
	if err != nil || known {
		t.Fatalf("RecordEnd: known %v, %v", known, err)
	}
	if ended, why, err := s.InstanceEnd(ctx, old.InstanceID); err != nil || !ended || !strings.Contains(why, "instance ended") {
		t.Errorf("after its end: ended %v %q %v; want revoked", ended, why, err)
	}
	if err := s.RecordIssue(ctx, old); !errors.Is(err, ErrRevoked) {
		t.Errorf("reissue after the end: %v, want ErrRevoked", err)
	}
	next := issue("i-0000000000000new2") // the next instance named l4-1
	if ended, _, err := s.InstanceEnd(ctx, next.InstanceID); err != nil || ended {
		t.Errorf("the next instance with the same node name: ended %v %v", ended, err)
	}

	// EC2's state-change event alone (the interruption queue) revokes it
	if err := s.RecordState(ctx, next.InstanceID, "running", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if ended, _, _ := s.InstanceEnd(ctx, next.InstanceID); ended {
		t.Error("revoked by a running state")
	}
	if err := s.RecordState(ctx, next.InstanceID, "shutting-down", t0.Add(20*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if ended, why, err := s.InstanceEnd(ctx, next.InstanceID); err != nil || !ended || !strings.Contains(why, "shutting-down") {
		t.Errorf("after EC2's shutting-down event: ended %v %q %v; want revoked", ended, why, err)
	}
}
