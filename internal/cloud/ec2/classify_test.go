package ec2

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/burst-hpc/burst/internal/cloud"
)

func TestClassify(t *testing.T) {
	for code, want := range map[string]cloud.Kind{
		"InsufficientInstanceCapacity": cloud.KindInsufficientCapacity, "InsufficientHostCapacity": cloud.KindInsufficientCapacity,
		"SpotMaxPriceTooLow": cloud.KindInsufficientCapacity, "MaxSpotInstanceCountExceeded": cloud.KindQuota,
		"VcpuLimitExceeded": cloud.KindQuota, "RequestLimitExceeded": cloud.KindThrottled, "UnauthorizedOperation": cloud.KindUnauthorized,
		"InvalidInstanceID.NotFound": cloud.KindNotFound, "InvalidKeyPair.NotFound": cloud.KindNotFound,
		"InvalidParameterValue": cloud.KindInvalid, "InvalidFoo": cloud.KindInvalid, "Weird": cloud.KindUnknown,
	} {
		if got := Classify(code); got != want {
			t.Errorf("Classify(%s) = %v, want %v", code, got, want)
		}
	}
	err := wrapErr(fmt.Errorf("op: %w", &smithy.GenericAPIError{Code: "RequestLimitExceeded", Message: "Request limit exceeded."}), "launching gpu-1", nil)
	if !cloud.IsThrottled(err) || !strings.Contains(err.Error(), "launching gpu-1: RequestLimitExceeded: Request limit exceeded.") {
		t.Errorf("wrapErr = %v", err)
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		t.Error("the SDK error is not kept in the chain")
	}
	gone := missingInstanceIDs(&smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound", Message: "The instance IDs 'i-0123456789abcdef0, i-0000000000000beef' do not exist"})
	if !slices.Equal(gone, []string{"i-0123456789abcdef0", "i-0000000000000beef"}) {
		t.Errorf("missing ids = %v", gone)
	}
}

func TestNodeOfAndNodesTags(t *testing.T) {
	var names []string
	for i := range 80 {
		names = append(names, fmt.Sprintf("gpu-long-name-%03d", i))
	}
	tags := map[string]string{}
	for _, tg := range nodesTags(names) {
		if len(*tg.Value) > maxTagValue {
			t.Fatalf("tag %s is %d chars", *tg.Key, len(*tg.Value))
		}
		tags[*tg.Key] = *tg.Value
	}
	if len(tags) < 2 {
		t.Fatalf("80 long names fit one tag? %v", tags)
	}
	for i, n := range names {
		if got := NodeOf(tags, i); got != n {
			t.Fatalf("NodeOf(%d) = %q, want %q", i, got, n)
		}
	}
	if NodeOf(tags, 80) != "" || NodeOf(tags, -1) != "" || NodeOf(nil, 0) != "" {
		t.Error("out of range index resolved")
	}
	if NodeOf(map[string]string{TagNode: "gpu-9", TagNodes: "a,b"}, 1) != "gpu-9" {
		t.Error("TagNode must win")
	}
}

func FuzzNodesTags(f *testing.F) {
	f.Add("gpu-1,gpu-2,gpu-3")
	f.Add(strings.Repeat("x", 300) + ",y")
	f.Fuzz(func(t *testing.T, s string) {
		names := strings.Split(s, ",")
		for _, n := range names {
			if n == "" || len(n) > maxTagValue {
				return
			}
		}
		tags := map[string]string{}
		for _, tg := range nodesTags(names) {
			tags[*tg.Key] = *tg.Value
		}
		for i, n := range names {
			if got := NodeOf(tags, i); got != n {
				t.Fatalf("NodeOf(%d) = %q, want %q", i, got, n)
			}
		}
	})
}
