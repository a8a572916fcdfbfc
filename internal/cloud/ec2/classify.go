package ec2

import (
	"errors"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"

	"github.com/burst-hpc/burst/internal/cloud"
)

// codeKinds classifies EC2 error codes, once, for the whole project.
var codeKinds = map[string]cloud.Kind{
	// The pool cannot give an instance now: try another offering.
	"InsufficientInstanceCapacity":         cloud.KindInsufficientCapacity,
	"InsufficientHostCapacity":             cloud.KindInsufficientCapacity,
	"InsufficientReservedInstanceCapacity": cloud.KindInsufficientCapacity,
	"InsufficientCapacity":                 cloud.KindInsufficientCapacity,
	"InsufficientCapacityOnHost":           cloud.KindInsufficientCapacity,
	"SpotMaxPriceTooLow":                   cloud.KindInsufficientCapacity,
	"Unsupported":                          cloud.KindInsufficientCapacity, // type not offered in that zone
	"UnfulfillableCapacity":                cloud.KindInsufficientCapacity,
	"ReservationCapacityExceeded":          cloud.KindInsufficientCapacity, // a capacity reservation is full
	// Rate limits.
	"RequestLimitExceeded": cloud.KindThrottled,
	"Throttling":           cloud.KindThrottled,
	"ThrottlingException":  cloud.KindThrottled,
	"ServiceUnavailable":   cloud.KindThrottled,
	"Unavailable":          cloud.KindThrottled,
	"InternalError":        cloud.KindThrottled, // transient on EC2's side: retry later
	// Account limits.
	"MaxSpotInstanceCountExceeded":      cloud.KindQuota,
	"MaxSpotFleetRequestCountExceeded":  cloud.KindQuota,
	"InstanceLimitExceeded":             cloud.KindQuota,
	"VcpuLimitExceeded":                 cloud.KindQuota,
	"MaxFleetCountExceeded":             cloud.KindQuota,
	"InsufficientFreeAddressesInSubnet": cloud.KindQuota,
	"ResourceLimitExceeded":             cloud.KindQuota,
	// Credentials and IAM.
	"UnauthorizedOperation": cloud.KindUnauthorized,
	"AuthFailure":           cloud.KindUnauthorized,
	"Blocked":               cloud.KindUnauthorized,
	"OptInRequired":         cloud.KindUnauthorized,
	"PendingVerification":   cloud.KindUnauthorized,
	"InvalidClientTokenId":  cloud.KindUnauthorized,
	"SignatureDoesNotMatch": cloud.KindUnauthorized,
	"ExpiredToken":          cloud.KindUnauthorized,
	"AccessDenied":          cloud.KindUnauthorized,
	// Missing resources.
	"InvalidInstanceID.NotFound":                  cloud.KindNotFound,
	"InvalidLaunchTemplateName.NotFoundException": cloud.KindNotFound,
	"InvalidLaunchTemplateId.NotFound":            cloud.KindNotFound,
	"InvalidLaunchTemplateId.VersionNotFound":     cloud.KindNotFound,
	"InvalidSubnetID.NotFound":                    cloud.KindNotFound,
	"InvalidGroup.NotFound":                       cloud.KindNotFound,
	"InvalidAMIID.NotFound":                       cloud.KindNotFound,
	"InvalidPlacementGroup.Unknown":               cloud.KindNotFound,
	"InvalidCapacityReservationId.NotFound":       cloud.KindNotFound,
	// Wrong requests or configuration.
	"InvalidParameterValue":       cloud.KindInvalid,
	"InvalidParameterCombination": cloud.KindInvalid,
	"InvalidParameter":            cloud.KindInvalid,
	"MissingParameter":            cloud.KindInvalid,
	"IdempotentParameterMismatch": cloud.KindInvalid,
	"InvalidInstanceID.Malformed": cloud.KindInvalid,
	"InvalidAction":               cloud.KindInvalid,
	"DryRunOperation":             cloud.KindInvalid,
}

// Classify maps an EC2 error code to a cloud.Kind.
func Classify(code string) cloud.Kind {
	if k, ok := codeKinds[code]; ok {
		return k
	}
	switch {
	case strings.HasSuffix(code, ".NotFound") || strings.HasSuffix(code, ".NotFoundException"):
		return cloud.KindNotFound
	case strings.HasPrefix(code, "Invalid") || strings.HasSuffix(code, ".Malformed"):
		return cloud.KindInvalid
	case strings.HasPrefix(code, "Insufficient"):
		return cloud.KindInsufficientCapacity
	}
	return cloud.KindUnknown
}

// cachesPool reports whether a code means that the pool itself is
// unavailable for a while (goes into the unavailable-offerings cache).
func cachesPool(code string) bool {
	return Classify(code) == cloud.KindInsufficientCapacity
}

// wrapErr classifies an SDK error into a *cloud.Error (nil stays nil).
func wrapErr(err error, op string, offs []cloud.Offering) error {
	if err == nil {
		return nil
	}
	e := &cloud.Error{Op: op, Offerings: offs, Err: err, Kind: cloud.KindUnknown}
	var api smithy.APIError
	var quota ratelimit.QuotaExceededError
	switch {
	case errors.As(err, &api):
		e.Code, e.Message, e.Kind = api.ErrorCode(), api.ErrorMessage(), Classify(api.ErrorCode())
	case errors.As(err, &quota):
		// The SDK's client-side retry quota ran out after repeated failures,
		// which in practice are throttling.
		e.Code, e.Message, e.Kind = "RetryQuotaExceeded", err.Error(), cloud.KindThrottled
	default:
		var maxErr *retry.MaxAttemptsError
		if errors.As(err, &maxErr) {
			e.Kind = cloud.KindThrottled
		}
		e.Message = err.Error()
	}
	return e
}

var instanceIDRe = regexp.MustCompile(`i-[0-9a-f]{8,17}`)

// missingInstanceIDs extracts the ids named by an InvalidInstanceID.NotFound message.
func missingInstanceIDs(err error) []string {
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "InvalidInstanceID.NotFound" {
		return nil
	}
	return instanceIDRe.FindAllString(api.ErrorMessage(), -1)
}
