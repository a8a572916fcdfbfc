// Package breaker is burst's launch circuit breaker, one per node class:
// after Threshold consecutive launch failures for a class, launches for it
// stop for a cool-down (doubling on each re-trip, up to MaxCooldown); after
// the cool-down one resume may try again (half-open): success closes the
// breaker, failure opens it again.
//
// burst-resume is a short-lived process, one per Slurm power-up batch, so
// the breaker's state lives in a JSON file in the state directory, read and
// written under an flock (like the ec2 package's unavailable-offerings
// cache); without a directory it lives in memory.
package breaker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/statefile"
)

// File is the breaker's state file in the state directory.
const File = "launch-breaker.json"

// Defaults.
const (
	DefaultThreshold   = 3
	DefaultCooldown    = 5 * time.Minute
	DefaultMaxCooldown = 30 * time.Minute
)

// State is a class's breaker state.
type State string

// States.
const (
	Closed   State = "closed"    // launches allowed
	Open     State = "open"      // launches refused until Until
	HalfOpen State = "half-open" // one trial launch in flight (until Until)
)

// Status is one class's persisted state.
type Status struct {
	Class      string    `json:"class"`
	State      State     `json:"state"`
	Failures   int       `json:"failures"`         // consecutive failures
	Trips      int       `json:"trips"`            // consecutive times opened (drives the back-off)
	Until      time.Time `json:"until,omitzero"`   // Open: end of cool-down; HalfOpen: end of the trial
	Reason     string    `json:"reason,omitempty"` // last failure
	Changed    time.Time `json:"changed,omitzero"` // last state change
	TotalTrips int       `json:"total_trips"`      // times opened ever (metrics)
	// TotalFailures counts every launch failure ever recorded (metrics).
	TotalFailures int `json:"total_failures"`
}

type doc struct {
	Version int      `json:"version"`
	Classes []Status `json:"classes"`
}

// Options configure a Breaker.
type Options struct {
	// Dir is the state directory; "" keeps the state in memory.
	Dir string
	// Threshold is the consecutive failures that open the breaker (default 3).
	Threshold int
	// Cooldown is the first open period (default 5 minutes); each re-trip
	// from half-open doubles it, up to MaxCooldown (default 30 minutes).
	Cooldown    time.Duration
	MaxCooldown time.Duration
	// Trial bounds a half-open trial: when its resume never reports (it was
	// killed), another may try after this long (default: Cooldown).
	Trial  time.Duration
	Now    func() time.Time
	Logger *slog.Logger
}

// Breaker is a per-class launch circuit breaker shared by processes
// through its state file. Safe for concurrent use.
type Breaker struct {
	o    Options
	path string
	log  *slog.Logger
	mu   sync.Mutex
	mem  map[string]Status
}

