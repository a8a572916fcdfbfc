package cloud

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/capacity"
)

func TestErrorIsAndReason(t *testing.T) {
	e := &Error{Kind: KindInsufficientCapacity, Code: "InsufficientInstanceCapacity", Op: "launching gpu-1",
		Message: "We currently do not have sufficient g5.xlarge capacity",
		Offerings: []Offering{
			{InstanceType: "g5.xlarge", Zone: "us-east-1a", Capacity: capacity.Spot},
			{InstanceType: "g6.xlarge", Zone: "us-east-1a", Capacity: capacity.Spot},
			{InstanceType: "g5.xlarge", Zone: "us-east-1b", Capacity: capacity.OnDemand},
		}}
	wrapped := fmt.Errorf("resuming: %w", e)
	if !errors.Is(wrapped, ErrInsufficientCapacity) || errors.Is(wrapped, ErrThrottled) || KindOf(wrapped) != KindInsufficientCapacity {
		t.Errorf("classification of %v wrong", wrapped)
	}
	want := "burst: InsufficientInstanceCapacity for g5.xlarge,g6.xlarge spot in us-east-1a; g5.xlarge on-demand in us-east-1b"
	if got := Reason(wrapped); got != want {
		t.Errorf("reason = %q\nwant     %q", got, want)
	}
	if !strings.HasPrefix(e.Error(), "launching gpu-1: InsufficientInstanceCapacity for") || !strings.HasSuffix(e.Error(), "capacity") {
		t.Errorf("Error() = %q", e.Error())
	}
	if got := Reason(errors.New(strings.Repeat("x", 300))); len(got) != 120 || !strings.HasSuffix(got, "...") {
		t.Errorf("long reason not cut: %d %q", len(got), got)
	}
	if Reason(nil) != "" {
		t.Error("nil reason")
	}
	for k, sentinel := range map[Kind]error{KindThrottled: ErrThrottled, KindQuota: ErrQuota, KindUnauthorized: ErrUnauthorized,
		KindNotFound: ErrNotFound, KindInvalid: ErrInvalid, KindInsufficientCapacity: ErrInsufficientCapacity} {
		is := func(err error) bool { return errors.Is(err, sentinel) }
		if !is(&Error{Kind: k}) || is(&Error{Kind: KindUnknown}) {
			t.Errorf("Is helper for %v", k)
		}
	}
	if KindOf(fmt.Errorf("x: %w", ErrQuota)) != KindQuota {
		t.Error("KindOf on a sentinel")
	}
}

func TestOfferingKey(t *testing.T) {
	o := Offering{InstanceType: "g5.xlarge", Zone: "us-east-1a", Capacity: capacity.Spot}
	if o.Key() != "g5.xlarge/us-east-1a/spot" || !capacity.Spot.Launchable() || capacity.Type("x").Launchable() {
		t.Error(o.Key())
	}
}
