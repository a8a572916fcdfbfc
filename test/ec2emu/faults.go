package ec2emu

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Production failure modes beyond an error code (Fault): a short fleet,
// EC2's eventual consistency, a call held in flight, an instance whose host
// fails during boot. The e2e fault tests drive them.

// faultState is the server's state for these faults; guarded by s.mu.
type faultState struct {
	shortFleets  int           // CreateFleet calls still to come up short
	shortBy      int           // instances each short fleet leaves out
	instanceLag  time.Duration // a new instance is absent from DescribeInstances this long
	tagLag       time.Duration // ... and its tags this long
	holds        []*Hold
	shortFleeted int // short fleets answered
}

// ShortFleets makes the next count CreateFleet calls that would launch two
// or more instances launch missing fewer (at least one), whatever their
// MinTargetCapacity, with an InsufficientInstanceCapacity error for the
// pool: what a client sees when EC2 does not honour all-or-nothing (a fleet
// of type instant may return partial capacity with errors). count 0 turns
// it off.
func (s *Server) ShortFleets(count, missing int) error {
	if count < 0 || missing < 1 {
		return fmt.Errorf("short fleets: want count >= 0 and missing >= 1, got %d and %d", count, missing)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fs.shortFleets, s.fs.shortBy = count, missing
	return nil
}

// ShortFleeted counts the CreateFleet answers ShortFleets cut short.
func (s *Server) ShortFleeted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fs.shortFleeted
}

// SetDescribeLag models EC2's eventual consistency for later launches: for
// instances after an instance's launch DescribeInstances does not list it
// (asked for by id: InvalidInstanceID.NotFound), and for tags it lists it
// without tags (so tag filters miss it). Zero turns either off.
func (s *Server) SetDescribeLag(instances, tags time.Duration) error {
	if instances < 0 || tags < 0 {
		return fmt.Errorf("describe lag: negative duration %v or %v", instances, tags)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fs.instanceLag, s.fs.tagLag = instances, tags
	return nil
}

// describedAs is what DescribeInstances shows of in now: nil when the
// instance is not visible yet, a copy without tags while its tags are not;
// s.mu held.
func (s *Server) describedAs(in *instance) *instance {
	age := s.Now().Sub(in.LaunchTime)
	if s.fs.instanceLag > 0 && age < s.fs.instanceLag {
		return nil
	}
	if s.fs.tagLag > 0 && age < s.fs.tagLag {
		c := *in
		c.Tags = nil
		return &c
	}
	return in
}

// Hold keeps calls of one action in flight: the call takes effect, then
// its response waits until Release (a client blocked in a slow call while
// the world changes around it).
type Hold struct {
	action  string
	arrived chan struct{}
	release chan struct{}
	once    sync.Once
	arrOnce sync.Once
}

// HoldCalls holds every later successful call of action until the returned
// Hold is released (Close releases it too).
func (s *Server) HoldCalls(action string) *Hold {
	h := &Hold{action: action, arrived: make(chan struct{}), release: make(chan struct{})}
	s.mu.Lock()
	s.fs.holds = append(s.fs.holds, h)
	s.mu.Unlock()
	return h
}

// Arrived is closed when the first held call has taken effect.
func (h *Hold) Arrived() <-chan struct{} { return h.arrived }

// Release lets the held calls answer (once; later calls are no longer held).
func (h *Hold) Release() { h.once.Do(func() { close(h.release) }) }

// wait blocks a finished call of action while a hold on it is unreleased;
// s.mu not held.
func (s *Server) wait(action string) {
	s.mu.Lock()
	var hs []*Hold
	for _, h := range s.fs.holds {
		if h.action == action {
			hs = append(hs, h)
		}
	}
	s.mu.Unlock()
	for _, h := range hs {
		select {
		case <-h.release:
			continue
		default:
		}
		h.arrOnce.Do(func() { close(h.arrived) })
		<-h.release
	}
}

// releaseHolds releases every hold (Close).
func (s *Server) releaseHolds() {
	s.mu.Lock()
	hs := s.fs.holds
	s.mu.Unlock()
	for _, h := range hs {
		h.Release()
	}
}

// Crash is the instance's host failing while it boots or runs: it goes to
// shutting-down and terminated with StateReason Server.InternalError, as EC2
// reports an instance that terminated on launch or lost its hardware.
func (s *Server) Crash(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.lookup(id)
	if in == nil {
		return fmt.Errorf("crashing %s: no such instance", id)
	}
	if !in.live() {
		return fmt.Errorf("crashing %s: it is %s", id, in.State)
	}
	s.terminate(in, byHost)
	return nil
}

// jitter is a random extra delay in [0, d); s.mu held.
func jitter(r *rand.Rand, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(r.Int64N(int64(d)))
}
