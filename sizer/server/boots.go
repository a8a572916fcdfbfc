package server

import (
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strings"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

// phaseRe bounds the phase label: the bootstrap's step names and the
// report's own phases are short lower-case words.
var phaseRe = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)

// maxPhases bounds a report.
const maxPhases = 32

// boot records a node's boot phases (burst_boot_phase_seconds) and logs
// them, one field per phase.
func (s *Server) boot(w http.ResponseWriter, r *http.Request, p auth.Principal) (any, error) {
	var b sizerapi.BootReport
	if err := decode(r, &b); err != nil {
		return nil, err
	}
	if b.Node == "" {
		return nil, badRequest("boot report has no node")
	}
	if !p.MayReportFor(b.Node) {
		return nil, &apiError{403, sizerapi.CodeForbidden, fmt.Sprintf("credential of node %s may not report for node %q", p.Node, b.Node)}
	}
	if len(b.Phases) == 0 || len(b.Phases) > maxPhases {
		return nil, badRequest("boot report has %d phases; want 1 to %d", len(b.Phases), maxPhases)
	}
	for _, ph := range b.Phases {
		if !phaseRe.MatchString(ph.Name) {
			return nil, badRequest("boot phase name %q: want lower-case letters, digits and dashes", ph.Name)
		}
		if ph.Seconds < 0 || math.IsNaN(ph.Seconds) || ph.Seconds > 86400 {
			return nil, badRequest("boot phase %s: %g seconds is not between 0 and a day", ph.Name, ph.Seconds)
		}
	}
	class := classOfNode(b.Node)
	attrs := []any{"node", b.Node, "class", class, "instance_id", b.InstanceID, "instance_type", b.InstanceType, "ok", b.OK}
	for _, ph := range b.Phases {
		if !ph.Skipped {
			s.boots.WithLabelValues(class, ph.Name).Observe(ph.Seconds)
		}
		attrs = append(attrs, ph.Name+"_s", ph.Seconds)
	}
	s.log.Info("node boot", attrs...)
	return struct{}{}, nil
}

// classOfNode is a node name without its -<n> suffix ("a10g-3" -> "a10g"):
// the label stays one value per class.
func classOfNode(node string) string {
	i := strings.LastIndexByte(node, '-')
	if i <= 0 {
		return "unknown"
	}
	if c := node[:i]; phaseRe.MatchString(c) {
		return c
	}
	return "unknown"
}
