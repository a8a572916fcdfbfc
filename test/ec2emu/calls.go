package ec2emu

import (
	"sort"
	"strings"
)

// InjectFault adds a fault; the returned func removes it.
func (s *Server) InjectFault(f Fault) (remove func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Service == "" {
		f.Service = "ec2"
	}
	ff := &fault{Fault: f, left: f.Count}
	if f.For > 0 {
		ff.until = s.Now().Add(f.For)
	}
	s.faults = append(s.faults, ff)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, x := range s.faults {
			if x == ff {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
				return
			}
		}
	}
}

// pickFault returns the fault that hits this call, if any; s.mu held.
func (s *Server) pickFault(service, action string) *fault {
	now := s.Now()
	live := s.faults[:0]
	var hit *fault
	for _, f := range s.faults {
		expired := (!f.until.IsZero() && now.After(f.until)) || (f.Count > 0 && f.left <= 0)
		if expired {
			continue
		}
		live = append(live, f)
		if hit != nil || f.Service != service || (f.Action != "" && f.Action != action) {
			continue
		}
		switch {
		case f.Count > 0:
			f.left--
			hit = f
		case f.Fraction > 0:
			if s.rng.Float64() < f.Fraction {
				hit = f
			}
		default:
			hit = f
		}
	}
	s.faults = live
	return hit
}

// Calls returns every recorded call, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallCount counts recorded calls of one action ("" = all).
func (s *Server) CallCount(action string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if action == "" || c.Action == action {
			n++
		}
	}
	return n
}

// Actions returns the distinct EC2 actions called, sorted, without the
// service prefix (see IAMActions for every service).
func (s *Server) Actions() []string {
	var out []string
	for _, a := range s.IAMActions() {
		if name, ok := strings.CutPrefix(a, "ec2:"); ok {
			out = append(out, name)
		}
	}
	return out
}

// IAMActions returns the distinct actions called as IAM names, sorted:
// "ec2:CreateFleet", "sqs:ReceiveMessage", ...
func (s *Server) IAMActions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, c := range s.calls {
		seen[c.Service+":"+c.Action] = true
	}
	out := make([]string, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// ResetCalls forgets the recorded calls.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}
