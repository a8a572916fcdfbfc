package gpuhealth

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Action is what burst does about an event.
type Action string

// Actions.
const (
	// Replace: the hardware is bad. Drain the node with the event as its
	// reason, checkpoint-signal and requeue its jobs, hand the node back
	// (its instance is terminated, never reused) and record the event.
	Replace Action = "replace"
	// Note: the application's own fault (or not worth an instance). The
	// event is recorded and noted on the node's jobs; the node stays.
	Note Action = "note"
	// Ignore: recorded by the sizer only.
	Ignore Action = "ignore"
)

// ParseAction reads an action name.
func ParseAction(s string) (Action, error) {
	switch a := Action(s); a {
	case Replace, Note, Ignore:
		return a, nil
	}
	return "", fmt.Errorf("unknown action %q: want replace, note or ignore", s)
}

// ParseKind reads an event kind name (not "xid": Xids are keyed by code).
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if string(k) == s && k != KindXid {
			return k, nil
		}
	}
	var names []string
	for _, k := range Kinds {
		if k != KindXid {
			names = append(names, string(k))
		}
	}
	return "", fmt.Errorf("unknown GPU health event %q: want one of %s (Xids go under xid:)", s, strings.Join(names, ", "))
}

// ParseXid reads an Xid code: a decimal number 1..999.
func ParseXid(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n < 1 || n > 999 {
		return 0, fmt.Errorf("%q is not an Xid code: want a decimal number 1..999", s)
	}
	return n, nil
}

// Entry is one row of the Xid table.
type Entry struct {
	Action Action
	// What the Xid means, in our words (NVIDIA's catalogue has the detail).
	What string
}

// XidTable is burst's default action per Xid code. It follows the
// "Resolution Bucket (Immediate Action)" column of NVIDIA's Xid catalogue
// (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html):
// codes whose remedy is a GPU reset, a node reboot or a hardware check
// mean the instance is bad and is replaced (EC2 gives us a new one faster
// than it would be repaired); codes whose remedy is restarting the
// application are the job's own fault and only noted. An Xid not listed
// here is noted.
var XidTable = map[uint64]Entry{
	// application faults: the job did something wrong, the GPU is fine
	13: {Note, "graphics engine exception (often an out-of-bounds access in the job's kernel)"},
	31: {Note, "GPU memory page fault (the job's illegal address)"},
	43: {Note, "GPU stopped processing a channel (the job's fault, the GPU recovers)"},
	45: {Note, "preemptive cleanup after an earlier error (a job was killed)"},
	// the hardware is bad
	48:  {Replace, "double-bit ECC error"},
	61:  {Replace, "internal micro-controller breakpoint/warning"},
	62:  {Replace, "internal micro-controller halt"},
	63:  {Replace, "ECC page retirement or row remapping recorded: needs a GPU reset"},
	64:  {Replace, "ECC page retirement or row remapper failure"},
	74:  {Replace, "NVLink error"},
	79:  {Replace, "GPU has fallen off the bus"},
	92:  {Replace, "high single-bit ECC error rate"},
	94:  {Replace, "contained ECC error: needs a GPU reset"},
	95:  {Replace, "uncontained ECC error"},
	119: {Replace, "GSP RPC timeout"},
	120: {Replace, "GSP error"},
	140: {Replace, "unrecovered ECC error"},
}

// KindTable is the default action of every other event kind.
var KindTable = map[Kind]Action{
	KindECCVolatile: Replace,
	// a lifetime count includes errors already handled by row remapping
	// before this instance was ours: the volatile count and the remapper's
	// state say whether the GPU is bad now
	KindECCAggregate:        Note,
	KindRetiredPagesPending: Replace,
	KindRowRemapPending:     Replace,
	KindRowRemapFailed:      Replace,
	KindNVLink:              Replace,
	KindLost:                Replace,
	KindSlowdown:            Replace,
	KindCount:               Replace,
	KindModel:               Replace,
}

// Overrides are the operator's changes to the defaults (burst.yaml
// gpu_health.xid and gpu_health.events).
type Overrides struct {
	Xid   map[uint64]Action
	Kinds map[Kind]Action
}

// Table classifies events: the defaults with the operator's overrides.
type Table struct {
	o Overrides
}

// NewTable returns the default table with o applied.
func NewTable(o Overrides) *Table { return &Table{o: o} }

// Classify returns the action for e and why (the table row's meaning, or
// "operator override").
func (t *Table) Classify(e Event) (Action, string) {
	if e.Kind == KindXid {
		if a, ok := t.o.Xid[e.Xid]; ok {
			return a, "operator override (gpu_health.xid)"
		}
		if en, ok := XidTable[e.Xid]; ok {
			return en.Action, en.What
		}
		return Note, "Xid not in burst's table"
	}
	if a, ok := t.o.Kinds[e.Kind]; ok {
		return a, "operator override (gpu_health.events)"
	}
	if a, ok := KindTable[e.Kind]; ok {
		return a, string(e.Kind)
	}
	return Note, "unknown event kind"
}

// Xids lists the codes of XidTable in order (for docs and tests).
func Xids() []uint64 {
	out := make([]uint64, 0, len(XidTable))
	for x := range XidTable {
		out = append(out, x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// ParseOverrides reads the operator's overrides: xid maps an Xid code
// ("79") to an action, events an event kind ("clock_slowdown") to one.
// Every bad entry is an error naming its key (sorted).
func ParseOverrides(xid, events map[string]string) (Overrides, []error) {
	o := Overrides{Xid: map[uint64]Action{}, Kinds: map[Kind]Action{}}
	var errs []error
	for _, k := range sortedKeys(xid) {
		x, err := ParseXid(k)
		if err != nil {
			errs = append(errs, fmt.Errorf("xid.%s: %w", k, err))
			continue
		}
		a, err := ParseAction(xid[k])
		if err != nil {
			errs = append(errs, fmt.Errorf("xid.%s: %w", k, err))
			continue
		}
		o.Xid[x] = a
	}
	for _, k := range sortedKeys(events) {
		kind, err := ParseKind(k)
		if err != nil {
			errs = append(errs, fmt.Errorf("events.%s: %w", k, err))
			continue
		}
		a, err := ParseAction(events[k])
		if err != nil {
			errs = append(errs, fmt.Errorf("events.%s: %w", k, err))
			continue
		}
		o.Kinds[kind] = a
	}
	return o, errs
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
