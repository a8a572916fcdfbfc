package ec2

import (
	"time"

	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/nodeid"
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
	if !errors.Is(err, cloud.ErrThrottled) || !strings.Contains(err.Error(), "launching gpu-1: RequestLimitExceeded: Request limit exceeded.") {
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

func TestNodeOf(t *testing.T) {
	tags := map[string]string{}
	for _, tg := range nodeid.Tags([]string{"gpu-1", "gpu-2"}) {
		tags[tg.Key] = tg.Value
	}
	// a fleet instance before its CreateTags has no node: never its launch index
	if NodeOf(tags) != "" || NodeOf(nil) != "" {
		t.Error("NodeOf named a node without a burst:node tag")
	}
	tags[TagNode] = "gpu-2"
	if NodeOf(tags) != "gpu-2" {
		t.Error("NodeOf does not follow internal/nodeid")
	}
}

// FuzzDecodeUnavailable: the unavailable-offerings cache file never panics
// its reader.
func FuzzDecodeUnavailable(f *testing.F) {
	f.Add([]byte(`{"entries":[{"instance_type":"g5.xlarge","zone":"us-east-1a","capacity":"spot"}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := NewUnavailableCache(t.TempDir(), time.Minute, time.Now)
		_, _ = c.decode(b)
	})
}
