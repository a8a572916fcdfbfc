package cloud

import (
	"errors"
	"sort"
	"strings"

	"github.com/burst-hpc/burst/internal/capacity"
)

// Kind classifies a cloud error by what the caller should do about it.
type Kind int

// Error kinds.
const (
	KindUnknown              Kind = iota // anything else; not retried specially
	KindInsufficientCapacity             // the pool has no capacity now: try another offering
	KindThrottled                        // API rate limit: back off and retry
	KindQuota                            // account limit (vCPU, spot count): needs a quota raise
	KindUnauthorized                     // credentials or IAM policy: needs an admin
	KindNotFound                         // the resource does not exist (any more)
	KindInvalid                          // the request or configuration is wrong: needs a fix
)

var kindNames = map[Kind]string{
	KindUnknown: "unknown", KindInsufficientCapacity: "insufficient capacity", KindThrottled: "throttled",
	KindQuota: "quota exceeded", KindUnauthorized: "unauthorized", KindNotFound: "not found", KindInvalid: "invalid request",
}

// String names the kind.
func (k Kind) String() string { return kindNames[k] }

// Sentinel errors, one per Kind; an *Error matches its kind's sentinel with
// errors.Is.
var (
	ErrInsufficientCapacity = errors.New("insufficient capacity")
	ErrThrottled            = errors.New("throttled")
	ErrQuota                = errors.New("quota exceeded")
	ErrUnauthorized         = errors.New("unauthorized")
	ErrNotFound             = errors.New("not found")
	ErrInvalid              = errors.New("invalid request")
)

var sentinels = map[Kind]error{
	KindInsufficientCapacity: ErrInsufficientCapacity, KindThrottled: ErrThrottled, KindQuota: ErrQuota,
	KindUnauthorized: ErrUnauthorized, KindNotFound: ErrNotFound, KindInvalid: ErrInvalid,
}

// Error is a classified cloud error: the provider's code (e.g.
// "InsufficientInstanceCapacity"), its message, and the offerings it
// concerns.
type Error struct {
	Kind      Kind
	Code      string     // provider error code, e.g. "InsufficientInstanceCapacity"
	Message   string     // provider message
	Op        string     // what burst was doing, e.g. "launching gpu-1"
	Offerings []Offering // offerings the error concerns; may be empty
	Err       error      // underlying error (SDK error), may be nil
}

// Error renders "op: Code for types capacity in zones: message".
func (e *Error) Error() string {
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	b.WriteString(e.Summary())
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Summary is the code and the offerings without the message, e.g.
// "InsufficientInstanceCapacity for g5.xlarge,g6.xlarge spot in us-east-1a".
func (e *Error) Summary() string {
	code := e.Code
	if code == "" {
		code = e.Kind.String()
	}
	if len(e.Offerings) == 0 {
		return code
	}
	return code + " for " + DescribeOfferings(e.Offerings)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is matches the sentinel of e's kind.
func (e *Error) Is(target error) bool {
	s, ok := sentinels[e.Kind]
	return ok && s == target
}

// DescribeOfferings renders offerings compactly, grouped by capacity type:
// "g5.xlarge,g6.xlarge spot in us-east-1a,us-east-1b; g5.xlarge on-demand in us-east-1a".
func DescribeOfferings(offs []Offering) string {
	type group struct{ types, zones []string }
	var order []capacity.Type
	groups := map[capacity.Type]*group{}
	add := func(list []string, v string) []string {
		for _, x := range list {
			if x == v {
				return list
			}
		}
		return append(list, v)
	}
	for _, o := range offs {
		g := groups[o.Capacity]
		if g == nil {
			g = &group{}
			groups[o.Capacity] = g
			order = append(order, o.Capacity)
		}
		g.types = add(g.types, o.InstanceType)
		g.zones = add(g.zones, o.Zone)
	}
	parts := make([]string, 0, len(order))
	for _, c := range order {
		g := groups[c]
		zs := append([]string(nil), g.zones...)
		sort.Strings(zs)
		parts = append(parts, strings.Join(g.types, ",")+" "+string(c)+" in "+strings.Join(zs, ","))
	}
	return strings.Join(parts, "; ")
}

// AsError finds an *Error in err's chain.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// KindOf returns the kind of the first *Error in err's chain, KindUnknown otherwise.
func KindOf(err error) Kind {
	if e, ok := AsError(err); ok {
		return e.Kind
	}
	for k, s := range sentinels {
		if errors.Is(err, s) {
			return k
		}
	}
	return KindUnknown
}

// IsNotFound reports whether err says a resource does not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