// New returns a Breaker.
func New(o Options) *Breaker {
	if o.Threshold <= 0 {
		o.Threshold = DefaultThreshold
	}
	if o.Cooldown <= 0 {
		o.Cooldown = DefaultCooldown
	}
	if o.MaxCooldown < o.Cooldown {
		o.MaxCooldown = max(DefaultMaxCooldown, o.Cooldown)
	}
	if o.Trial <= 0 {
		o.Trial = o.Cooldown
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	b := &Breaker{o: o, log: o.Logger, mem: map[string]Status{}}
	if o.Dir != "" {
		b.path = filepath.Join(o.Dir, File)
	}
	return b
}

// Counts reports whether a launch error should count against the breaker:
// capacity, quota, authorization, invalid-request and unknown failures do;
// API throttling (the SDK retries it; a throttling storm is not a broken
// class) and cancellation do not. A nil error does not.
func Counts(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return cloud.KindOf(err) != cloud.KindThrottled
}

// Allow says whether a launch for class may go ahead now. When the breaker
// is open it returns false, the end of the cool-down and a reason for
// Slurm ("burst: launches for class l4 paused until 15:04:05 UTC after 3
// failures: InsufficientInstanceCapacity ..."). After the cool-down the
// first caller gets the half-open trial (ok) and others are refused until
// that trial reports Success or Failure (or Trial passes).
func (b *Breaker) Allow(class string) (ok bool, until time.Time, reason string) {
	var st Status
	err := b.update(func(m map[string]Status) bool {
		now := b.o.Now()
		st = m[class]
		switch st.State {
		case Open:
			if now.Before(st.Until) {
				return false
			}
			st.State, st.Until, st.Changed = HalfOpen, now.Add(b.o.Trial), now
			m[class] = st
			ok = true
			b.log.Info("launch breaker half-open: trying one launch", "class", class, "after_failures", st.Failures)
			return true
		case HalfOpen:
			if now.Before(st.Until) {
				return false
			}
			st.Until, st.Changed = now.Add(b.o.Trial), now // the last trial never reported
			m[class] = st
			ok = true
			return true
		default:
			ok = true
			return false
		}
	})
	if err != nil {
		b.log.Warn("launch breaker state unreadable; allowing the launch", "class", class, "err", err)
		return true, time.Time{}, ""
	}
	if ok {
		return true, time.Time{}, ""
	}
	return false, st.Until, reasonFor(class, st)
}

func reasonFor(class string, st Status) string {
	what := "paused until " + st.Until.UTC().Format("15:04:05") + " UTC"
	if st.State == HalfOpen {
		what = "paused while a trial launch runs (until " + st.Until.UTC().Format("15:04:05") + " UTC)"
	}
	r := fmt.Sprintf("burst: launches for class %s %s after %d failures", class, what, st.Failures)
	if st.Reason != "" {
		r += ": " + st.Reason
	}
	if len(r) > 120 {
		r = r[:117] + "..."
	}
	return r
}

// Failure records a failed launch for class (reason: what went wrong, e.g.
// cloud.Reason(err) without its "burst: " prefix). The Threshold-th
// consecutive failure, or any failure of a half-open trial, opens the
// breaker.
func (b *Breaker) Failure(class, reason string) {
	err := b.update(func(m map[string]Status) bool {
		now := b.o.Now()
		st := m[class]
		st.Class = class
		st.Failures++
		st.TotalFailures++
		st.Reason = trimReason(reason)
		if st.State == HalfOpen || (st.State != Open && st.Failures >= b.o.Threshold) {
			cool := b.o.Cooldown
			for i := 0; i < st.Trips && cool < b.o.MaxCooldown; i++ {
				cool *= 2
			}
			cool = min(cool, b.o.MaxCooldown)
			st.State, st.Until, st.Changed = Open, now.Add(cool), now
			st.Trips++
			st.TotalTrips++
			b.log.Warn("launch breaker open: pausing launches for the class", "class", class, "failures", st.Failures,
				"cooldown", cool, "until", st.Until, "reason", st.Reason)
		} else if st.State == "" {
			st.State = Closed
		}
		m[class] = st
		return true
	})
	if err != nil {
		b.log.Error("recording a launch failure in the breaker", "class", class, "err", err)
	}
}

// Success records a successful launch for class and closes its breaker.
func (b *Breaker) Success(class string) {
	err := b.update(func(m map[string]Status) bool {
		st, ok := m[class]
		if !ok || (st.State == Closed && st.Failures == 0) {
			return false
		}
		if st.State != Closed {
			b.log.Info("launch breaker closed: launches for the class succeed again", "class", class)
		}
		st.State, st.Failures, st.Trips, st.Until, st.Reason, st.Changed = Closed, 0, 0, time.Time{}, "", b.o.Now()
		m[class] = st
		return true
	})
	if err != nil {
		b.log.Error("recording a launch success in the breaker", "class", class, "err", err)
	}
}

// Snapshot returns every class's status, sorted by class.
func (b *Breaker) Snapshot() ([]Status, error) {
	var out []Status
	err := b.update(func(m map[string]Status) bool {
		for _, s := range m {
			out = append(out, s)
		}
		return false
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Class < out[j].Class })
	return out, err
}

func trimReason(s string) string {
	if len(s) > 200 {
		s = s[:197] + "..."
	}
	return s
}

// update runs f on the state under the lock; f returns whether it changed
// anything (then the file is rewritten).
func (b *Breaker) update(f func(map[string]Status) bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.path == "" {
		f(b.mem)
		return nil
	}
	err := statefile.Update(b.path, 0o644, func(old []byte) ([]byte, bool, error) {
		m, err := decode(b.path, old)
		if err != nil {
			b.log.Warn("launch breaker file is corrupt; starting afresh", "file", b.path, "err", err)
			m = map[string]Status{}
		}
		if !f(m) {
			return nil, false, nil
		}
		d := doc{Version: 1}
		for _, s := range m {
			d.Classes = append(d.Classes, s)
		}
		sort.Slice(d.Classes, func(i, j int) bool { return d.Classes[i].Class < d.Classes[j].Class })
		data, err := json.MarshalIndent(d, "", "  ")
		return data, err == nil, err
	})
	if err != nil {
		return fmt.Errorf("updating the launch breaker state: %w", err)
	}
	return nil
}

func decode(path string, data []byte) (map[string]Status, error) {
	m := map[string]Status{}
	if len(data) == 0 {
		return m, nil
	}
	var d doc
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("parsing the launch breaker state %s (delete it to reset every class): %w", path, err)
	}
	for _, s := range d.Classes {
		if s.Class != "" {
			m[s.Class] = s
		}
	}
	return m, nil
}
