package server

import (
	"context"
	"math"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/store"
)

// phaseRe bounds the phase label: the bootstrap's step names and the
// report's own phases are short lower-case words.
var phaseRe = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)

// maxPhases bounds a report.
const maxPhases = 32

// maxBootSkew is how far ahead of the sizer's clock a node's may run.
const maxBootSkew = 5 * time.Minute

// recordBoot stores when a node's bootstrap started, slurmd started and
// the node registered (the jobs' waits split by them), for a report with a
// start time from a node credential (its instance).
func (s *Server) recordBoot(r *http.Request, b sizerapi.BootReport) error {
	if b.InstanceID == "" || b.Started.IsZero() {
		return nil
	}
	bt := store.Boot{InstanceID: b.InstanceID, Node: b.Node, Started: b.Started}
	if t, ok := b.End(sizerapi.PhaseSlurmd); ok {
		bt.Slurmd = t
		if t, ok := b.End(sizerapi.PhaseRegister); ok {
			bt.Registered = t
		}
	}
	return s.st.RecordBoot(context.WithoutCancel(r.Context()), bt)
}

// boot records a node's boot phases (burst_boot_phase_seconds) and logs
// them, one field per phase; a report from a node's credential also
// stores its boot's times (recordBoot).
func (s *Server) boot(w http.ResponseWriter, r *http.Request, p auth.Principal) (any, error) {
	var b sizerapi.BootReport
	if err := decode(r, &b); err != nil {
		return nil, err
	}
	if p.Node != "" {
		// the credential's node and instance; the type from the sizer's records
		if b.Node == "" {
			b.Node = p.Node
		}
		if b.Node != p.Node || b.InstanceID != "" && b.InstanceID != p.InstanceID {
			return nil, forbidden("credential of node %s (%s) may not report for node %q (%s)", p.Node, p.InstanceID, b.Node, b.InstanceID)
		}
		b.InstanceID, b.InstanceType = p.InstanceID, nodeIdentity(r).InstanceType
	}
	if b.Node == "" {
		return nil, badRequest("boot report has no node")
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
	if b.Started.After(s.now().Add(maxBootSkew)) {
		return nil, badRequest("boot report: the bootstrap started at %s, more than %s after the sizer's clock (%s); is the node's clock synchronised?",
			b.Started.UTC().Format(time.RFC3339), maxBootSkew, s.now().UTC().Format(time.RFC3339))
	}
	if p.Node != "" { // only a node's own credential says when its instance booted
		if err := s.recordBoot(r, b); err != nil {
			return nil, err
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
