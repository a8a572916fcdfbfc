package ec2

import (
	"strings"
	"time"
)

// transitionLayout is the time in EC2's StateTransitionReason, e.g.
// "User initiated (2026-12-01 10:00:00 GMT)".
const transitionLayout = "2006-01-02 15:04:05 MST"

// ParseTransitionReason reads EC2's StateTransitionReason: who began the
// last stop or termination ("User", "Service"; "" when it does not say)
// and when, to the second. ok is false when it carries no time (EC2 leaves
// it empty for a running instance, and some reasons have no timestamp).
func ParseTransitionReason(s string) (who string, at time.Time, ok bool) {
	open := strings.LastIndexByte(s, '(')
	if open < 0 || !strings.HasSuffix(strings.TrimSpace(s), ")") {
		return "", time.Time{}, false
	}
	inner := strings.TrimSuffix(strings.TrimSpace(s[open+1:]), ")")
	if len(inner) != len(transitionLayout) || !strings.HasSuffix(inner, " GMT") && !strings.HasSuffix(inner, " UTC") {
		return "", time.Time{}, false
	}
	t, err := time.Parse(transitionLayout, inner)
	if err != nil || t.UTC().Format("2006-01-02 15:04:05") != inner[:len(inner)-4] {
		return "", time.Time{}, false // exactly EC2's format, nothing Parse merely tolerates
	}
	if w, _, found := strings.Cut(strings.TrimSpace(s[:open]), " initiated"); found && w != "" && strings.Trim(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") == "" {
		who = w
	}
	return who, t.UTC(), true
}
