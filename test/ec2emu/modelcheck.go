package ec2emu

import "github.com/burst-hpc/burst/test/ec2emu/awsmodel"

// checkModel records where a successful response breaks AWS's API model
// (Options.Models; nothing when unset).
func (s *Server) checkModel(service, action string, body []byte) {
	if s.opts.Models == nil {
		return
	}
	v := s.opts.Models.Check(service, action, body)
	if len(v) == 0 {
		return
	}
	s.mu.Lock()
	s.violations = append(s.violations, v...)
	s.mu.Unlock()
	for _, x := range v {
		s.log.Error("response breaks AWS's API model", "service", service, "violation", x.String())
	}
}

// ModelViolations lists every way a response broke AWS's API model since
// the server started (Options.Models).
func (s *Server) ModelViolations() []awsmodel.Violation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]awsmodel.Violation(nil), s.violations...)
}
