package stack

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"time"
)

// Event is one thing that happened to a job or node.
type Event struct {
	At      time.Time
	Subject string // "job 3" or a node name
	What    string
	Detail  string
}

// Timeline collects events from the emulator hooks, the log and the tests.
type Timeline struct {
	mu     sync.Mutex
	start  time.Time
	events []Event
	live   io.Writer
}

// NewTimeline starts an empty timeline.
func NewTimeline() *Timeline { return &Timeline{start: time.Now()} }

// Live prints each event to w as it is added.
func (t *Timeline) Live(w io.Writer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.live = w
}

// Add records an event now.
func (t *Timeline) Add(subject, what, detail string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := Event{At: time.Now(), Subject: subject, What: what, Detail: detail}
	t.events = append(t.events, e)
	if t.live != nil {
		fmt.Fprintf(t.live, "%7.1fs  %-10s %-18s %s\n", e.At.Sub(t.start).Seconds(), e.Subject, e.What, e.Detail)
	}
}

// Events returns a copy of the events in time order.
func (t *Timeline) Events() []Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]Event(nil), t.events...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// First returns the first event of subject with what, if any.
func (t *Timeline) First(subject, what string) (Event, bool) {
	for _, e := range t.Events() {
		if e.Subject == subject && e.What == what {
			return e, true
		}
	}
	return Event{}, false
}
